package corpus

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/htmltext"
)

// The query kinds of a PostgreSQL documentation set ([PGDocs]), one query
// of each per reference page (an SQL command, an application, an SPI or
// dblink function):
//
//   - PGKindCommand: "what does the NAME command do", NAME the page's
//     refentrytitle ("CLUSTER", "ALTER TABLE", "pg_dump"): a newcomer's
//     question, whose words also name other pages ("cluster" is a database
//     cluster too);
//   - PGKindPurpose: the page's one-line purpose ("cluster a table
//     according to an index"), as its first paragraph says it after NAME:
//     words of the page, which pages of related commands share ("define a
//     new table" is CREATE TABLE's, "define a new table from the results of
//     a query" CREATE TABLE AS's).
const (
	PGKindCommand = "command"
	PGKindPurpose = "purpose"
)

// PGDocsResult says what [PGDocs] wrote.
type PGDocsResult struct {
	Pages   int            // documents in corpus.jsonl
	Skipped map[string]int // pages HTML conversion refused, by error
	Queries map[string]int // queries by split name ("command-dev", ...)
}

// PGDocs converts the HTML pages of a PostgreSQL documentation tree
// (htmlDir, e.g. /usr/share/doc/postgresql-doc-15/html) into a BEIR-format
// dataset in out: corpus.jsonl, one document per page, whose _id is
// "pg/" and the file name without ".html", title its HTML <title> and
// text the text Cordon stores for it (htmltext.Convert: what `cordon
// ingest` of the page indexes); and for each kind ([PGKindCommand], [PGKindPurpose]) and split
// (dev or test by [SplitOf] the page's id) queries-KIND-SPLIT.jsonl and
// qrels-KIND-SPLIT.tsv, one query per reference page, judged relevant to
// that page alone. Pages are read in name order, so the same tree always
// gives the same files. Without replace, an out holding corpus.jsonl is
// refused.
func PGDocs(ctx context.Context, htmlDir, out string, replace bool) (PGDocsResult, error) {
	res := PGDocsResult{Skipped: map[string]int{}, Queries: map[string]int{}}
	names, err := htmlPages(htmlDir)
	if err != nil {
		return res, err
	}
	if err := preparePGOut(out, replace); err != nil {
		return res, err
	}
	var corpus strings.Builder
	queries := map[string][]pgQuery{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		src, err := os.ReadFile(filepath.Join(htmlDir, name))
		if err != nil {
			return res, fmt.Errorf("pgdocs: %w", err)
		}
		conv, err := htmltext.ConvertContext(ctx, string(src))
		if err != nil {
			res.Skipped[err.Error()]++
			continue
		}
		id := "pg/" + strings.TrimSuffix(name, ".html")
		if strings.TrimSpace(conv.Text) == "" {
			res.Skipped["no text"]++
			continue
		}
		line, err := json.Marshal(map[string]string{"_id": id, "title": conv.Title, "text": conv.Text})
		if err != nil {
			return res, fmt.Errorf("pgdocs: %s: %w", name, err)
		}
		corpus.Write(line)
		corpus.WriteByte('\n')
		res.Pages++
		title, purpose, ok := refName(string(src))
		if !ok {
			continue
		}
		split := SplitOf(id)
		queries[PGKindCommand+"-"+split] = append(queries[PGKindCommand+"-"+split], pgQuery{id, PGKindCommand, "what does the " + title + " command do"})
		if analysis.HasToken(purpose) {
			queries[PGKindPurpose+"-"+split] = append(queries[PGKindPurpose+"-"+split], pgQuery{id, PGKindPurpose, purpose})
		}
	}
	if res.Pages == 0 {
		return res, fmt.Errorf("pgdocs: %s: %w", htmlDir, ErrEmptyCorpus)
	}
	if err := os.WriteFile(filepath.Join(out, "corpus.jsonl"), []byte(corpus.String()), 0o644); err != nil {
		return res, fmt.Errorf("pgdocs: %w", err)
	}
	for split, qs := range queries {
		if err := writeBEIRQueries(out, split, qs); err != nil {
			return res, err
		}
		res.Queries[split] = len(qs)
	}
	return res, nil
}

// pgQuery is one query of a PostgreSQL documentation set: its page, kind
// and text.
type pgQuery struct{ doc, kind, text string }

// htmlPages lists dir's "*.html" files (not recursively), sorted.
func htmlPages(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pgdocs: %w (install the PostgreSQL documentation, e.g. apt-get install postgresql-doc-15, and pass its html directory)", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".html") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("pgdocs: %s holds no .html file: %w", dir, ErrEmptyCorpus)
	}
	return names, nil
}

// preparePGOut makes dir, refusing one that holds a corpus unless replace.
func preparePGOut(dir string, replace bool) error {
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err == nil && !replace {
		return fmt.Errorf("%w: %s holds corpus.jsonl from an earlier run; remove it or pass --replace", ErrOutputNotEmpty, dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgdocs: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pgdocs: %w", err)
	}
	return nil
}

// writeBEIRQueries writes queries-SPLIT.jsonl and qrels-SPLIT.tsv.
func writeBEIRQueries(dir, split string, qs []pgQuery) error {
	write := func(name string, fill func(w *bufio.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("pgdocs: %w", err)
		}
		w := bufio.NewWriter(f)
		err = fill(w)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgdocs: %s: %w", name, err)
		}
		return nil
	}
	if err := write("queries-"+split+".jsonl", func(w *bufio.Writer) error {
		for _, q := range qs {
			b, err := json.Marshal(map[string]string{"_id": q.kind + ":" + q.doc, "text": q.text})
			if err != nil {
				return err
			}
			w.Write(b)
			w.WriteByte('\n')
		}
		return nil
	}); err != nil {
		return err
	}
	return write("qrels-"+split+".tsv", func(w *bufio.Writer) error {
		w.WriteString("query-id\tcorpus-id\tscore\n")
		for _, q := range qs {
			fmt.Fprintf(w, "%s:%s\t%s\t1\n", q.kind, q.doc, q.doc)
		}
		return nil
	})
}

// refName returns a reference page's name and one-line purpose, read from
// its refnamediv (DocBook's "<h2><span class="refentrytitle">CLUSTER</span>
// </h2><p>CLUSTER — cluster a table according to an index</p>"); ok is
// false for a page without one.
func refName(src string) (name, purpose string, ok bool) {
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return "", "", false
	}
	div := findClass(doc, "refnamediv")
	if div == nil {
		return "", "", false
	}
	if t := findClass(div, "refentrytitle"); t != nil {
		name = collapse(textOf(t))
	}
	for c := div.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == "p" {
			line := collapse(textOf(c))
			if _, rest, found := strings.Cut(line, " — "); found {
				purpose = rest
			}
			break
		}
	}
	return name, purpose, name != "" && purpose != ""
}

// findClass returns the first element under n (n included, document
// order) whose class attribute holds class.
func findClass(n *html.Node, class string) *html.Node {
	if n.Type == html.ElementNode {
		for _, a := range n.Attr {
			if a.Key == "class" && slices.Contains(strings.Fields(a.Val), class) {
				return n
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := findClass(c, class); f != nil {
			return f
		}
	}
	return nil
}

// textOf is the text under n, concatenated.
func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// collapse trims s and collapses its runs of white space to one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
