package retrieval

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
)

func ptr[T any](v T) *T { return &v }

// TestVisible is invariant 2: visible() is a conjunction; tenant,
// classification and barriers each hide a chunk on their own.
func TestVisible(t *testing.T) {
	p := cordontype.Principal{Tenant: "wholesale", Clearance: cordontype.Confidential, Barriers: []string{"deal-a", "deal-b"}}
	ok := cordontype.Chunk{Tenant: "wholesale", Classification: cordontype.Internal, Barriers: []string{"deal-a"}}
	tests := []struct {
		name  string
		edit  func(c *cordontype.Chunk)
		pEdit func(p *cordontype.Principal)
		want  bool
	}{
		{"all three pass", nil, nil, true},
		{"other tenant alone hides", func(c *cordontype.Chunk) { c.Tenant = "retail" }, nil, false},
		{"classification above clearance alone hides", func(c *cordontype.Chunk) { c.Classification = cordontype.Restricted }, nil, false},
		{"missing barrier alone hides", func(c *cordontype.Chunk) { c.Barriers = []string{"deal-a", "deal-c"} }, nil, false},
		{"classification equal to clearance passes", func(c *cordontype.Chunk) { c.Classification = cordontype.Confidential }, nil, true},
		{"public to public passes", func(c *cordontype.Chunk) { c.Classification = cordontype.Public }, func(p *cordontype.Principal) { p.Clearance = cordontype.Public }, true},
		{"no barriers on chunk passes", func(c *cordontype.Chunk) { c.Barriers = []string{} }, nil, true},
		{"nil barriers on both passes", func(c *cordontype.Chunk) { c.Barriers = nil }, func(p *cordontype.Principal) { p.Barriers = nil }, true},
		{"all barriers held passes", func(c *cordontype.Chunk) { c.Barriers = []string{"deal-a", "deal-b"} }, nil, true},
		{"barrier on chunk, principal holds none", nil, func(p *cordontype.Principal) { p.Barriers = []string{} }, false},
		{"barriers are case-sensitive", func(c *cordontype.Chunk) { c.Barriers = []string{"Deal-a"} }, nil, false},
		{"tenant compare is exact", func(c *cordontype.Chunk) { c.Tenant = "wholesale2" }, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, pp := ok, p
			c.Barriers = slices.Clone(ok.Barriers)
			pp.Barriers = slices.Clone(p.Barriers)
			if tt.edit != nil {
				tt.edit(&c)
			}
			if tt.pEdit != nil {
				tt.pEdit(&pp)
			}
			if got := Visible(pp, &c); got != tt.want {
				t.Errorf("Visible(%+v, %+v) = %v, want %v", pp, c, got, tt.want)
			}
		})
	}
}

func TestStale(t *testing.T) {
	tests := []struct {
		name     string
		asOf     int64
		now      int64
		maxStale *int64
		want     bool
	}{
		{"no contract", 0, 1 << 62, nil, false},
		{"fresh", 100, 120, ptr[int64](50), false},
		{"exactly at the limit is fresh", 100, 150, ptr[int64](50), false},
		{"one past the limit is stale", 100, 151, ptr[int64](50), true},
		{"zero tolerance, same tick", 7, 7, ptr[int64](0), false},
		{"zero tolerance, next tick", 7, 8, ptr[int64](0), true},
		{"document from the future is never stale", 500, 100, ptr[int64](0), false},
		{"extreme ticks do not overflow", 0, 1 << 62, ptr[int64](1<<62 - 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cordontype.Chunk{AsOfTick: tt.asOf}
			if got := Stale(c, tt.now, tt.maxStale); got != tt.want {
				t.Errorf("Stale(as_of=%d, now=%d) = %v, want %v", tt.asOf, tt.now, got, tt.want)
			}
		})
	}
}

func hit(id string, score float64, class cordontype.Classification, asOf int64, barriers ...string) Hit {
	return Hit{Chunk: cordontype.Chunk{ChunkID: id, Tenant: "t", Classification: class, AsOfTick: asOf, Barriers: barriers}, Score: score}
}

