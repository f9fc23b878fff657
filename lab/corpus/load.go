package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/cordontype"
)

// Doc is one document of a corpus directory.
type Doc struct {
	ID   string
	Text string
}

// Load reads every "*.md" file under dir (recursively) as a document whose id
// is the file's path relative to dir, with "/" separators and without ".md".
// Documents come back sorted by id. An id Cordon would refuse is an error that
// names the file.
func Load(dir string) ([]Doc, error) {
	var docs []Doc
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		id := strings.TrimSuffix(filepath.ToSlash(rel), ".md")
		if err := cordontype.ValidateDocID(id); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		docs = append(docs, Doc{ID: id, Text: string(b)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load corpus %s: %w", dir, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("load corpus %s: %w", dir, ErrEmptyCorpus)
	}
	slices.SortFunc(docs, func(a, b Doc) int { return strings.Compare(a.ID, b.ID) })
	return docs, nil
}

// Fingerprint is a digest of a corpus: SHA-256 over every document's id and
// text, in id order, each length-prefixed. Two corpora with the same
// fingerprint give the same evaluation numbers.
func Fingerprint(docs []Doc) string {
	h := sha256.New()
	for _, d := range docs {
		fmt.Fprintf(h, "%d:%s%d:%s", len(d.ID), d.ID, len(d.Text), d.Text)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
