package retrieval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

func TestQueryVectorRefusesOtherModels(t *testing.T) {
	hash := embed.Spec{Model: embed.Hash, Dims: 8}
	toy := embed.Spec{Model: "toy", Dims: 4}
	cases := []struct {
		name  string
		spec  embed.Spec
		dense *retrieval.DenseQuery
		ok    bool
	}{
		{"hash tenant, hash query", hash, nil, true},
		{"hash tenant, model query", hash, &retrieval.DenseQuery{Spec: toy, Vector: make([]int32, 4)}, false},
		{"model tenant, hash query", toy, nil, false},
		{"model tenant, same model", toy, &retrieval.DenseQuery{Spec: toy, Vector: []int32{1, 2, 3, 4}}, true},
		{"model tenant, other dims", toy, &retrieval.DenseQuery{Spec: embed.Spec{Model: "toy", Dims: 5}, Vector: make([]int32, 5)}, false},
		{"model tenant, other model", toy, &retrieval.DenseQuery{Spec: embed.Spec{Model: "other", Dims: 4}, Vector: make([]int32, 4)}, false},
		{"model tenant, short vector", toy, &retrieval.DenseQuery{Spec: toy, Vector: []int32{1}}, false},
	}
	for _, c := range cases {
		req := retrieval.RankRequest{Tokens: []string{"a", "b"}, Dense: c.dense}
		v, err := req.QueryVector(c.spec)
		var mm *retrieval.ModelMismatchError
		switch {
		case c.ok && (err != nil || len(v) != c.spec.Dims):
			t.Errorf("%s: %v, %v", c.name, v, err)
		case !c.ok && (!errors.As(err, &mm) || mm.Want != c.spec):
			t.Errorf("%s: err %v, want a mismatch naming %s", c.name, err, c.spec)
		}
	}
}

// A tenant on a model: the query is embedded once per query, with the
// model the store names before it ranks; a stale model costs one more
// ranking, not a wrong answer.
func TestRetrieverEmbedsQueriesWithTheTenantModel(t *testing.T) {
	ctx := context.Background()
	toy := &embedtest.Toy{Dims: 16}
	reg := embedtest.Registry("toy-16", toy)
	s := index.DefaultSettings()
	s.Model, s.Dims = "toy-16", 16
	st, err := memory.NewWithModels(s, reg)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"the quick brown fox jumps", "a slow green turtle walks", "brown bread and butter"} {
		doc := cordontype.Document{Tenant: "w", DocID: string(rune('a' + i)), Text: text}
		if _, err := st.Put(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "w"}, Text: "brown fox", Policy: retrieval.DefaultPolicy()}
	before := toy.Texts.Load()
	res, err := retrieval.New(st).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) == 0 || res.Chunks[0].Cosine == nil {
		t.Fatalf("no dense hit: %+v", res)
	}
	if got := toy.Texts.Load() - before; got != 1 {
		t.Fatalf("first query embedded %d texts, want 1 (the store names the model up front)", got)
	}
	want, _ := json.Marshal(res)

	// A store whose model is stale (a cut-over raced the query) refuses
	// the first ranking; the retriever embeds with the model the refusal
	// names and ranks once more, with the same result.
	stale := &staleModel{Store: st}
	before = toy.Texts.Load()
	res, err = retrieval.New(stale).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res); !bytes.Equal(got, want) {
		t.Fatalf("after a stale model:\n%s\nwant\n%s", got, want)
	}
	if stale.ranks != 2 || toy.Texts.Load()-before != 1 {
		t.Fatalf("after a stale model: %d rankings, %d texts embedded; want 2 and 1", stale.ranks, toy.Texts.Load()-before)
	}
	toy.Fail.Store(true)
	if _, err := retrieval.New(st).Retrieve(ctx, q); !errors.Is(err, embed.ErrProvider) {
		t.Fatalf("failing provider: %v, want ErrProvider", err)
	}
}

// staleModel is a store that names hashing as every tenant's model, as
// one whose tenant was cut over to a model after it last read it.
type staleModel struct {
	*memory.Store
	ranks int
}

func (s *staleModel) TenantModel(context.Context, string) (embed.Spec, error) {
	return embed.Spec{Model: embed.Hash}, nil
}

func (s *staleModel) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	s.ranks++
	return s.Store.Rank(ctx, req)
}

