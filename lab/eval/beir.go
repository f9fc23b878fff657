package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// TitleMode says where a BEIR document's title goes in its Cordon text.
type TitleMode string

// The title modes.
const (
	// TitleLine makes the title the first line of the body text, plain
	// and searchable like the rest (the default).
	TitleLine TitleMode = "line"
	// TitleHeading makes the title a "# " heading: a section name, which
	// SPEC section 2 keeps out of the chunk text, so its words are searched
	// only as field terms (the policy's field_weight).
	TitleHeading TitleMode = "heading"
	// TitleField makes the title the document's title, searched only as
	// field terms (the policy's field_weight).
	TitleField TitleMode = "field"
	// TitleNone leaves the title out.
	TitleNone TitleMode = "none"
)

// TitleModes lists the title modes, the default first.
var TitleModes = []TitleMode{TitleLine, TitleHeading, TitleField, TitleNone}

// BEIR is one split of a BEIR-format dataset (Thakur et al., NeurIPS 2021
// Datasets and Benchmarks) as Cordon evaluates it.
type BEIR struct {
	// Docs are the corpus's documents in file order: doc id = "_id", text
	// = title (as [TitleMode] says) and "text".
	Docs []Document
	// Queries are the split's judged queries in file order: id = "_id",
	// query = "text", relevant = the documents judged with a score >= 1,
	// in qrels order, graded by that score.
	Queries []Query
	// Unjudged counts the queries of the file without a positive
	// judgment in the split: left out, as BEIR leaves them out (its
	// queries.jsonl holds every split's queries).
	Unjudged int
	// CorpusPath, QueriesPath and QrelsPath are the files read.
	CorpusPath, QueriesPath, QrelsPath string
}

// maxBEIRLine bounds one line of a BEIR file (an abstract is a few KB; some
// corpora hold whole articles).
const maxBEIRLine = 64 << 20

