package rerank_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/rerank"
)

// BenchmarkClientScore is one call of 20 passages (the default rerank
// depth) to a local text-embeddings-inference fake: the client's own cost
// (encoding, a loopback round trip, decoding and checking), not a model's.
func BenchmarkClientScore(b *testing.B) {
	srv := httptest.NewServer(&teiServer{})
	defer srv.Close()
	c, err := rerank.New(rerank.Config{URL: srv.URL, API: rerank.TEI})
	if err != nil {
		b.Fatal(err)
	}
	in := texts(20)
	for i := range in {
		in[i] = in[i] + " a chunk of a couple of hundred words would be longer than this one"
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Score(context.Background(), "payment hold release", in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBreakerOpen is a call refused by the open breaker: what a shed
// costs when the model is down.
func BenchmarkBreakerOpen(b *testing.B) {
	f := &fake{}
	f.fail.Store(true)
	br, err := rerank.NewBreaker(f, rerank.BreakerConfig{Failures: 1, CoolDown: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	_, _ = br.Score(context.Background(), "q", []string{"a"})
	in := texts(20)
	b.ResetTimer()
	for b.Loop() {
		if _, err := br.Score(context.Background(), "q", in); err == nil {
			b.Fatal("the open breaker let a call through")
		}
	}
}