// A model no provider serves is an error that names it and says how to
// configure one.
func TestEmbedQueryWithoutProvider(t *testing.T) {
	_, err := retrieval.EmbedQuery(context.Background(), nil, embed.Spec{Model: "toy-16", Dims: 16}, "brown fox", []string{"brown", "fox"})
	if !errors.Is(err, embed.ErrUnknownModel) || !strings.Contains(err.Error(), "--embed-model toy-16") {
		t.Fatalf("EmbedQuery without a registry: %v, want ErrUnknownModel naming the flag", err)
	}
	if dq, err := retrieval.EmbedQuery(context.Background(), nil, embed.Spec{Model: embed.Hash, Dims: 16}, "brown fox", nil); dq != nil || err != nil {
		t.Fatalf("hashing: %v, %v; want nil, nil (the store hashes)", dq, err)
	}
}

// dense_fallback "lexical": a provider failure ranks as enable_dense false
// (the same result, "dense" added to Degraded, the error kept); without it,
// an unconfigured model, or a request already out of time, it fails.
func TestDenseFallback(t *testing.T) {
	ctx := context.Background()
	toy := &embedtest.Toy{Dims: 16}
	reg := embedtest.Registry("toy-16", toy)
	s := index.DefaultSettings()
	s.Model, s.Dims = "toy-16", 16
	st, err := memory.NewWithModels(s, reg)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"the quick brown fox jumps", "a slow green turtle walks", "brown bread and butter"} {
		if _, err := st.Put(ctx, cordontype.Document{Tenant: "w", DocID: string(rune('a' + i)), Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	r := retrieval.New(st)
	query := func(edit func(p *retrieval.Policy)) retrieval.Query {
		p := retrieval.DefaultPolicy()
		edit(&p)
		return retrieval.Query{Principal: cordontype.Principal{Tenant: "w"}, Text: "brown fox", Policy: p}
	}
	fallback := func(p *retrieval.Policy) { p.DenseFallback = retrieval.FallbackLexical }
	toy.Fail.Store(true)
	if _, err := r.Retrieve(ctx, query(func(*retrieval.Policy) {})); !errors.Is(err, embed.ErrProvider) {
		t.Fatalf("without the fallback: %v, want ErrProvider", err)
	}
	got, err := r.Retrieve(ctx, query(fallback))
	if err != nil {
		t.Fatal(err)
	}
	calls := toy.Calls.Load()
	off, err := r.Retrieve(ctx, query(func(p *retrieval.Policy) { p.EnableDense = false }))
	if err != nil || toy.Calls.Load() != calls {
		t.Fatalf("enable_dense false: %v, %d embed calls", err, toy.Calls.Load()-calls)
	}
	if !errors.Is(got.DenseErr, embed.ErrProvider) || !reflect.DeepEqual(got.Degraded, []string{"dense"}) {
		t.Fatalf("fallback: degraded %v, err %v; want [dense] and the provider's error", got.Degraded, got.DenseErr)
	}
	got.Degraded, got.DenseErr, got.Policy, off.Policy = off.Degraded, nil, retrieval.Policy{}, retrieval.Policy{}
	if len(off.Chunks) == 0 || !reflect.DeepEqual(got, off) {
		t.Fatalf("fallback %+v, want enable_dense false's %+v", got, off)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Retrieve(canceled, query(fallback)); err == nil {
		t.Fatal("a canceled request fell back")
	}
}

// rerank_dense mixes the cosine into the rerank score: with weight 0 the
// scores are SPEC's formula bit for bit; with weight > 0 a chunk the dense
// side ranks first can overtake one with more BM25, and the score is the
// documented ((1-g)-d)*overlap + g*bm25/max + d*cos/max.
func TestRerankDense(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	chunks := []retrieval.Scored{
		{Chunk: cordontype.Chunk{ChunkID: "a", Text: "alpha beta"}, BM25: f(4), Cosine: f(0.1)},
		{Chunk: cordontype.Chunk{ChunkID: "b", Text: "alpha gamma"}, BM25: f(2), Cosine: f(0.8)},
	}
	in := retrieval.RerankInput{Terms: []string{"alpha", "beta"}, BM25Max: 4, Depth: 10, Kind: retrieval.RerankOverlap, Blend: 0.5, CosMax: 0.8}
	plain := retrieval.Rerank(chunks, in)
	if plain[0].Chunk.ChunkID != "a" || *plain[0].Rerank != 0.5*1+0.5*1 || *plain[1].Rerank != 0.5*0.5+0.5*0.5 {
		t.Fatalf("without rerank_dense: %v %v", *plain[0].Rerank, *plain[1].Rerank)
	}
	in.Dense = 0
	same := retrieval.Rerank(chunks, in)
	for i := range same {
		if *same[i].Rerank != *plain[i].Rerank {
			t.Fatal("rerank_dense 0 changed a score")
		}
	}
	in.Blend, in.Dense = 0.2, 0.8
	mixed := retrieval.Rerank(chunks, in)
	cos, cosMax := 0.8, 0.8
	wantB := float64(float64(float64(float64(1.0-0.2)-0.8)*0.5)+float64(0.2*float64(2.0/4.0))) + float64(0.8*float64(cos/cosMax))
	if mixed[0].Chunk.ChunkID != "b" || *mixed[0].Rerank != wantB {
		t.Fatalf("with rerank_dense 0.8: first %s score %v, want b %v", mixed[0].Chunk.ChunkID, *mixed[0].Rerank, wantB)
	}
	p := retrieval.DefaultPolicy()
	p.RerankBlend, p.RerankDense = 0.5, 0.6
	if err := p.Validate(); !errors.Is(err, retrieval.ErrInvalidPolicy) {
		t.Fatalf("rerank_blend + rerank_dense > 1: %v", err)
	}
}

// The model overlay sets the measured values and nothing the store ranks
// with (the document ranking's weight is the profile's); a request applied
// over it keeps its own values.
func TestModelDefaults(t *testing.T) {
	base := retrieval.ServicePolicy()
	pol := retrieval.ModelDefaults().Apply(base)
	if pol.RRFWeights != (retrieval.Weights{BM25: 1, Cosine: 1, Doc: base.RRFWeights.Doc}) || pol.RerankBlend != 0.75 || pol.RerankDense != 0.15 {
		t.Fatalf("overlay applied: %+v", pol)
	}
	tail := base
	tail.RRFWeights, tail.RerankBlend, tail.RerankDense = pol.RRFWeights, pol.RerankBlend, pol.RerankDense
	if !reflect.DeepEqual(pol, tail) {
		t.Fatalf("the overlay changed more than rrf_weights, rerank_blend and rerank_dense: %+v", pol)
	}
	one := 0.3
	req := &retrieval.PolicyPatch{RerankBlend: &one, RRFWeights: &retrieval.WeightsPatch{Cosine: &one}}
	got := req.Apply(pol)
	if got.RerankBlend != 0.3 || got.RRFWeights.Cosine != 0.3 || got.RRFWeights.BM25 != 1 || got.RerankDense != 0.15 {
		t.Fatalf("request over the overlay: %+v", got)
	}
}

// TestModelPolicyRanksAlike: a query's model policy may differ from its
// policy only in the tail of the pipeline; one that would rank otherwise
// is refused before anything is ranked.
func TestModelPolicyRanksAlike(t *testing.T) {
	base := retrieval.ServicePolicy()
	model := retrieval.ModelDefaults().Apply(base)
	stale := int64(5)
	tests := []struct {
		name string
		edit func(p *retrieval.Policy)
		ok   bool
	}{
		{"the model defaults", nil, true},
		{"another limit and rerank_depth", func(p *retrieval.Policy) { p.Limit, p.RerankDepth = 9, 7 }, true},
		{"another top_n", func(p *retrieval.Policy) { p.TopN = 51 }, false},
		{"a freshness contract", func(p *retrieval.Policy) { p.MaxStaleTicks = &stale }, false},
		{"query expansion", func(p *retrieval.Policy) { p.PRFDocs = 3 }, false},
		{"prf_terms", func(p *retrieval.Policy) { p.PRFTerms = 3 }, false},
		{"prf_weight", func(p *retrieval.Policy) { p.PRFWeight = 0.3 }, false},
		{"qtf_k3", func(p *retrieval.Policy) { p.QTFK3 = 2 }, false},
		{"idf", func(p *retrieval.Policy) { p.IDF = "plus1" }, false},
		{"stop_words", func(p *retrieval.Policy) { p.StopWords = retrieval.StopEnglish }, false},
		{"stop_words none is off", func(p *retrieval.Policy) { p.StopWords = retrieval.StopNone }, true},
	}
	st := newStore(t, corpus("wholesale")...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := model
			if tt.edit != nil {
				tt.edit(&m)
			}
			q := retrieval.Query{Principal: principal("wholesale", cordontype.Restricted, "deal-x"), Text: "payment hold", NowTick: 120, Policy: base, ModelPolicy: &m}
			res, err := retrieval.New(st).Retrieve(context.Background(), q)
			if tt.ok != (err == nil) || (err != nil && (!errors.Is(err, retrieval.ErrInvalidPolicy) || !strings.Contains(err.Error(), "must rank as"))) {
				t.Fatalf("got %v, want ok %v", err, tt.ok)
			}
			// The tenant hashes: the policy, not the model policy, ranked.
			if err == nil && !reflect.DeepEqual(res.Policy, base) {
				t.Fatalf("a hashing tenant ranked with %+v, want the policy %+v", res.Policy, base)
			}
		})
	}
}
