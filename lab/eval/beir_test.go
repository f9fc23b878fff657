package eval

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const beirFixture = "testdata/beir-tiny"

func TestReadBEIR(t *testing.T) {
	b, err := ReadBEIR(beirFixture, "train", TitleLine, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Docs) != 6 || len(b.Queries) != 4 || b.Unjudged != 1 {
		t.Fatalf("got %d documents, %d queries, %d unjudged; want 6, 4, 1", len(b.Docs), len(b.Queries), b.Unjudged)
	}
	q := b.Queries[0]
	want := Query{ID: "1", Query: "Vitamin D supplements increase bone density.", Relevant: []string{"d1", "d6"},
		Grades: map[string]int{"d1": 2, "d6": 1}, Line: 1}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("query 1: got %+v, want %+v", q, want)
	}
	if q.Key() != "1" || b.Queries[3].ID != "4" {
		t.Errorf("query ids: got %q and %q, want the files' _id", q.Key(), b.Queries[3].ID)
	}
	if got, want := b.Docs[0].Text, "Vitamin D and bone density in older adults\nA randomised trial"; !strings.HasPrefix(got, want) {
		t.Errorf("d1 text: got %q, want it to start with %q", got, want)
	}
	if got := b.Docs[3].Text; got != "Coffee intake was not associated with arrhythmia in a cohort of forty thousand nurses." {
		t.Errorf("d4 (no title): got %q", got)
	}
	if got, want := b.Docs[4].Text, "Telomere length\n # not a heading\nShorter"; !strings.HasPrefix(got, want) {
		t.Errorf("d5 (a line starting with #): got %q, want it neutralised: %q", got, want)
	}
	if b.QueriesPath != filepath.Join(beirFixture, "queries-train.jsonl") || b.QrelsPath != filepath.Join(beirFixture, "qrels-train.tsv") {
		t.Errorf("paths: got %s and %s", b.QueriesPath, b.QrelsPath)
	}
}

