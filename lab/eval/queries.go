package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// Query is one evaluation query and the documents judged relevant to it.
type Query struct {
	// ID names the query in TREC runs ([Query.Key]); optional.
	ID       string   `json:"id,omitempty"`
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
	// Grades, when set, are graded judgments: a relevant document's gain
	// in nDCG (BEIR's qrels score); a relevant document without a grade
	// has gain 1. Every graded document is in Relevant, with a grade >= 1.
	Grades map[string]int `json:"grades,omitempty"`
	// Kind and Split are a generated query's provenance ("name", "body",
	// "option", "heldout"; "dev" or "test"); optional.
	Kind  string `json:"kind,omitempty"`
	Split string `json:"split,omitempty"`
	// Remove, when set, is an exact passage cut out of every relevant
	// document before indexing (a held-out known-item query).
	Remove string `json:"remove,omitempty"`
	// Line is the query's 1-based line in its file (0 when built in code).
	Line int `json:"-"`
	// Extra holds the line's other fields, passed through to per-query
	// output untouched.
	Extra map[string]json.RawMessage `json:"-"`
}

// Key is the query's id in a TREC run: its "id" field when set, else its
// 1-based line number in the query file.
func (q Query) Key() string {
	if q.ID != "" {
		return q.ID
	}
	return strconv.Itoa(q.Line)
}

// Gains are the nDCG gains of the relevant documents: their grade, 1 when
// they have none.
func (q Query) Gains() map[string]float64 {
	g := make(map[string]float64, len(q.Relevant))
	for _, r := range q.Relevant {
		g[r] = 1
		if v, ok := q.Grades[r]; ok {
			g[r] = float64(v)
		}
	}
	return g
}

// Score computes q's metrics for a document ranking: recall and MRR over
// its relevant documents, nDCG@10 with its [Query.Gains], and R@100 when
// deep (the ranking was cut at [DeepK] documents or more).
func (q Query) Score(ranked []string, deep bool) Metrics {
	return score(ranked, q.Relevant, q.Gains(), deep)
}

// maxQueryLine bounds one JSON line of a query file.
const maxQueryLine = 1 << 20

// knownFields are the query fields [ReadQueries] interprets.
var knownFields = []string{"id", "query", "relevant", "grades", "kind", "split", "remove"}

// ReadQueries reads a JSON Lines query file: one {"query": "...",
// "relevant": ["doc_id", ...]} object per line, optionally with "id",
// "grades" ({"doc_id": grade, ...}), "kind", "split" and "remove" (see
// [Query]) and any other fields (kept in
// [Query.Extra]); blank lines are skipped. A known field of the wrong type,
// a query without a token, an empty relevant list, an invalid doc id and a
// repeated id are errors wrapping [ErrQueries] that name the line: a query
// with no relevant document would count as a miss for every pipeline, and an
// unsearchable query as a miss that no pipeline could avoid. A grade below 1
// or for a document not in "relevant" is an error too.
func ReadQueries(r io.Reader) ([]Query, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxQueryLine)
	var out []Query
	ids := make(map[string]int)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		q, err := parseQuery(b)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrQueries, line, err)
		}
		q.Line = line
		if q.ID != "" {
			if prev, ok := ids[q.ID]; ok {
				return nil, fmt.Errorf("%w: line %d: id %q already used on line %d", ErrQueries, line, q.ID, prev)
			}
			ids[q.ID] = line
		}
		if !analysis.HasToken(q.Query) {
			return nil, fmt.Errorf("%w: line %d: query %q has no token", ErrQueries, line, q.Query)
		}
		if len(q.Relevant) == 0 {
			return nil, fmt.Errorf("%w: line %d: query %q lists no relevant document", ErrQueries, line, q.Query)
		}
		for _, id := range q.Relevant {
			if err := cordontype.ValidateDocID(id); err != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrQueries, line, err)
			}
		}
		if err := checkGrades(q); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrQueries, line, err)
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrQueries, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrQueries, ErrNoQueries)
	}
	return out, nil
}

// checkGrades checks that every grade is >= 1 and names a relevant
// document.
func checkGrades(q Query) error {
	for _, id := range slices.Sorted(maps.Keys(q.Grades)) {
		switch {
		case q.Grades[id] < 1:
			return fmt.Errorf("grade %d of %q must be >= 1 (a document judged not relevant is left out)", q.Grades[id], id)
		case !slices.Contains(q.Relevant, id):
			return fmt.Errorf("grade for %q, which is not in \"relevant\"", id)
		}
	}
	return nil
}

// parseQuery decodes one line: the known fields strictly, the rest kept.
func parseQuery(b []byte) (Query, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return Query{}, err
	}
	if dec.More() {
		return Query{}, fmt.Errorf("more than one JSON value")
	}
	if fields == nil {
		return Query{}, fmt.Errorf("want a JSON object")
	}
	var q Query
	dst := map[string]any{"id": &q.ID, "query": &q.Query, "relevant": &q.Relevant, "grades": &q.Grades,
		"kind": &q.Kind, "split": &q.Split, "remove": &q.Remove}
	for _, k := range knownFields {
		raw, ok := fields[k]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, dst[k]); err != nil {
			return Query{}, fmt.Errorf("field %q: %w", k, err)
		}
		delete(fields, k)
	}
	if len(fields) > 0 {
		q.Extra = fields
	}
	return q, nil
}

// Select keeps the queries whose kind is one of kinds (all when kinds is
// empty) and whose split is split (all when ""), in order.
func Select(qs []Query, kinds []string, split string) []Query {
	var out []Query
	for _, q := range qs {
		if (len(kinds) == 0 || slices.Contains(kinds, q.Kind)) && (split == "" || q.Split == split) {
			out = append(out, q)
		}
	}
	return out
}

// ApplyRemovals returns docs with every query's Remove passage cut out of
// each of its relevant documents (once per document and passage). A passage
// missing from a relevant document is an error wrapping [ErrRemoveMissing]:
// the query file and the corpus do not belong together.
func ApplyRemovals(docs []Document, qs []Query) ([]Document, error) {
	cut := make(map[string][]string)
	for _, q := range qs {
		if q.Remove == "" {
			continue
		}
		for _, r := range q.Relevant {
			if !slices.Contains(cut[r], q.Remove) {
				cut[r] = append(cut[r], q.Remove)
			}
		}
	}
	if len(cut) == 0 {
		return docs, nil
	}
	out := slices.Clone(docs)
	for i, d := range out {
		for _, passage := range cut[d.ID] {
			if !strings.Contains(d.Text, passage) {
				return nil, fmt.Errorf("%w: %q in %s", ErrRemoveMissing, queryLabel(passage), d.ID)
			}
			out[i].Text = strings.Replace(out[i].Text, passage, "", 1)
		}
	}
	return out, nil
}

// queryLabel shortens a query for messages.
func queryLabel(q string) string {
	if len(q) > 60 {
		return strings.TrimSpace(q[:57]) + "..."
	}
	return q
}