func ids(h []Hit) []string {
	out := make([]string, len(h))
	for i, x := range h {
		out[i] = x.Chunk.ChunkID
	}
	return out
}

func TestFunnel(t *testing.T) {
	pub, conf, res := cordontype.Public, cordontype.Confidential, cordontype.Restricted
	lexical := []Hit{
		hit("hidden-both", 9, res, 100),
		hit("a", 8, pub, 100),
		hit("stale-both", 7, pub, 10),
		hit("b", 6, conf, 100),
		hit("barred", 5, pub, 100, "deal-x"),
		hit("c", 4, pub, 100),
		hit("hidden-and-stale", 3, res, 10),
	}
	dense := []Hit{
		hit("stale-both", 0.9, pub, 10),
		hit("hidden-both", 0.8, res, 100),
		hit("c", 0.7, pub, 100),
		hit("d", 0.6, pub, 100),
	}
	base := RankRequest{
		Principal: cordontype.Principal{Tenant: "t", Clearance: conf, Barriers: []string{}},
		NowTick:   120, MaxStaleTicks: ptr[int64](50), TopN: 50,
	}
	tests := []struct {
		name       string
		edit       func(r *RankRequest)
		wantLex    []string
		wantDense  []string
		wantEnt    int
		wantFresh  int
		considered int
	}{
		{"filters each ranking, counts once per ranking", nil,
			[]string{"a", "b", "c"}, []string{"c", "d"}, 4, 2, 11},
		{"no freshness contract", func(r *RankRequest) { r.MaxStaleTicks = nil },
			[]string{"a", "stale-both", "b", "c"}, []string{"stale-both", "c", "d"}, 4, 0, 11},
		{"hidden and stale counts as hidden only", func(r *RankRequest) { r.Principal.Clearance = res; r.Principal.Barriers = []string{"deal-x"} },
			[]string{"hidden-both", "a", "b", "barred", "c"}, []string{"hidden-both", "c", "d"}, 0, 3, 11},
		{"truncation after the filter: hidden chunks take no slot", func(r *RankRequest) { r.TopN = 2 },
			[]string{"a", "b"}, []string{"c", "d"}, 4, 2, 11},
		{"exclusions counted beyond top_n", func(r *RankRequest) { r.TopN = 1 },
			[]string{"a"}, []string{"c"}, 4, 2, 11},
		{"low clearance", func(r *RankRequest) { r.Principal.Clearance = pub },
			[]string{"a", "c"}, []string{"c", "d"}, 5, 2, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base
			if tt.edit != nil {
				tt.edit(&req)
			}
			got := Funnel(req, lexical, dense)
			if g := ids(got.Lexical); !slices.Equal(g, tt.wantLex) {
				t.Errorf("lexical = %q, want %q", g, tt.wantLex)
			}
			if g := ids(got.Dense); !slices.Equal(g, tt.wantDense) {
				t.Errorf("dense = %q, want %q", g, tt.wantDense)
			}
			if got.Considered != tt.considered || got.ExcludedByEntitlement != tt.wantEnt || got.ExcludedByFreshness != tt.wantFresh {
				t.Errorf("considered, entitlement, freshness = %d, %d, %d, want %d, %d, %d",
					got.Considered, got.ExcludedByEntitlement, got.ExcludedByFreshness, tt.considered, tt.wantEnt, tt.wantFresh)
			}
		})
	}
}