// ReadBEIR reads split of the BEIR dataset in dir: corpus.jsonl, the
// queries (queries-SPLIT.jsonl, else BEIR's queries.jsonl) and the
// judgments (qrels-SPLIT.tsv, else BEIR's qrels/SPLIT.tsv). markdown keeps
// the texts' Markdown structure ([BEIRText]).
func ReadBEIR(dir, split string, title TitleMode, markdown bool) (BEIR, error) {
	b := BEIR{CorpusPath: filepath.Join(dir, "corpus.jsonl")}
	if split == "" || strings.ContainsAny(split, `/\`) {
		return b, fmt.Errorf("%w: split %q: want a name such as train or test", ErrBEIR, split)
	}
	var err error
	if b.QueriesPath, err = firstExisting(filepath.Join(dir, "queries-"+split+".jsonl"), filepath.Join(dir, "queries.jsonl")); err != nil {
		return b, err
	}
	if b.QrelsPath, err = firstExisting(filepath.Join(dir, "qrels-"+split+".tsv"), filepath.Join(dir, "qrels", split+".tsv")); err != nil {
		return b, err
	}
	read := func(path string, parse func(io.Reader, string) error) error {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBEIR, err)
		}
		defer f.Close()
		return parse(f, path)
	}
	var queries []BEIRQuery
	var qrels []Qrel
	if err := read(b.CorpusPath, func(r io.Reader, name string) (err error) {
		b.Docs, err = ReadBEIRCorpus(r, name, title, markdown)
		return err
	}); err != nil {
		return b, err
	}
	if err := read(b.QueriesPath, func(r io.Reader, name string) (err error) {
		queries, err = ReadBEIRQueries(r, name)
		return err
	}); err != nil {
		return b, err
	}
	if err := read(b.QrelsPath, func(r io.Reader, name string) (err error) {
		qrels, err = ReadQrels(r, name)
		return err
	}); err != nil {
		return b, err
	}
	b.Queries, b.Unjudged, err = JudgeQueries(b.Docs, queries, qrels, b.QrelsPath)
	return b, err
}

// firstExisting returns the first of paths that exists.
func firstExisting(paths ...string) (string, error) {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %w", ErrBEIR, err)
		}
	}
	return "", fmt.Errorf("%w: none of %s exists", ErrBEIR, strings.Join(paths, ", "))
}

// beirLines calls fn with each non-blank line of r (without its line
// ending) and its 1-based number.
func beirLines(r io.Reader, name string, fn func(line int, b []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxBEIRLine)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if err := fn(line, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBEIR, name, err)
	}
	return nil
}

// beirRecord is a corpus or query line's fields Cordon reads; "metadata"
// and any other field are ignored.
type beirRecord struct {
	ID    *string `json:"_id"`
	Title *string `json:"title"`
	Text  *string `json:"text"`
}

func decodeBEIR(b []byte) (beirRecord, error) {
	var rec beirRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rec); err != nil {
		return rec, err
	}
	if dec.More() {
		return rec, errors.New("more than one JSON value")
	}
	if rec.ID == nil {
		return rec, errors.New(`no "_id"`)
	}
	if rec.Text == nil {
		return rec, errors.New(`no "text"`)
	}
	return rec, nil
}

// ReadBEIRCorpus reads a BEIR corpus.jsonl ({"_id", "title", "text"} per
// line; "title" may be absent): one [Document] per line, id "_id", text as
// [BEIRText] makes it. Bad JSON, a missing "_id" or "text", an id Cordon
// refuses, a repeated id and a document without a word are errors wrapping
// [ErrBEIR] that name the file (name) and the line.
func ReadBEIRCorpus(r io.Reader, name string, title TitleMode, markdown bool) ([]Document, error) {
	if !validTitle(title) {
		return nil, fmt.Errorf("%w: title mode %q: want one of %v", ErrBEIR, title, TitleModes)
	}
	var docs []Document
	seen := make(map[string]int)
	err := beirLines(r, name, func(line int, b []byte) error {
		rec, err := decodeBEIR(b)
		if err != nil {
			return fmt.Errorf("%w: %s:%d: %w", ErrBEIR, name, line, err)
		}
		id := *rec.ID
		if err := cordontype.ValidateDocID(id); err != nil {
			return fmt.Errorf("%w: %s:%d: %w", ErrBEIR, name, line, err)
		}
		if prev, ok := seen[id]; ok {
			return fmt.Errorf("%w: %s:%d: _id %q already used on line %d", ErrBEIR, name, line, id, prev)
		}
		seen[id] = line
		var t string
		if rec.Title != nil {
			t = *rec.Title
		}
		text := BEIRText(t, *rec.Text, title, markdown)
		if !analysis.HasToken(text) {
			return fmt.Errorf("%w: %s:%d: document %q has no word to index", ErrBEIR, name, line, id)
		}
		d := Document{ID: id, Text: text}
		if title == TitleField {
			d.Title = strings.Join(strings.Fields(t), " ")
		}
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%w: %s: no documents", ErrBEIR, name)
	}
	return docs, nil
}

func validTitle(m TitleMode) bool {
	for _, v := range TitleModes {
		if m == v {
			return true
		}
	}
	return false
}

// BEIRText is a BEIR document's Cordon text: the title as mode says, then
// the text. BEIR's text is prose, not Markdown, so a line of it that the
// chunker would read as a heading or a fence is neutralised
// ([FlattenStructure]), unless markdown says the text is Markdown whose
// headings are sections (what 'cordon-lab corpus pgdocs' writes, as
// 'cordon ingest' converts HTML); the title is made one line.
func BEIRText(title, text string, mode TitleMode, markdown bool) string {
	title = strings.Join(strings.Fields(title), " ")
	if !markdown {
		text = FlattenStructure(text)
	}
	if title == "" || mode == TitleNone || mode == TitleField {
		return text
	}
	if mode == TitleHeading {
		return "# " + title + "\n\n" + text
	}
	return FlattenStructure(title) + "\n" + text
}

// BEIRQuery is one line of a BEIR queries file.
type BEIRQuery struct {
	ID   string
	Text string
	Line int
}

// ReadBEIRQueries reads a BEIR queries.jsonl ({"_id", "text"} per line).
// Bad JSON, a missing "_id" or "text", an empty or repeated id and a query
// without a token are errors wrapping [ErrBEIR] that name the file (name)
// and the line.
func ReadBEIRQueries(r io.Reader, name string) ([]BEIRQuery, error) {
	var out []BEIRQuery
	seen := make(map[string]int)
	err := beirLines(r, name, func(line int, b []byte) error {
		rec, err := decodeBEIR(b)
		if err != nil {
			return fmt.Errorf("%w: %s:%d: %w", ErrBEIR, name, line, err)
		}
		id := *rec.ID
		switch prev, dup := seen[id]; {
		case strings.TrimSpace(id) == "" || strings.ContainsAny(id, " \t\r\n"):
			return fmt.Errorf("%w: %s:%d: _id %q: want a non-empty id without white space (a TREC run's qid)", ErrBEIR, name, line, id)
		case dup:
			return fmt.Errorf("%w: %s:%d: _id %q already used on line %d", ErrBEIR, name, line, id, prev)
		case !analysis.HasToken(*rec.Text):
			return fmt.Errorf("%w: %s:%d: query %q has no token", ErrBEIR, name, line, id)
		}
		seen[id] = line
		out = append(out, BEIRQuery{ID: id, Text: *rec.Text, Line: line})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: %w", ErrBEIR, name, ErrNoQueries)
	}
	return out, nil
}

// Qrel is one judgment of a BEIR qrels file.
type Qrel struct {
	QueryID, DocID string
	Score          int
	Line           int
}

// ReadQrels reads a BEIR qrels TSV: an optional header line
// ("query-id\tcorpus-id\tscore"), then "query-id TAB corpus-id TAB score"
// per line, score an integer. A line without three fields, a score that is
// not an integer and a pair judged twice are errors wrapping [ErrBEIR] that
// name the file (name) and the line.
func ReadQrels(r io.Reader, name string) ([]Qrel, error) {
	var out []Qrel
	seen := make(map[[2]string]int)
	first := true
	err := beirLines(r, name, func(line int, b []byte) error {
		header := first
		first = false
		f := strings.Split(string(b), "\t")
		if len(f) != 3 {
			return fmt.Errorf("%w: %s:%d: got %d tab-separated fields, want 3 (query-id, corpus-id, score)", ErrBEIR, name, line, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if header && f[0] == "query-id" {
			return nil
		}
		score, err := strconv.Atoi(f[2])
		if err != nil {
			return fmt.Errorf("%w: %s:%d: score %q is not an integer", ErrBEIR, name, line, f[2])
		}
		if f[0] == "" || f[1] == "" {
			return fmt.Errorf("%w: %s:%d: empty query-id or corpus-id", ErrBEIR, name, line)
		}
		key := [2]string{f[0], f[1]}
		if prev, ok := seen[key]; ok {
			return fmt.Errorf("%w: %s:%d: query %q and document %q already judged on line %d", ErrBEIR, name, line, f[0], f[1], prev)
		}
		seen[key] = line
		out = append(out, Qrel{QueryID: f[0], DocID: f[1], Score: score, Line: line})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no judgments", ErrBEIR, name)
	}
	return out, nil
}

// JudgeQueries joins queries with their judgments (read from the file
// named qrelsName): each query with a judgment of score >= 1 becomes a
// [Query] with those documents relevant, in qrels order, graded by their
// score; the others are counted as unjudged and left out. A judgment of a
// query or a document that is not in the dataset is an error wrapping
// [ErrBEIR] that names the qrels line: the files do not belong together.
func JudgeQueries(docs []Document, queries []BEIRQuery, qrels []Qrel, qrelsName string) ([]Query, int, error) {
	known := make(map[string]bool, len(docs))
	for _, d := range docs {
		known[d.ID] = true
	}
	idx := make(map[string]int, len(queries))
	for i, q := range queries {
		idx[q.ID] = i
	}
	rel := make([][]string, len(queries))
	grades := make([]map[string]int, len(queries))
	for _, j := range qrels {
		i, ok := idx[j.QueryID]
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("%w: %s:%d: query %q is not in the queries file", ErrBEIR, qrelsName, j.Line, j.QueryID)
		case !known[j.DocID]:
			return nil, 0, fmt.Errorf("%w: %s:%d: document %q is not in the corpus", ErrBEIR, qrelsName, j.Line, j.DocID)
		case j.Score < 1:
			continue // judged not relevant: gain 0, as BEIR counts it
		}
		rel[i] = append(rel[i], j.DocID)
		if grades[i] == nil {
			grades[i] = make(map[string]int)
		}
		grades[i][j.DocID] = j.Score
	}
	var out []Query
	unjudged := 0
	for i, q := range queries {
		if len(rel[i]) == 0 {
			unjudged++
			continue
		}
		out = append(out, Query{ID: q.ID, Query: q.Text, Relevant: rel[i], Grades: grades[i], Line: q.Line})
	}
	if len(out) == 0 {
		return nil, unjudged, fmt.Errorf("%w: %s: %w: no query has a judgment of score >= 1", ErrBEIR, qrelsName, ErrNoQueries)
	}
	return out, unjudged, nil
}
