package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/store/postgres"
)

func init() {
	register(&command{
		name:    "ingest",
		summary: "load Markdown/text files into a tenant (resumable)",
		usage: `Usage: cordon ingest --tenant NAME [flags] PATH...

Puts every Markdown or text file under each PATH (a file or a folder, walked
recursively) into the tenant, one transaction per file. A document's id is its
path relative to the PATH argument it was found under (for a file argument, its
name), with characters outside A-Z a-z 0-9 . _ : / - replaced by '_'.

Resumable: a file whose content hash equals the stored document's is skipped,
so re-running after an interruption only loads what is missing or changed
(--force re-puts everything, e.g. after changing --classification). A progress
bar with rate and ETA goes to stderr; failures are listed at the end and make
the exit status 1.

Examples:
  cordon ingest --tenant wholesale --classification internal docs/
  cordon ingest --tenant wholesale --classification confidential --barrier deal-x memos/falcon.md
`,
		run: runIngest,
	})
}

var ingestExts = []string{".md", ".markdown", ".txt", ".text"}

type ingestFile struct {
	path, docID string
}

// docIDFor maps a relative path to a doc id.
func docIDFor(rel string) string {
	rel = filepath.ToSlash(rel)
	b := []byte(rel)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:/-", c) >= 0) {
			b[i] = '_'
		}
	}
	return string(b)
}

func collectFiles(paths []string) ([]ingestFile, error) {
	var out []ingestFile
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, ingestFile{path: p, docID: docIDFor(filepath.Base(p))})
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !slices.Contains(ingestExts, strings.ToLower(filepath.Ext(path))) {
				return nil
			}
			rel, err := filepath.Rel(p, path)
			if err != nil {
				return err
			}
			out = append(out, ingestFile{path: path, docID: docIDFor(rel)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// progress draws a one-line progress bar with rate and ETA on w, at most ten
// times a second.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
	off   bool
}

func (p *progress) draw(done int, final bool) {
	if p.off || (!final && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width
	if p.total > 0 {
		filled = done * width / p.total
	}
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	eta := "--"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d files  %.1f files/s  ETA %s   ", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, p.total, rate, eta)
	if final {
		fmt.Fprintln(p.w)
	}
}

func runIngest(ctx context.Context, env Env, args []string) error {
	c := commands["ingest"]
	fs := newFlagSet(c, env)
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $CORDON_DATABASE_URL)")
	tenant := fs.String("tenant", "", "tenant to load into; required")
	class := fs.String("classification", "internal", "classification of every file: public, internal, confidential, restricted")
	asOf := fs.Int64("as-of-tick", -1, "as_of_tick of every file (default: the file's modification time, Unix seconds)")
	force := fs.Bool("force", false, "re-put unchanged files too")
	quiet := fs.Bool("quiet", false, "no progress bar")
	var barriers multiFlag
	fs.Var(&barriers, "barrier", "barrier label of every file (repeatable)")
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() == 0 {
		return fmt.Errorf("%w: ingest needs --tenant NAME and at least one PATH", errUsage)
	}
	cl, err := cordontype.ParseClassification(*class)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	files, err := collectFiles(fs.Args())
	if err != nil {
		return err
	}
	seen := make(map[string]string, len(files))
	for _, f := range files {
		if prev, dup := seen[f.docID]; dup {
			return fmt.Errorf("%s and %s both map to doc id %q: ingest them separately", prev, f.path, f.docID)
		}
		seen[f.docID] = f.path
	}
	st, err := postgres.Open(ctx, databaseURL(env, *dbURL), postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	hashes, err := st.DocumentHashes(ctx, *tenant)
	if err != nil {
		return err
	}
	type failure struct{ path, msg string }
	var failures []failure
	put, skipped := 0, 0
	bar := &progress{w: env.Stderr, total: len(files), start: time.Now(), off: *quiet}
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			bar.draw(i, true)
			return fmt.Errorf("interrupted after %d of %d files (re-run to resume): %w", i, len(files), err)
		}
		bar.draw(i, false)
		data, err := os.ReadFile(f.path)
		if err != nil {
			failures = append(failures, failure{f.path, err.Error()})
			continue
		}
		sum := blake2b.Sum256(data)
		if old, ok := hashes[f.docID]; ok && !*force && bytes.Equal(old, sum[:]) {
			skipped++
			continue
		}
		tick := *asOf
		if tick < 0 {
			if info, err := os.Stat(f.path); err == nil {
				tick = max(info.ModTime().Unix(), 0)
			} else {
				tick = 0
			}
		}
		doc := cordontype.Document{Tenant: *tenant, DocID: f.docID, Text: string(data), Classification: cl, Barriers: barriers, AsOfTick: tick,
			Title: filepath.Base(f.path), Metadata: map[string]any{"source_path": filepath.ToSlash(f.path)}}
		if _, err := st.Put(ctx, doc); err != nil {
			if errors.Is(err, postgres.ErrUnavailable) || errors.Is(err, postgres.ErrTenantNotFound) {
				bar.draw(i, true)
				return fmt.Errorf("stopped at %s after %d of %d files (re-run to resume): %w", f.path, i, len(files), err)
			}
			failures = append(failures, failure{f.path, err.Error()})
			continue
		}
		put++
	}
	bar.draw(len(files), true)
	fmt.Fprintf(env.Stdout, "ingested %d, unchanged %d (skipped), failed %d of %d files into tenant %s\n", put, skipped, len(failures), len(files), *tenant)
	for _, f := range failures {
		fmt.Fprintf(env.Stdout, "  FAILED %s: %s\n", f.path, f.msg)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d files failed", len(failures))
	}
	return nil
}