func TestBEIRText(t *testing.T) {
	tests := []struct {
		name        string
		title, text string
		mode        TitleMode
		markdown    bool
		want        string
	}{
		{"line", "A  title\nsplit", "Body.", TitleLine, false, "A title split\nBody."},
		{"heading", "A title", "Body.", TitleHeading, false, "# A title\n\nBody."},
		{"none", "A title", "Body.", TitleNone, false, "Body."},
		{"no title", " ", "Body.", TitleLine, false, "Body."},
		{"a title like a heading stays text", "#1 result", "Body.", TitleLine, false, " #1 result\nBody."},
		{"a fence in the text stays text", "T", "```\ncode", TitleLine, false, "T\n ```\ncode"},
		// Markdown text (--text markdown) keeps its headings and fences;
		// the title is still one plain line.
		{"markdown keeps headings", "#1 result", "## Usage\n```\ncode\n```", TitleLine, true, " #1 result\n## Usage\n```\ncode\n```"},
		{"markdown, title as a field", "T", "## Usage\nText.", TitleField, true, "## Usage\nText."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BEIRText(tt.title, tt.text, tt.mode, tt.markdown); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadBEIRLayout: BEIR's own layout, every split's queries in
// queries.jsonl and the judgments in qrels/SPLIT.tsv; queries of other
// splits are left out as unjudged.
func TestReadBEIRLayout(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "corpus.jsonl"), `{"_id": "a", "title": "T", "text": "alpha"}`+"\n"+`{"_id": "b", "text": "beta"}`+"\n")
	write(t, filepath.Join(dir, "queries.jsonl"), `{"_id": "q1", "text": "alpha"}`+"\n"+`{"_id": "q2", "text": "beta"}`+"\n")
	os.Mkdir(filepath.Join(dir, "qrels"), 0o755)
	write(t, filepath.Join(dir, "qrels", "test.tsv"), "q2\tb\t1\n")
	b, err := ReadBEIR(dir, "test", TitleNone, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Queries) != 1 || b.Queries[0].ID != "q2" || b.Unjudged != 1 || b.Docs[0].Text != "alpha" {
		t.Errorf("got %+v", b)
	}
	if _, err := ReadBEIR(dir, "train", TitleLine, false); !errors.Is(err, ErrBEIR) || !strings.Contains(err.Error(), "qrels-train.tsv") {
		t.Errorf("missing split: got %v, want an ErrBEIR error naming the files looked for", err)
	}
	if _, err := ReadBEIR(dir, "../x", TitleLine, false); !errors.Is(err, ErrBEIR) {
		t.Errorf("split with a slash: got %v, want ErrBEIR", err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadBEIRCorpusErrors(t *testing.T) {
	ok := `{"_id": "a", "title": "T", "text": "alpha"}` + "\n"
	tests := []struct {
		name, in string
		mode     TitleMode
		want     string
	}{
		{"malformed JSON", ok + `{"_id": "b", "text": `, TitleLine, "corpus.jsonl:2: "},
		{"not an object", `["a"]`, TitleLine, "corpus.jsonl:1: "},
		{"two values on a line", `{"_id": "a", "text": "x"} {}`, TitleLine, "corpus.jsonl:1: more than one JSON value"},
		{"no _id", `{"title": "T", "text": "alpha"}`, TitleLine, `corpus.jsonl:1: no "_id"`},
		{"no text", `{"_id": "a", "title": "T"}`, TitleLine, `corpus.jsonl:1: no "text"`},
		{"duplicate id", ok + "\n" + ok, TitleLine, `corpus.jsonl:3: _id "a" already used on line 1`},
		{"id Cordon refuses", `{"_id": "a b", "text": "alpha"}`, TitleLine, "corpus.jsonl:1: "},
		{"no word", `{"_id": "a", "title": "", "text": " -- "}`, TitleLine, `corpus.jsonl:1: document "a" has no word to index`},
		{"no word but the title, left out", `{"_id": "a", "title": "Title", "text": ""}`, TitleNone, `corpus.jsonl:1: document "a" has no word`},
		{"empty file", "\n", TitleLine, "corpus.jsonl: no documents"},
		{"bad title mode", ok, "top", `title mode "top"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadBEIRCorpus(strings.NewReader(tt.in), "corpus.jsonl", tt.mode, false)
			if !errors.Is(err, ErrBEIR) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an ErrBEIR error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadBEIRQueriesErrors(t *testing.T) {
	ok := `{"_id": "1", "text": "a claim"}` + "\n"
	tests := []struct {
		name, in, want string
	}{
		{"malformed JSON", ok + "{", "queries.jsonl:2: "},
		{"no _id", `{"text": "a claim"}`, `queries.jsonl:1: no "_id"`},
		{"no text", `{"_id": "1"}`, `queries.jsonl:1: no "text"`},
		{"duplicate id", ok + ok, `queries.jsonl:2: _id "1" already used on line 1`},
		{"id with a space", `{"_id": "1 2", "text": "a claim"}`, `queries.jsonl:1: _id "1 2"`},
		{"empty id", `{"_id": "", "text": "a claim"}`, `queries.jsonl:1: _id ""`},
		{"no token", `{"_id": "1", "text": "?!"}`, `queries.jsonl:1: query "1" has no token`},
		{"empty file", "", "queries.jsonl: no queries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadBEIRQueries(strings.NewReader(tt.in), "queries.jsonl")
			if !errors.Is(err, ErrBEIR) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an ErrBEIR error containing %q", err, tt.want)
			}
		})
	}
}

func TestReadQrels(t *testing.T) {
	qs, err := ReadQrels(strings.NewReader("query-id\tcorpus-id\tscore\n1\ta\t2\n\n1\tb\t0\n"), "qrels.tsv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Qrel{{QueryID: "1", DocID: "a", Score: 2, Line: 2}, {QueryID: "1", DocID: "b", Score: 0, Line: 4}}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("got %+v, want %+v", qs, want)
	}
	tests := []struct {
		name, in, want string
	}{
		{"two fields", "1\ta\n", "qrels.tsv:1: got 2 tab-separated fields, want 3"},
		{"spaces, not tabs", "1 a 1\n", "qrels.tsv:1: got 1 tab-separated fields"},
		{"score not an integer", "1\ta\t0.5\n", `qrels.tsv:1: score "0.5" is not an integer`},
		{"header past the first line", "1\ta\t1\nquery-id\tcorpus-id\tscore\n", `qrels.tsv:2: score "score"`},
		{"judged twice", "1\ta\t1\n2\ta\t1\n1\ta\t2\n", `qrels.tsv:3: query "1" and document "a" already judged on line 1`},
		{"empty id", "\ta\t1\n", "qrels.tsv:1: empty query-id"},
		{"header only", "query-id\tcorpus-id\tscore\n", "qrels.tsv: no judgments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadQrels(strings.NewReader(tt.in), "qrels.tsv")
			if !errors.Is(err, ErrBEIR) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an ErrBEIR error containing %q", err, tt.want)
			}
		})
	}
}

func TestJudgeQueries(t *testing.T) {
	docs := []Document{{ID: "a", Text: "alpha"}, {ID: "b", Text: "beta"}}
	queries := []BEIRQuery{{ID: "1", Text: "alpha", Line: 1}, {ID: "2", Text: "beta", Line: 2}, {ID: "3", Text: "gamma", Line: 3}}
	qs, unjudged, err := JudgeQueries(docs, queries, []Qrel{
		{QueryID: "2", DocID: "b", Score: 1, Line: 1},
		{QueryID: "1", DocID: "b", Score: 0, Line: 2},
		{QueryID: "1", DocID: "a", Score: 3, Line: 3},
	}, "qrels.tsv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{ID: "1", Query: "alpha", Relevant: []string{"a"}, Grades: map[string]int{"a": 3}, Line: 1},
		{ID: "2", Query: "beta", Relevant: []string{"b"}, Grades: map[string]int{"b": 1}, Line: 2},
	}
	if !reflect.DeepEqual(qs, want) || unjudged != 1 {
		t.Errorf("got %+v and %d unjudged, want %+v and 1 (query 3)", qs, unjudged, want)
	}
	tests := []struct {
		name  string
		qrels []Qrel
		want  string
	}{
		{"unknown query", []Qrel{{QueryID: "9", DocID: "a", Score: 1, Line: 4}}, `qrels.tsv:4: query "9" is not in the queries file`},
		{"unknown document", []Qrel{{QueryID: "1", DocID: "z", Score: 1, Line: 5}}, `qrels.tsv:5: document "z" is not in the corpus`},
		{"unknown document judged not relevant", []Qrel{{QueryID: "1", DocID: "z", Score: 0, Line: 6}}, `qrels.tsv:6: document "z"`},
		{"no positive judgment", []Qrel{{QueryID: "1", DocID: "a", Score: 0, Line: 1}}, "qrels.tsv: no queries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := JudgeQueries(docs, queries, tt.qrels, "qrels.tsv")
			if !errors.Is(err, ErrBEIR) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an ErrBEIR error containing %q", err, tt.want)
			}
		})
	}
}