func TestSortHits(t *testing.T) {
	h := []Hit{
		{Chunk: cordontype.Chunk{ChunkID: "b::0"}, Score: 1},
		{Chunk: cordontype.Chunk{ChunkID: "a::1"}, Score: 2},
		{Chunk: cordontype.Chunk{ChunkID: "B::0"}, Score: 1},
		{Chunk: cordontype.Chunk{ChunkID: "a::10"}, Score: 1},
		{Chunk: cordontype.Chunk{ChunkID: "a::2"}, Score: 1},
	}
	SortHits(h)
	want := []string{"a::1", "B::0", "a::10", "a::2", "b::0"}
	if got := ids(h); !slices.Equal(got, want) {
		t.Errorf("SortHits order = %q, want %q", got, want)
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(p *Policy)
		wantErr bool
	}{
		{"defaults", nil, false},
		{"limit 0", func(p *Policy) { p.Limit = 0 }, true},
		{"top_n 0", func(p *Policy) { p.TopN = 0 }, true},
		{"rerank_depth 0", func(p *Policy) { p.RerankDepth = 0 }, true},
		{"rrf_k 0", func(p *Policy) { p.RRFK = 0 }, true},
		{"rrf_k negative", func(p *Policy) { p.RRFK = -60 }, true},
		{"min_score below 0", func(p *Policy) { p.MinScore = -0.01 }, true},
		{"min_score above 1", func(p *Policy) { p.MinScore = 1.01 }, true},
		{"min_score 0", func(p *Policy) { p.MinScore = 0 }, false},
		{"min_score 1", func(p *Policy) { p.MinScore = 1 }, false},
		{"max_stale_ticks negative", func(p *Policy) { p.MaxStaleTicks = ptr[int64](-1) }, true},
		{"max_stale_ticks 0", func(p *Policy) { p.MaxStaleTicks = ptr[int64](0) }, false},
		{"all ones", func(p *Policy) { p.Limit, p.TopN, p.RerankDepth, p.RRFK = 1, 1, 1, 1 }, false},
		{"rrf weight bm25 negative", func(p *Policy) { p.RRFWeights.BM25 = -0.5 }, true},
		{"rrf weight cosine negative", func(p *Policy) { p.RRFWeights.Cosine = -1 }, true},
		{"rrf weight infinite", func(p *Policy) { p.RRFWeights.BM25 = math.Inf(1) }, true},
		{"rrf weight NaN", func(p *Policy) { p.RRFWeights.Cosine = math.NaN() }, true},
		{"rrf weights 0", func(p *Policy) { p.RRFWeights = Weights{} }, false},
		{"rrf weight 2.5", func(p *Policy) { p.RRFWeights.BM25 = 2.5 }, false},
		{"rerank idf_overlap", func(p *Policy) { p.Rerank = RerankIDFOverlap }, false},
		{"rerank unknown", func(p *Policy) { p.Rerank = "cross_encoder" }, true},
		{"rerank empty", func(p *Policy) { p.Rerank = "" }, true},
		{"rerank_blend 1", func(p *Policy) { p.RerankBlend = 1 }, false},
		{"rerank_blend above 1", func(p *Policy) { p.RerankBlend = 1.5 }, true},
		{"rerank_blend negative", func(p *Policy) { p.RerankBlend = -0.1 }, true},
		{"rerank_blend NaN", func(p *Policy) { p.RerankBlend = math.NaN() }, true},
		{"max_chunks_per_doc 1", func(p *Policy) { p.MaxChunksPerDoc = 1 }, false},
		{"max_chunks_per_doc negative", func(p *Policy) { p.MaxChunksPerDoc = -1 }, true},
		{"prf_docs 3", func(p *Policy) { p.PRFDocs = 3 }, false},
		{"prf_docs negative", func(p *Policy) { p.PRFDocs = -1 }, true},
		{"prf_terms 1", func(p *Policy) { p.PRFTerms = 1 }, false},
		{"prf_terms 0", func(p *Policy) { p.PRFTerms = 0 }, true},
		{"prf_weight 0", func(p *Policy) { p.PRFWeight = 0 }, false},
		{"prf_weight 1", func(p *Policy) { p.PRFWeight = 1 }, false},
		{"prf_weight above 1", func(p *Policy) { p.PRFWeight = 1.01 }, true},
		{"prf_weight negative", func(p *Policy) { p.PRFWeight = -0.5 }, true},
		{"prf_weight NaN", func(p *Policy) { p.PRFWeight = math.NaN() }, true},
		{"rerank model without a reranker", func(p *Policy) { p.Rerank = RerankModel }, true},
		{"rerank_min_score negative", func(p *Policy) { p.RerankMinScore = -3.5 }, false},
		{"rerank_min_score 7", func(p *Policy) { p.RerankMinScore = 7 }, false},
		{"rerank_min_score NaN", func(p *Policy) { p.RerankMinScore = math.NaN() }, true},
		{"rerank_min_score infinite", func(p *Policy) { p.RerankMinScore = math.Inf(-1) }, true},
		{"rerank_budget_ms 1", func(p *Policy) { p.RerankBudgetMS = 1 }, false},
		{"rerank_budget_ms max", func(p *Policy) { p.RerankBudgetMS = MaxRerankBudgetMS }, false},
		{"rerank_budget_ms 0", func(p *Policy) { p.RerankBudgetMS = 0 }, true},
		{"rerank_budget_ms over max", func(p *Policy) { p.RerankBudgetMS = MaxRerankBudgetMS + 1 }, true},
		{"idf rsj", func(p *Policy) { p.IDF = bm25.IDFRSJ }, false},
		{"idf empty", func(p *Policy) { p.IDF = "" }, true},
		{"idf unknown", func(p *Policy) { p.IDF = "lucene" }, true},
		{"dense_fallback lexical", func(p *Policy) { p.DenseFallback = FallbackLexical }, false},
		{"dense_fallback empty", func(p *Policy) { p.DenseFallback = "" }, true},
		{"dense_fallback unknown", func(p *Policy) { p.DenseFallback = "hash" }, true},
		{"dense off", func(p *Policy) { p.EnableDense = false }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			if tt.edit != nil {
				tt.edit(&p)
			}
			err := p.Validate()
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalidPolicy)) {
				t.Errorf("Validate(%+v) = %v, want ErrInvalidPolicy %v", p, err, tt.wantErr)
			}
		})
	}
	want := Policy{EnableRerank: true, EnableDense: true, DenseFallback: FallbackNone, MinScore: 0.2, TopN: 50, RerankDepth: 20, RRFK: 60, Limit: 5,
		RRFWeights: Weights{BM25: 1, Cosine: 1}, Rerank: RerankOverlap, PRFTerms: 10, PRFWeight: 0.5,
		RerankMinScore: 0, RerankBudgetMS: 300, IDF: bm25.IDFPlusOne}
	if got := DefaultPolicy(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultPolicy() = %+v, want %+v", got, want)
	}
}

