package retrieval_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

func hit(text string, length int) retrieval.Hit {
	return retrieval.Hit{Chunk: cordontype.Chunk{Text: text, Length: length}}
}

func TestFeedbackTerms(t *testing.T) {
	tenth, fifth, threeTenths := 0.1, 0.2, 0.3 // variables: constant arithmetic would be exact
	tests := []struct {
		name  string
		docs  []retrieval.Hit
		query []string
		want  []retrieval.Feedback
	}{
		{
			name:  "share of each chunk summed over chunks, query terms left out",
			docs:  []retrieval.Hit{hit("alpha beta beta gamma", 4), hit("beta delta", 2)},
			query: []string{"alpha"},
			want:  []retrieval.Feedback{{Term: "beta", Weight: 1}, {Term: "delta", Weight: 0.5}, {Term: "gamma", Weight: 0.25}},
		},
		{
			name: "ties by term, byte order",
			docs: []retrieval.Hit{hit("b a B", 3)},
			want: []retrieval.Feedback{{Term: "b", Weight: 2.0 / 3}, {Term: "a", Weight: 1.0 / 3}},
		},
		{
			name: "a chunk of length 0 is skipped",
			docs: []retrieval.Hit{hit("zeta", 0), hit("eta", 1)},
			want: []retrieval.Feedback{{Term: "eta", Weight: 1}},
		},
		{
			name:  "only query terms: no candidate",
			docs:  []retrieval.Hit{hit("alpha alpha", 2)},
			query: []string{"alpha"},
			want:  []retrieval.Feedback{},
		},
		{
			name: "summed in ranking order",
			// 0.1 + 0.2 + 0.3 rounds differently from 0.3 + 0.2 + 0.1.
			docs: []retrieval.Hit{hit("x", 10), hit("x", 5), hit("x x x y", 10)},
			want: []retrieval.Feedback{{Term: "x", Weight: float64(float64(tenth+fifth) + threeTenths)}, {Term: "y", Weight: 0.1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retrieval.FeedbackTerms(tt.docs, tt.query)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FeedbackTerms = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChooseExpansion(t *testing.T) {
	cands := []retrieval.Feedback{{Term: "beta", Weight: 1}, {Term: "delta", Weight: 0.5}, {Term: "gamma", Weight: 0.25}, {Term: "eps", Weight: 0.25}}
	idf := []float64{0.2, 1, 0, 2}
	// s: beta 0.2, delta 0.5, gamma 0 (dropped), eps 0.5.
	tests := []struct {
		name   string
		idf    []float64
		n      int
		weight float64
		want   retrieval.Expansion
	}{
		{"best two, ties by term", idf, 2, 0.5, retrieval.Expansion{Terms: []string{"delta", "eps"}, Weights: []float64{0.5, 0.5}}},
		{"weights in proportion to s / s_max", idf, 3, 0.5,
			retrieval.Expansion{Terms: []string{"delta", "eps", "beta"}, Weights: []float64{0.5, 0.5, float64(0.5 * float64(0.2/0.5))}}},
		{"s == 0 is dropped even when n allows more", idf, 10, 1,
			retrieval.Expansion{Terms: []string{"delta", "eps", "beta"}, Weights: []float64{1, 1, float64(0.2 / 0.5)}}},
		{"missing idf counts 0", idf[:2], 10, 0.3,
			retrieval.Expansion{Terms: []string{"delta", "beta"}, Weights: []float64{0.3, float64(0.3 * float64(0.2/0.5))}}},
		{"all idf 0: nothing", []float64{0, 0, 0, 0}, 10, 0.5, retrieval.Expansion{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retrieval.ChooseExpansion(cands, tt.idf, tt.n, tt.weight)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ChooseExpansion = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// expansionCorpus: "hold" leads to w-1, whose best other term "sanctions"
// is in w-2 (which lacks "hold"); w-9 is confidential and would, if it
// shaped the expansion, add "zebra" or change the weight of "desk".
func expansionCorpus(hidden bool) []cordontype.Document {
	docs := []cordontype.Document{
		doc("w", "w-1", cordontype.Public, 100, "hold hold sanctions sanctions desk"),
		doc("w", "w-2", cordontype.Public, 100, "sanctions screening desk escalation"),
		doc("w", "w-3", cordontype.Public, 100, "hold music for callers today"),
	}
	if hidden {
		docs = append(docs, doc("w", "w-9", cordontype.Confidential, 100, "hold hold hold zebra desk desk"))
	}
	return docs
}

func prf(docs, terms int, weight float64, rerank bool) func(*retrieval.Policy) {
	return func(p *retrieval.Policy) {
		p.PRFDocs, p.PRFTerms, p.PRFWeight, p.EnableRerank = docs, terms, weight, rerank
		p.RRFWeights.Cosine = 0
	}
}

func TestRetrieveExpansion(t *testing.T) {
	st := newStore(t, expansionCorpus(false)...)
	p := principal("w", cordontype.Public)
	bm25Of := func(res retrieval.Result, id string) *float64 {
		for _, s := range res.Chunks {
			if s.Chunk.DocID == id {
				return s.BM25
			}
		}
		return nil
	}

	off := retrieve(t, st, query(p, "hold", prf(0, 10, 0.5, false)))
	if off.Expansion != nil || bm25Of(off, "w-2") != nil {
		t.Fatalf("prf off: expansion %q, w-2 bm25 %v; want none", off.Expansion, bm25Of(off, "w-2"))
	}
	on := retrieve(t, st, query(p, "hold", prf(1, 1, 0.5, false)))
	if !slices.Equal(on.Expansion, []string{"sanctions"}) {
		t.Fatalf("expansion = %q, want [sanctions]", on.Expansion)
	}
	// w-2 holds only the added term: its score is that term's contribution
	// weighed 0.5 (the only, hence best, added term weighs prf_weight).
	rk, err := st.Rank(context.Background(), retrieval.RankRequest{Principal: p, Terms: []string{"sanctions"}, NowTick: 120, TopN: 10})
	if err != nil {
		t.Fatal(err)
	}
	var plain float64
	for _, h := range rk.Lexical {
		if h.Chunk.DocID == "w-2" {
			plain = h.Score
		}
	}
	if got := bm25Of(on, "w-2"); got == nil || *got != float64(0.5*plain) || plain == 0 {
		t.Errorf("w-2 bm25 = %v, want 0.5 * %v", got, plain)
	}

	// The reranker reads the original query: w-2 holds none of it, so the
	// relevance floor drops it.
	reranked := retrieve(t, st, query(p, "hold", prf(1, 1, 0.5, true)))
	if bm25Of(reranked, "w-2") != nil || len(reranked.Chunks) != 2 {
		t.Errorf("reranked with expansion: %q, want w-1 and w-3 only", resultIDs(reranked))
	}
	if !slices.Equal(reranked.Expansion, []string{"sanctions"}) {
		t.Errorf("reranked expansion = %q, want [sanctions]", reranked.Expansion)
	}
}

// TestExpansionIgnoresHiddenChunks: a chunk the principal may not see
// neither suggests terms nor changes anything the principal receives.
func TestExpansionIgnoresHiddenChunks(t *testing.T) {
	p := principal("w", cordontype.Public)
	q := query(p, "hold", prf(3, 10, 0.5, false))
	without := retrieve(t, newStore(t, expansionCorpus(false)...), q)
	with := retrieve(t, newStore(t, expansionCorpus(true)...), q)
	if len(with.Expansion) < 2 || !slices.Equal(with.Expansion, without.Expansion) || slices.Contains(with.Expansion, "zebra") {
		t.Errorf("expansion with a hidden chunk %q, without %q", with.Expansion, without.Expansion)
	}
	with.Considered, with.ExcludedByEntitlement = without.Considered, without.ExcludedByEntitlement // counters may count hidden chunks
	if !reflect.DeepEqual(with, without) {
		t.Errorf("results with a hidden chunk differ:\n%+v\n%+v", with, without)
	}
}

// TestRankWeights: each store sums float64(w * contribution) in term order;
// nil weights and all-1 weights give the same bits as today's sum.
func TestRankWeights(t *testing.T) {
	ctx := context.Background()
	docs := append(expansionCorpus(true), doc("w", "w-4", cordontype.Public, 100, "hold sanctions escalation desk"))
	mem, mi := newStore(t, docs...), newMemindex(t, docs...)
	p := principal("w", cordontype.Restricted)
	for name, st := range map[string]retrieval.Store{"memory": mem, "memindex": mi} {
		t.Run(name, func(t *testing.T) {
			rank := func(terms []string, w []float64) map[string]float64 {
				t.Helper()
				rk, err := st.Rank(ctx, retrieval.RankRequest{Principal: p, Terms: terms, Weights: w, NowTick: 120, TopN: 10})
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]float64{}
				for _, h := range rk.Lexical {
					out[h.Chunk.DocID] = h.Score
				}
				return out
			}
			hold, sanc, desk := rank([]string{"hold"}, nil), rank([]string{"sanctions"}, nil), rank([]string{"desk"}, nil)
			both := rank([]string{"hold", "sanctions", "desk"}, nil)
			if ones := rank([]string{"hold", "sanctions", "desk"}, []float64{1, 1, 1}); !reflect.DeepEqual(ones, both) {
				t.Errorf("weights 1 = %v, nil weights = %v", ones, both)
			}
			got := rank([]string{"hold", "sanctions", "desk"}, []float64{1, 0.3, 0.7})
			want := map[string]float64{}
			for _, id := range []string{"w-1", "w-2", "w-3", "w-4", "w-9"} {
				s := float64(hold[id] + float64(0.3*sanc[id]))
				s = float64(s + float64(0.7*desk[id]))
				if s > 0 {
					want[id] = s
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("weighted scores = %v, want %v", got, want)
			}
			if zero := rank([]string{"hold", "sanctions"}, []float64{1, 0}); !reflect.DeepEqual(zero, hold) {
				t.Errorf("weight 0: %v, want the first term's ranking %v", zero, hold)
			}
		})
	}
}

// TestIDFMatchesRank: Store.IDF gives the idf Rank reports, under the
// principal's scope, on each in-memory store; zeros for an unknown tenant.
func TestIDFMatchesRank(t *testing.T) {
	ctx := context.Background()
	docs := expansionCorpus(true)
	mem, mi := newStore(t, docs...), newMemindex(t, docs...)
	terms := []string{"hold", "zebra", "sanctions", "absent"}
	for name, st := range map[string]retrieval.Store{"memory": mem, "memindex": mi} {
		for _, p := range []cordontype.Principal{principal("w", cordontype.Public), principal("w", cordontype.Restricted)} {
			rk, err := st.Rank(ctx, retrieval.RankRequest{Principal: p, Terms: terms, NowTick: 120, TopN: 10})
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.IDF(ctx, p, terms)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, rk.IDF) || got[0] == 0 {
				t.Errorf("%s %s: IDF = %v, Rank's = %v", name, p.Clearance, got, rk.IDF)
			}
		}
		if got, err := st.IDF(ctx, principal("nobody", cordontype.Public), terms); err != nil || !slices.Equal(got, make([]float64, len(terms))) {
			t.Errorf("%s unknown tenant: IDF = %v, %v, want zeros", name, got, err)
		}
	}
}

// versionedStore numbers its rankings 1, 2, ... as a snapshot version.
type versionedStore struct {
	retrieval.Store
	calls int64
}

func (v *versionedStore) RankVersion(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, int64, error) {
	v.calls++
	rk, err := v.Store.Rank(ctx, req)
	return rk, v.calls, err
}

// TestIndexVersion: RetrieveVersion reports a VersionedStore's version, the
// expanded ranking's when the query is expanded; other stores report 0.
func TestIndexVersion(t *testing.T) {
	st := newStore(t, expansionCorpus(false)...)
	p := principal("w", cordontype.Public)
	tests := []struct {
		name  string
		store retrieval.Store
		opt   func(*retrieval.Policy)
		want  int64
	}{
		{"plain store", st, prf(1, 1, 0.5, false), 0},
		{"one ranking", &versionedStore{Store: st}, prf(0, 10, 0.5, false), 1},
		{"expanded: the second ranking", &versionedStore{Store: st}, prf(1, 1, 0.5, false), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := retrieval.New(tt.store).RetrieveVersion(context.Background(), query(p, "hold", tt.opt))
			if err != nil || got != tt.want {
				t.Errorf("RetrieveVersion = version %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
