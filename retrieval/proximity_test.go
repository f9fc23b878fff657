package retrieval_test

import (
	"errors"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// rerank_proximity mixes the share of the query's adjacent token pairs a
// chunk holds adjacent into the rerank score: weight 0 changes no bit; a
// chunk holding the query as a phrase overtakes one holding its words
// apart; a one-word query scales every score alike; the arithmetic is the
// documented (1 - w) * score + w * proximity.
func TestRerankProximity(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	chunks := []retrieval.Scored{
		// Both words, apart: more BM25.
		{Chunk: cordontype.Chunk{ChunkID: "a", Text: "hold the payment until the hold expires"}, BM25: f(4)},
		// Both words as the query says them: less BM25.
		{Chunk: cordontype.Chunk{ChunkID: "b", Text: "a payment hold was placed"}, BM25: f(3)},
		// Reversed order: no pair.
		{Chunk: cordontype.Chunk{ChunkID: "c", Text: "hold payment"}, BM25: f(2)},
	}
	query := "payment hold"
	in := retrieval.RerankInput{Terms: []string{"payment", "hold"}, BM25Max: 4, Depth: 10, Kind: retrieval.RerankOverlap, Blend: 0.5}
	plain := retrieval.Rerank(chunks, in)
	zero := in
	zero.Tokens = analysis.Tokenize(query)
	for i, s := range retrieval.Rerank(chunks, zero) {
		if *s.Rerank != *plain[i].Rerank || s.Chunk.ChunkID != plain[i].Chunk.ChunkID {
			t.Fatalf("weight 0 changed chunk %d: %v, want %v", i, *s.Rerank, *plain[i].Rerank)
		}
	}
	if plain[0].Chunk.ChunkID != "a" {
		t.Fatalf("without proximity the first is %s, want a", plain[0].Chunk.ChunkID)
	}
	w := 0.25
	prox := in
	prox.Proximity, prox.Tokens = w, analysis.Tokenize(query)
	got := retrieval.Rerank(chunks, prox)
	if got[0].Chunk.ChunkID != "b" {
		t.Fatalf("with proximity the first is %s, want b (the phrase)", got[0].Chunk.ChunkID)
	}
	want := map[string]float64{}
	for _, s := range plain {
		p := 0.0
		if s.Chunk.ChunkID == "b" {
			p = 1
		}
		t1 := float64(float64(1.0-w) * *s.Rerank)
		t2 := float64(w * p)
		want[s.Chunk.ChunkID] = float64(t1 + t2)
	}
	for _, s := range got {
		if *s.Rerank != want[s.Chunk.ChunkID] {
			t.Errorf("chunk %s: rerank %v, want %v", s.Chunk.ChunkID, *s.Rerank, want[s.Chunk.ChunkID])
		}
	}

	// Repeated pairs count once; a query of one token has no pair.
	one := prox
	one.Tokens = analysis.Tokenize("payment")
	for i, s := range retrieval.Rerank(chunks, one) {
		if s.Chunk.ChunkID != plain[i].Chunk.ChunkID || *s.Rerank != float64(float64(1.0-w)**plain[i].Rerank) {
			t.Fatalf("one-token query: chunk %d %s %v, want %s scaled", i, s.Chunk.ChunkID, *s.Rerank, plain[i].Chunk.ChunkID)
		}
	}
	rep := prox
	rep.Tokens = analysis.Tokenize("payment hold payment hold now")
	// Distinct pairs: (payment hold), (hold payment), (hold now); b holds
	// the first, c the second.
	for _, s := range retrieval.Rerank(chunks, rep) {
		var p float64
		switch s.Chunk.ChunkID {
		case "b", "c":
			p = 1.0 / 3
		}
		base := 0.0
		for _, q := range plain {
			if q.Chunk.ChunkID == s.Chunk.ChunkID {
				base = *q.Rerank
			}
		}
		if want := float64(float64(float64(1.0-w)*base) + float64(w*p)); *s.Rerank != want {
			t.Errorf("repeated pairs, chunk %s: %v, want %v", s.Chunk.ChunkID, *s.Rerank, want)
		}
	}
}

// rerank_proximity and rerank_doc are validated to [0, 1], off in the
// seed profile, set in the service profile, and travel in the policy's
// wire form.
func TestRerankMixPolicy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		field   func(*retrieval.Policy) *float64
		service float64
	}{
		{"rerank_proximity", func(p *retrieval.Policy) *float64 { return &p.RerankProximity }, 0.25},
		{"rerank_doc", func(p *retrieval.Policy) *float64 { return &p.RerankDoc }, 0.1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := retrieval.New(nil)
			for _, bad := range []float64{-0.1, 1.5} {
				p := retrieval.DefaultPolicy()
				*tt.field(&p) = bad
				if err := r.Validate(p); !errors.Is(err, retrieval.ErrInvalidPolicy) {
					t.Errorf("%s %v: %v, want ErrInvalidPolicy", tt.name, bad, err)
				}
			}
			p := retrieval.DefaultPolicy()
			if got := *tt.field(&p); got != 0 {
				t.Fatalf("the seed profile's %s is %v, want 0", tt.name, got)
			}
			s := retrieval.ServicePolicy()
			if got := *tt.field(&s); got != tt.service {
				t.Fatalf("the service profile's %s is %v, want %v", tt.name, got, tt.service)
			}
			*tt.field(&p) = 0.4
			got := p.Patch().Apply(retrieval.DefaultPolicy())
			if v := *tt.field(&got); v != 0.4 {
				t.Fatalf("%s through the patch: %v, want 0.4", tt.name, v)
			}
		})
	}
}