// TestValidateRerankKind: the kind's error names what this retriever
// serves, and "model" without a reranker says how to get one.
func TestValidateRerankKind(t *testing.T) {
	tests := []struct {
		name  string
		kind  RerankKind
		model bool
		want  string // "" is valid
	}{
		{"overlap without model", RerankOverlap, false, ""},
		{"overlap with model", RerankOverlap, true, ""},
		{"model with model", RerankModel, true, ""},
		{"model without model", RerankModel, false, `invalid retrieval policy: rerank "model" needs a model reranker, and this retriever has none: start the server with --reranker-url (cordon-lab eval takes it too)`},
		{"unknown without model", "cross_encoder", false, `invalid retrieval policy: rerank "cross_encoder" must be "overlap" or "idf_overlap"`},
		{"unknown with model", "cross_encoder", true, `invalid retrieval policy: rerank "cross_encoder" must be "overlap", "idf_overlap" or "model"`},
		{"case variant with model", "MODEL", true, `invalid retrieval policy: rerank "MODEL" must be "overlap", "idf_overlap" or "model"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Rerank = tt.kind
			err := p.validate(tt.model)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		name         string
		query, chunk []string
		want         float64
	}{
		{"no query terms", nil, []string{"a"}, 0},
		{"none shared", []string{"a", "b"}, []string{"c"}, 0},
		{"all shared", []string{"a", "b"}, []string{"b", "a", "c"}, 1},
		{"one of three", []string{"a", "b", "c"}, []string{"a"}, 1.0 / 3},
		{"four of five", []string{"error", "code", "tx4096", "connection", "troubleshooting"}, []string{"error", "code", "tx4096", "connection"}, 0.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Overlap(tt.query, tt.chunk); got != tt.want {
				t.Errorf("Overlap(%q, %q) = %v, want %v", tt.query, tt.chunk, got, tt.want)
			}
		})
	}
}

func TestIDFOverlap(t *testing.T) {
	q := []string{"rare", "common", "absent"}
	idf := []float64{3, 0.5, 1.5}
	tests := []struct {
		name  string
		idf   []float64
		chunk []string
		want  float64
	}{
		{"rare term only", idf, []string{"rare", "x"}, 3 / (3 + 0.5 + 1.5)},
		{"common term only", idf, []string{"common"}, 0.5 / (3 + 0.5 + 1.5)},
		{"all", idf, []string{"absent", "common", "rare"}, 1},
		{"none", idf, []string{"x"}, 0},
		{"zero idf mass", []float64{0, 0, 0}, []string{"rare"}, 0},
		{"no idf given", nil, []string{"rare"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IDFOverlap(q, tt.idf, tt.chunk); got != tt.want {
				t.Errorf("IDFOverlap = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRerankKindsAndBlend(t *testing.T) {
	b1, b2 := 4.0, 1.0
	in := []Scored{
		{Chunk: cordontype.Chunk{ChunkID: "c1", Text: "common words here"}, BM25: &b2, Fused: 0.3},
		{Chunk: cordontype.Chunk{ChunkID: "c2", Text: "rare"}, BM25: &b1, Fused: 0.2},
		{Chunk: cordontype.Chunk{ChunkID: "c3", Text: "common rare"}, Fused: 0.1},
	}
	terms := []string{"rare", "common"}
	idf := []float64{3, 1}
	tests := []struct {
		name      string
		kind      RerankKind
		blend     float64
		bm25Max   float64
		wantIDs   []string
		wantScore []float64
	}{
		{"overlap: c3 holds both, ties keep fused order", RerankOverlap, 0, 4, []string{"c3", "c1", "c2"}, []float64{1, 0.5, 0.5}},
		{"idf_overlap: the rare term outweighs the common one", RerankIDFOverlap, 0, 4, []string{"c3", "c2", "c1"}, []float64{1, 0.75, 0.25}},
		{"blend 1: bm25 relative to the best, absent bm25 is 0", RerankOverlap, 1, 4, []string{"c2", "c1", "c3"}, []float64{1, 0.25, 0}},
		{"blend 0.5 with idf_overlap", RerankIDFOverlap, 0.5, 4, []string{"c2", "c3", "c1"},
			[]float64{float64(0.5*0.75) + float64(0.5*(4.0/4)), float64(0.5 * 1), float64(0.5*0.25) + float64(0.5*(1.0/4))}},
		{"blend with an empty lexical ranking adds nothing", RerankOverlap, 0.5, 0, []string{"c3", "c1", "c2"}, []float64{0.5, 0.25, 0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rerank(slices.Clone(in), RerankInput{Terms: terms, IDF: idf, BM25Max: tt.bm25Max, Depth: 20,
				MinScore: 0.2, Kind: tt.kind, Blend: tt.blend})
			if g := scoredIDs(got); !slices.Equal(g, tt.wantIDs) {
				t.Fatalf("order = %q, want %q", g, tt.wantIDs)
			}
			for i, s := range got {
				if *s.Rerank != tt.wantScore[i] {
					t.Errorf("%s rerank = %v, want %v", s.Chunk.ChunkID, *s.Rerank, tt.wantScore[i])
				}
			}
		})
	}
	// The floor applies to the overlap, not to the blended score.
	got := Rerank(slices.Clone(in), RerankInput{Terms: terms, IDF: idf, BM25Max: 4, Depth: 20, MinScore: 0.5, Kind: RerankIDFOverlap, Blend: 1})
	if g := scoredIDs(got); !slices.Equal(g, []string{"c2", "c3"}) {
		t.Errorf("floor on overlap: got %q, want [c2 c3]", g)
	}
}

func TestFuseWeights(t *testing.T) {
	c := func(id string) cordontype.Chunk { return cordontype.Chunk{ChunkID: id} }
	rk := Rankings{
		Lexical: []Hit{{Chunk: c("a"), Score: 3}, {Chunk: c("b"), Score: 2}},
		Dense:   []Hit{{Chunk: c("b"), Score: 0.9}, {Chunk: c("c"), Score: 0.5}},
	}
	got := Fuse(rk, 10, Weights{BM25: 2, Cosine: 0.5})
	// Contributions rounded one by one, added in ascending rank order (not
	// Go's exact constant arithmetic).
	w2, wh, k11, k12 := 2.0, 0.5, 11.0, 12.0
	want := map[string]float64{
		"a": w2 / k11,
		"b": wh/k11 + w2/k12,
		"c": wh / k12,
	}
	if ids := scoredIDs(got); !slices.Equal(ids, []string{"b", "a", "c"}) {
		t.Fatalf("order = %q, want [b a c]", ids)
	}
	for _, s := range got {
		if s.Fused != want[s.Chunk.ChunkID] {
			t.Errorf("%s fused = %v, want %v", s.Chunk.ChunkID, s.Fused, want[s.Chunk.ChunkID])
		}
	}
	// Weight 0 keeps the side's chunks with contribution 0.
	got = Fuse(rk, 10, Weights{BM25: 1, Cosine: 0})
	if ids := scoredIDs(got); !slices.Equal(ids, []string{"a", "b", "c"}) || got[2].Fused != 0 {
		t.Errorf("cosine weight 0: order %q, c fused %v; want [a b c] and 0", ids, got[2].Fused)
	}
}

func TestCollapse(t *testing.T) {
	mk := func(ids ...string) []Scored {
		out := make([]Scored, len(ids))
		for i, id := range ids {
			doc, _, _ := strings.Cut(id, "::")
			out[i] = Scored{Chunk: cordontype.Chunk{ChunkID: id, DocID: doc}}
		}
		return out
	}
	in := mk("a::0", "a::1", "b::0", "a::2", "c::0", "b::1", "b::2")
	tests := []struct {
		name string
		n    int
		want []string
	}{
		{"one per document", 1, []string{"a::0", "b::0", "c::0"}},
		{"two per document, order kept", 2, []string{"a::0", "a::1", "b::0", "c::0", "b::1"}},
		{"cap above every count", 5, []string{"a::0", "a::1", "b::0", "a::2", "c::0", "b::1", "b::2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := slices.Clone(in)
			got := scoredIDs(Collapse(in, tt.n))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Collapse(%d) = %q, want %q", tt.n, got, tt.want)
			}
			if !slices.Equal(scoredIDs(in), scoredIDs(orig)) {
				t.Errorf("Collapse changed its input")
			}
		})
	}
}

func scored(id, text string, fused float64) Scored {
	return Scored{Chunk: cordontype.Chunk{ChunkID: id, Text: text}, Fused: fused}
}

func scoredIDs(s []Scored) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Chunk.ChunkID
	}
	return out
}

func TestRerank(t *testing.T) {
	in := []Scored{
		scored("f1", "alpha", 0.05),            // 1/4
		scored("f2", "alpha beta gamma", 0.04), // 3/4
		scored("f3", "nothing here", 0.03),     // 0
		scored("f4", "beta gamma", 0.02),       // 2/4
		scored("f5", "alpha delta", 0.01),      // 2/4
		scored("f6", "alpha beta gamma delta", 0.005),
	}
	terms := []string{"alpha", "beta", "gamma", "delta"}
	tests := []struct {
		name     string
		depth    int
		minScore float64
		want     []string
		wantOv   []float64
	}{
		{"floor drops zero overlap, ties keep fused order", 20, 0.2, []string{"f6", "f2", "f4", "f5", "f1"}, []float64{1, 0.75, 0.5, 0.5, 0.25}},
		{"min_score 0 still drops zero overlap", 20, 0, []string{"f6", "f2", "f4", "f5", "f1"}, []float64{1, 0.75, 0.5, 0.5, 0.25}},
		{"floor is inclusive", 20, 0.5, []string{"f6", "f2", "f4", "f5"}, []float64{1, 0.75, 0.5, 0.5}},
		{"min_score 1", 20, 1, []string{"f6"}, []float64{1}},
		{"depth drops the rest, not appended", 3, 0.2, []string{"f2", "f1"}, []float64{0.75, 0.25}},
		{"depth 1", 1, 0.2, []string{"f1"}, []float64{0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rerank(slices.Clone(in), RerankInput{Terms: terms, Depth: tt.depth, MinScore: tt.minScore, Kind: RerankOverlap})
			if g := scoredIDs(got); !slices.Equal(g, tt.want) {
				t.Fatalf("Rerank order = %q, want %q", g, tt.want)
			}
			for i, s := range got {
				if s.Rerank == nil || *s.Rerank != tt.wantOv[i] {
					t.Errorf("%s rerank = %v, want %v", s.Chunk.ChunkID, s.Rerank, tt.wantOv[i])
				}
			}
		})
	}
	if got := Rerank(slices.Clone(in), RerankInput{Depth: 20, Kind: RerankOverlap}); len(got) != 0 {
		t.Errorf("Rerank with no query terms = %q, want empty", scoredIDs(got))
	}
}

func TestFuse(t *testing.T) {
	c := func(id string) cordontype.Chunk { return cordontype.Chunk{ChunkID: id} }
	rk := Rankings{
		Lexical: []Hit{{Chunk: c("a"), Score: 3.5}, {Chunk: c("b"), Score: 1.25}},
		Dense:   []Hit{{Chunk: c("b"), Score: 0.5}, {Chunk: c("c"), Score: 0.25}},
	}
	got := Fuse(rk, 60, DefaultWeights())
	type row struct {
		id        string
		bm25      *float64
		bm25Rank  *int
		cos       *float64
		cosRank   *int
		fusedWant float64
	}
	c61, c62 := 1.0/61, 1.0/62
	want := []row{
		{"b", ptr(1.25), ptr(2), ptr(0.5), ptr(1), c61 + c62},
		{"a", ptr(3.5), ptr(1), nil, nil, c61},
		{"c", nil, nil, ptr(0.25), ptr(2), c62},
	}
	if len(got) != len(want) {
		t.Fatalf("Fuse gave %d chunks %q, want %d", len(got), scoredIDs(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Chunk.ChunkID != w.id || g.Fused != w.fusedWant || !reflect.DeepEqual(g.BM25, w.bm25) || !reflect.DeepEqual(g.BM25Rank, w.bm25Rank) ||
			!reflect.DeepEqual(g.Cosine, w.cos) || !reflect.DeepEqual(g.CosineRank, w.cosRank) || g.Rerank != nil {
			t.Errorf("position %d: got %s fused=%v bm25=%v/%v cos=%v/%v rerank=%v, want %s fused=%v bm25=%v/%v cos=%v/%v",
				i, g.Chunk.ChunkID, g.Fused, deref(g.BM25), deref(g.BM25Rank), deref(g.Cosine), deref(g.CosineRank), g.Rerank,
				w.id, w.fusedWant, deref(w.bm25), deref(w.bm25Rank), deref(w.cos), deref(w.cosRank))
		}
	}
	if got := Fuse(Rankings{}, 60, DefaultWeights()); len(got) != 0 {
		t.Errorf("Fuse of empty rankings = %q, want empty", scoredIDs(got))
	}
}

func deref[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestServicePolicy: the service profile is valid, and differs from the
// seed profile only in the fields its documentation names.
func TestServicePolicy(t *testing.T) {
	svc := ServicePolicy()
	if err := svc.Validate(); err != nil {
		t.Fatalf("ServicePolicy() = %+v is invalid: %v", svc, err)
	}
	seed := DefaultPolicy()
	seed.RRFK, seed.RRFWeights, seed.Rerank, seed.RerankBlend, seed.MinScore, seed.MaxChunksPerDoc, seed.QTFK3, seed.IDF, seed.RerankProximity, seed.RerankDoc, seed.StemWeight, seed.FieldWeight, seed.BM25F =
		10, Weights{BM25: 2, Cosine: 1, Doc: 1}, RerankIDFOverlap, 0.9, 0.1, 1, 8, bm25.IDFRSJ, 0.25, 0.1, 0.5, 4, true
	if !reflect.DeepEqual(svc, seed) {
		t.Errorf("ServicePolicy() = %+v, want the seed with the documented changes %+v", svc, seed)
	}
}
