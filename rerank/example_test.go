package rerank_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cordon-rag/cordon/rerank"
)

// A text-embeddings-inference client behind a circuit breaker, within a
// budget.
func Example() {
	// A stand-in for text-embeddings-inference serving a reranker model.
	tei := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"index": 1, "score": 0.93}, {"index": 0, "score": 0.04}]`)
	}))
	defer tei.Close()

	client, err := rerank.New(rerank.Config{URL: tei.URL, API: rerank.TEI, Model: "BAAI/bge-reranker-base"})
	if err != nil {
		panic(err)
	}
	model, err := rerank.NewBreaker(client, rerank.BreakerConfig{Failures: 5})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // the budget
	defer cancel()
	scores, err := model.Score(ctx, "why was PMT-771 held", []string{
		"Cut-off times for outgoing wires.",
		"Payment PMT-771 is on hold pending sanctions review.",
	})
	fmt.Println(scores, err, rerank.OutcomeOf(err))
	// Output: [0.04 0.93] <nil> ok
}
