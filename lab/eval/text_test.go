package eval

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/chunk"
)

const page = "# NAME\n       ls - list directory contents\n\n# DESCRIPTION\n       List information.\n```\n# not a heading\n```\n## Sorting\n       by name\n"

func TestFlattenStructure(t *testing.T) {
	flat := FlattenStructure(page)
	pieces, err := chunk.Split(flat, chunk.Options{MaxWords: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pieces {
		if p.Section != "body" {
			t.Errorf("piece %q: got section %q, want body", p.Text, p.Section)
		}
	}
	// Same words, heading words included.
	if got, want := strings.Fields(flat), strings.Fields(page); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("words changed:\ngot  %q\nwant %q", got, want)
	}
	structured, err := chunk.Split(page, chunk.Options{MaxWords: 5})
	if err != nil {
		t.Fatal(err)
	}
	if structured[0].Section != "NAME" {
		t.Errorf("structured first section: got %q, want NAME", structured[0].Section)
	}
}

func TestDropSections(t *testing.T) {
	tests := []struct {
		name string
		drop []string
		want string
	}{
		{"nothing", nil, page},
		{"NAME", []string{"NAME"}, "# DESCRIPTION\n       List information.\n```\n# not a heading\n```\n## Sorting\n       by name\n"},
		{"a heading inside a fence does not end the section", []string{"DESCRIPTION"}, "# NAME\n       ls - list directory contents\n\n## Sorting\n       by name\n"},
		{"subsection only", []string{"Sorting"}, "# NAME\n       ls - list directory contents\n\n# DESCRIPTION\n       List information.\n```\n# not a heading\n```\n"},
		{"unknown name", []string{"EXAMPLES"}, page},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DropSections(page, tt.drop); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadQueries(t *testing.T) {
	good := `{"query": "list directory contents", "relevant": ["man/1/ls"]}

{"query":"copy files","relevant":["man/1/cp","man/1/install"]}
`
	qs, err := ReadQueries(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[1].Relevant[1] != "man/1/install" || qs[1].Line != 3 || qs[1].Key() != "3" {
		t.Errorf("got %+v", qs)
	}
	// Extra fields are provenance: kept, not refused.
	extra := `{"id": "q1", "kind": "body", "split": "dev", "query": "x y", "relevant": ["a"], "source": {"page": "a"}}`
	qs, err = ReadQueries(strings.NewReader(extra))
	if err != nil {
		t.Fatal(err)
	}
	if qs[0].Key() != "q1" || qs[0].Kind != "body" || qs[0].Split != "dev" || string(qs[0].Extra["source"]) != `{"page": "a"}` {
		t.Errorf("extra fields: got %+v", qs[0])
	}
	graded := `{"query": "x y", "relevant": ["a", "b"], "grades": {"a": 2}}`
	qs, err = ReadQueries(strings.NewReader(graded))
	if err != nil {
		t.Fatal(err)
	}
	if qs[0].Grades["a"] != 2 || qs[0].Extra != nil {
		t.Errorf("grades: got %+v", qs[0])
	}
	bad := []struct {
		name, in, want string
	}{
		{"empty relevant", `{"query": "x y", "relevant": []}`, "line 1: query \"x y\" lists no relevant document"},
		{"no relevant field", `{"query": "x y"}`, "lists no relevant document"},
		{"no token", `{"query": " -- ", "relevant": ["a"]}`, "has no token"},
		{"bad doc id", `{"query": "x", "relevant": ["a b"]}`, "doc_id"},
		{"known field of the wrong type", `{"query": "x", "relevant": "a"}`, `field "relevant"`},
		{"repeated id", `{"id": "q", "query": "x", "relevant": ["a"]}` + "\n" + `{"id": "q", "query": "y", "relevant": ["a"]}`, `line 2: id "q" already used on line 1`},
		{"not an object", `["x"]`, "line 1"},
		{"not json", "x\n", "line 1"},
		{"second line", `{"query": "x", "relevant": ["a"]}` + "\n{", "line 2"},
		{"empty file", "\n\n", "no queries"},
		{"grade below 1", `{"query": "x", "relevant": ["a"], "grades": {"a": 0}}`, `grade 0 of "a" must be >= 1`},
		{"grade of an unlisted document", `{"query": "x", "relevant": ["a"], "grades": {"b": 2}}`, `grade for "b", which is not in "relevant"`},
		{"grades of the wrong type", `{"query": "x", "relevant": ["a"], "grades": ["a"]}`, `field "grades"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadQueries(strings.NewReader(tt.in))
			if !errors.Is(err, ErrQueries) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an ErrQueries error containing %q", err, tt.want)
			}
		})
	}
}
