package retrieval_test

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

func TestQueryTermWeights(t *testing.T) {
	tests := []struct {
		name  string
		query string
		k3    float64
		want  []float64
	}{
		{"off", "hold the hold", 0, nil},
		{"no repetition", "payment hold release", 8, nil},
		{"empty", "", 8, nil},
		{"k3 8, twice", "hold the hold", 8, []float64{float64(9*2) / 10, 1}},
		{"k3 8, three times", "Hold, hold; HOLD release", 8, []float64{float64(9*3) / 11, 1}},
		{"k3 0.5", "wire wire", 0.5, []float64{float64(1.5*2) / 2.5}},
		{"k3 1000 is nearly the count", "a b a c a", 1000, []float64{float64(1001*3) / 1003, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens := analysis.Tokenize(tt.query)
			got := retrieval.QueryTermWeights(tokens, analysis.TokenSet(tt.query), tt.k3)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("QueryTermWeights(%q, k3 %v) = %v, want %v", tt.query, tt.k3, got, tt.want)
			}
			for _, w := range got {
				if w < 1 {
					t.Fatalf("weight %v below 1", w)
				}
			}
		})
	}
}

// TestQTFRanking: with qtf_k3 set, a repeated query term weighs more in
// the lexical ranking, exactly by QueryTermWeights; a query without
// repetition ranks bit for bit as with qtf_k3 0.
func TestQTFRanking(t *testing.T) {
	st := newStore(t,
		doc("w", "a", cordontype.Public, 100, "hold hold hold notice for the desk"),
		doc("w", "b", cordontype.Public, 100, "release release release notice for the desk"),
		doc("w", "c", cordontype.Public, 100, "cut-off times for wires"),
	)
	p := principal("w", cordontype.Public)
	lexical := func(text string, k3 float64) retrieval.Result {
		return retrieve(t, st, query(p, text, func(pol *retrieval.Policy) {
			pol.QTFK3, pol.EnableRerank, pol.RRFWeights.Cosine, pol.Limit = k3, false, 0, 10
		}))
	}
	// "hold" and "release" are alike in the corpus, so without qtf the two
	// chunks tie and chunk id order puts a first; said twice, "release"
	// puts its chunk first.
	const q = "release hold release"
	off, on := lexical(q, 0), lexical(q, 8)
	if len(off.Chunks) < 2 || off.Chunks[0].Chunk.DocID != "a" || *off.Chunks[0].BM25 != *off.Chunks[1].BM25 {
		t.Fatalf("without qtf: %+v, want a and b tied", off.Chunks)
	}
	if on.Chunks[0].Chunk.DocID != "b" {
		t.Fatalf("with qtf_k3 8 first %s, want b", on.Chunks[0].Chunk.DocID)
	}
	// The weighted score is section 4's weighted sum: w times the term's
	// contribution.
	w := retrieval.QueryTermWeights(analysis.Tokenize(q), analysis.TokenSet(q), 8)
	if got, want := *on.Chunks[0].BM25, float64(w[0]**off.Chunks[1].BM25); got != want {
		t.Fatalf("weighted score %v, want %v (w %v times the unweighted %v)", got, want, w[0], *off.Chunks[1].BM25)
	}
	if got, want := *on.Chunks[1].BM25, *off.Chunks[0].BM25; got != want {
		t.Fatalf("a term said once: score %v, want the unweighted %v", got, want)
	}
	if a, b := lexical("hold release notice", 0), lexical("hold release notice", 8); len(a.Chunks) == 0 || !reflect.DeepEqual(a.Chunks, b.Chunks) {
		t.Fatal("a query without repetition ranks differently with qtf_k3 set")
	}
}

func TestQTFPolicyValidation(t *testing.T) {
	for _, k3 := range []float64{-1, 1000.5, math.NaN(), math.Inf(1)} {
		pol := retrieval.DefaultPolicy()
		pol.QTFK3 = k3
		if err := pol.Validate(); err == nil {
			t.Errorf("qtf_k3 %v accepted", k3)
		}
	}
	pol := retrieval.DefaultPolicy()
	pol.QTFK3 = 1000
	if err := pol.Validate(); err != nil {
		t.Errorf("qtf_k3 1000 refused: %v", err)
	}
}
