package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// Query is one evaluation query and the documents judged relevant to it.
type Query struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

// maxQueryLine bounds one JSON line of a query file.
const maxQueryLine = 1 << 20

// ReadQueries reads a JSON Lines query file: one {"query": "...",
// "relevant": ["doc_id", ...]} object per line; blank lines are skipped.
// Unknown fields, a query without a token, an empty relevant list and an
// invalid doc id are errors wrapping [ErrQueries] that name the line: a query
// with no relevant document would count as a miss for every pipeline, and an
// unsearchable query as a miss that no pipeline could avoid.
func ReadQueries(r io.Reader) ([]Query, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxQueryLine)
	var out []Query
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var q Query
		if err := dec.Decode(&q); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrQueries, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: line %d: more than one JSON value", ErrQueries, line)
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

// queryLabel shortens a query for messages.
func queryLabel(q string) string {
	if len(q) > 60 {
		return strings.TrimSpace(q[:57]) + "..."
	}
	return q
}
