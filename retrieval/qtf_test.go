package retrieval_test

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
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

// TestIDFKindRanking: with idf "rsj", a term in half the chunks or more
// weighs bm25.RSJFloor in the lexical ranking's scores, a rare term RSJ's
// ln((N - df + 0.5) / (df + 0.5)); Rankings.IDF and Store.IDF stay SPEC's;
// the reference store and the in-memory index agree bit for bit.
func TestIDFKindRanking(t *testing.T) {
	ctx := context.Background()
	docs := []cordontype.Document{
		doc("w", "a", cordontype.Public, 100, "the hold of the payment"),
		doc("w", "b", cordontype.Public, 100, "the release of the wire"),
		doc("w", "c", cordontype.Public, 100, "the cut-off of the batch"),
		doc("w", "d", cordontype.Confidential, 100, "the hold notice"),
	}
	mem, mi := newStore(t, docs...), newMemindex(t, docs...)
	p := principal("w", cordontype.Public) // sees a, b, c: N = 3 under the entitled scope
	terms := []string{"the", "hold", "zebra"}
	var ranked []retrieval.Rankings
	for _, st := range []retrieval.Store{mem, mi} {
		rk, err := st.Rank(ctx, retrieval.RankRequest{Principal: p, Tokens: terms, Terms: terms, IDF: bm25.IDFRSJ, TopN: 10})
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{bm25.IDF(3, 3), bm25.IDF(3, 1), bm25.IDF(3, 0)}
		if idf, _ := st.IDF(ctx, p, terms); !slices.Equal(rk.IDF, want) || !slices.Equal(idf, want) {
			t.Fatalf("Rankings.IDF %v, Store.IDF %v, want SPEC's %v", rk.IDF, idf, want)
		}
		// a's score: "the" twice at the floor, then "hold" once at RSJ(3, 1).
		params, avgdl := bm25.DefaultParams(), bm25.AvgDL(5+5+6, 3) // a, b, c (d is hidden: the entitled scope)
		wantA := float64(0+bm25.Term(bm25.RSJFloor, 2, 5, avgdl, params)) + bm25.Term(bm25.RSJ(3, 1), 1, 5, avgdl, params)
		if rk.Lexical[0].Score != wantA {
			t.Fatalf("a scores %v, want %v", rk.Lexical[0].Score, wantA)
		}
		// "the" is in every visible chunk: under rsj a and b, c score
		// far apart (hold decides); b and c only by the floor.
		if len(rk.Lexical) != 3 || rk.Lexical[0].Chunk.DocID != "a" || rk.Lexical[1].Score >= float64(2*bm25.RSJFloor)*3 {
			t.Fatalf("rsj lexical ranking %+v", rk.Lexical)
		}
		ranked = append(ranked, rk)
	}
	for i := range ranked[0].Lexical {
		if a, b := ranked[0].Lexical[i], ranked[1].Lexical[i]; a.Chunk.ChunkID != b.Chunk.ChunkID || a.Score != b.Score {
			t.Fatalf("memory and memindex differ at %d: %v %v, %v %v", i, a.Chunk.ChunkID, a.Score, b.Chunk.ChunkID, b.Score)
		}
	}
}
