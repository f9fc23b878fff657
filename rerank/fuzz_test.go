package rerank_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/rerank"
)

// bodyTransport answers every request with status 200 and body, in process.
type bodyTransport string

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(string(b))), Header: http.Header{}, Request: r}, nil
}

// FuzzResponse: whatever a model server answers, Score returns either an
// error or exactly one finite score per passage, never a panic.
func FuzzResponse(f *testing.F) {
	for _, seed := range []string{
		`[{"index": 1, "score": 0.2}, {"index": 0, "score": 0.9}]`,
		`{"results": [{"index": 0, "relevance_score": 0.5}, {"index": 1, "relevance_score": -2}]}`,
		`[{"index": 0, "score": 1e308}, {"index": 1, "score": -0}]`,
		`[{"index": 0}, {"index": 0, "score": 1}]`,
		`[{"index": 2, "score": 1}, {"index": 1, "score": 1}]`,
		`[{"index": 9223372036854775807, "score": 1}, {"index": 0, "score": 1}]`,
		`null`, `[]`, `{}`, `NaN`, `[{"index": 0, "score": NaN}]`, "\xff",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, body string, cohere bool) {
		api := rerank.TEI
		if cohere {
			api = rerank.Cohere
		}
		c, err := rerank.New(rerank.Config{URL: "http://model.invalid", API: api, Model: "m", HTTPClient: &http.Client{Transport: bodyTransport(body)}})
		if err != nil {
			t.Fatal(err)
		}
		scores, err := c.Score(context.Background(), "q", []string{"a", "b"})
		if err != nil {
			if scores != nil {
				t.Fatalf("error %v with scores %v", err, scores)
			}
			return
		}
		if len(scores) != 2 {
			t.Fatalf("%d scores for 2 passages from %q", len(scores), body)
		}
		for _, s := range scores {
			if math.IsNaN(s) || math.IsInf(s, 0) {
				t.Fatalf("score %v from %q", s, body)
			}
		}
	})
}
