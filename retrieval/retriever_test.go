package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

func ptr[T any](v T) *T { return &v }

func newStore(t *testing.T, docs ...cordontype.Document) *memory.Store {
	t.Helper()
	return newStoreWith(t, index.DefaultSettings(), docs...)
}

func newStoreWith(t *testing.T, settings index.Settings, docs ...cordontype.Document) *memory.Store {
	t.Helper()
	st, err := memory.New(settings)
	if err != nil {
		t.Fatalf("memory.New: %v", err)
	}
	for _, d := range docs {
		if _, err := st.Put(context.Background(), d); err != nil {
			t.Fatalf("Put(%s/%s): %v", d.Tenant, d.DocID, err)
		}
	}
	return st
}

// newMemindex is the in-memory index store (the Postgres store's query
// path) holding docs, under the default settings.
func newMemindex(t *testing.T, docs ...cordontype.Document) *memindextest.Store {
	t.Helper()
	st, err := memindextest.NewStore(index.DefaultSettings())
	if err != nil {
		t.Fatalf("memindextest.NewStore: %v", err)
	}
	for _, d := range docs {
		if _, err := st.Put(context.Background(), d); err != nil {
			t.Fatalf("Put(%s/%s): %v", d.Tenant, d.DocID, err)
		}
	}
	return st
}

func retrieve(t *testing.T, st retrieval.Store, q retrieval.Query) retrieval.Result {
	t.Helper()
	res, err := retrieval.New(st).Retrieve(context.Background(), q)
	if err != nil {
		t.Fatalf("Retrieve(%q): %v", q.Text, err)
	}
	return res
}

func resultIDs(r retrieval.Result) []string {
	out := make([]string, len(r.Chunks))
	for i, s := range r.Chunks {
		out[i] = s.Chunk.ChunkID
	}
	return out
}

func doc(tenant, id string, class cordontype.Classification, asOf int64, text string, barriers ...string) cordontype.Document {
	return cordontype.Document{Tenant: tenant, DocID: id, Text: text, Classification: class, AsOfTick: asOf, Barriers: barriers}
}

// corpus is one tenant's documents: a payment hold at every classification,
// one behind a barrier and one stale.
func corpus(tenant string) []cordontype.Document {
	return []cordontype.Document{
		doc(tenant, "pay-001", cordontype.Confidential, 100, "Payment PMT-771 is on hold pending sanctions review. Release requires two approvals."),
		doc(tenant, "pay-002", cordontype.Restricted, 100, "PMT-771 hold escalated to the restricted investigations desk for review."),
		doc(tenant, "pay-003", cordontype.Internal, 100, "Deal X payment hold instructions for PMT-771 and its release.", "deal-x"),
		doc(tenant, "pay-004", cordontype.Public, 10, "Old hold procedure for payments, superseded."),
		doc(tenant, "pay-005", cordontype.Public, 100, "Cut-off times for outgoing wires and payment batches."),
	}
}

func principal(tenant string, c cordontype.Classification, barriers ...string) cordontype.Principal {
	return cordontype.Principal{Tenant: tenant, Clearance: c, Barriers: barriers}
}

func query(p cordontype.Principal, text string, edit func(*retrieval.Policy)) retrieval.Query {
	pol := retrieval.DefaultPolicy()
	if edit != nil {
		edit(&pol)
	}
	return retrieval.Query{Principal: p, Text: text, NowTick: 120, Policy: pol}
}

// allSeeing ranks with every entitlement and no freshness contract: the
// unfiltered rankings of the tenant.
func allSeeing(t *testing.T, st *memory.Store, tenant, text string) retrieval.Rankings {
	t.Helper()
	q := query(principal(tenant, cordontype.Restricted, "deal-x"), text, nil)
	rk, err := st.Rank(context.Background(), retrieval.RankRequest{
		Principal: q.Principal, Tokens: tokens(text), Terms: terms(text), NowTick: 120, TopN: 1 << 30,
	})
	if err != nil {
		t.Fatalf("Rank: %v", err)
	}
	return rk
}

// TestTenantIsolation is invariant 1: another tenant's chunk is never a
// result and never counted; tenant A's results and counters are the same with
// and without tenant B's documents (same doc ids and texts, plus more).
func TestTenantIsolation(t *testing.T) {
	a := corpus("wholesale")
	b := append(corpus("retail"),
		doc("retail", "extra-1", cordontype.Restricted, 0, "PMT-771 hold hold hold payment release sanctions"),
		doc("retail", "extra-2", cordontype.Public, 0, "payment hold review release approvals payment hold"),
		doc("retail", "extra-3", cordontype.Public, 0, "hold"),
	)
	alone := newStore(t, a...)
	shared := newStore(t, append(slices.Clone(b[:3]), append(a, b[3:]...)...)...)
	tests := []struct {
		name string
		q    retrieval.Query
	}{
		{"confidential", query(principal("wholesale", cordontype.Confidential), "PMT-771 hold release", nil)},
		{"public", query(principal("wholesale", cordontype.Public), "payment hold", nil)},
		{"restricted with barrier", query(principal("wholesale", cordontype.Restricted, "deal-x"), "PMT-771 hold", nil)},
		{"freshness", query(principal("wholesale", cordontype.Restricted), "hold procedure", func(p *retrieval.Policy) { p.MaxStaleTicks = ptr[int64](50) })},
		{"rerank off", query(principal("wholesale", cordontype.Internal), "sanctions review", func(p *retrieval.Policy) { p.EnableRerank = false })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := retrieve(t, alone, tt.q)
			got := retrieve(t, shared, tt.q)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("with the other tenant's documents: got %+v, want %+v", got, want)
			}
			for _, s := range got.Chunks {
				if s.Chunk.Tenant != "wholesale" {
					t.Errorf("result %s has tenant %q, want wholesale", s.Chunk.ChunkID, s.Chunk.Tenant)
				}
			}
			if len(want.Chunks) == 0 && want.Considered == 0 {
				t.Errorf("query found nothing at all; the test would not notice a leak")
			}
		})
	}
	// And the other side: the retail principal sees retail chunks only.
	res := retrieve(t, shared, query(principal("retail", cordontype.Restricted), "PMT-771 hold", nil))
	if len(res.Chunks) == 0 {
		t.Fatalf("retail principal got no results, want retail chunks")
	}
	for _, s := range res.Chunks {
		if s.Chunk.Tenant != "retail" {
			t.Errorf("retail result %s has tenant %q, want retail", s.Chunk.ChunkID, s.Chunk.Tenant)
		}
	}
	// A tenant with no documents: nothing considered, nothing counted.
	empty := retrieve(t, shared, query(principal("nobody", cordontype.Restricted), "PMT-771 hold", nil))
	if len(empty.Chunks) != 0 || empty.Considered != 0 || empty.ExcludedByEntitlement != 0 || empty.ExcludedByFreshness != 0 {
		t.Errorf("empty tenant: got %+v, want nothing and zero counters", empty)
	}
}

// countHidden counts, ranking by ranking, the chunks p may not see.
func countHidden(rk retrieval.Rankings, p cordontype.Principal) int {
	n := 0
	for _, side := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		for i := range side {
			if !retrieval.Visible(p, &side[i].Chunk) {
				n++
			}
		}
	}
	return n
}

// TestEntitlementExclusion is invariant 3: a clearance too low hides chunks,
// and the exclusion is counted once per ranking the chunk was in.
func TestEntitlementExclusion(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	const text = "PMT-771 hold"
	all := allSeeing(t, st, "wholesale", text)
	tests := []struct {
		name string
		p    cordontype.Principal
	}{
		{"public", principal("wholesale", cordontype.Public)},
		{"internal", principal("wholesale", cordontype.Internal)},
		{"confidential without barrier", principal("wholesale", cordontype.Confidential)},
		{"restricted without barrier", principal("wholesale", cordontype.Restricted)},
		{"internal with barrier", principal("wholesale", cordontype.Internal, "deal-x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := retrieve(t, st, query(tt.p, text, nil))
			want := countHidden(all, tt.p)
			if want == 0 {
				t.Fatalf("no hidden chunk for %+v; the case tests nothing", tt.p)
			}
			if res.ExcludedByEntitlement != want {
				t.Errorf("excluded_by_entitlement = %d, want %d", res.ExcludedByEntitlement, want)
			}
			if wantC := len(all.Lexical) + len(all.Dense); res.Considered != wantC {
				t.Errorf("considered = %d, want %d (counted before any filter)", res.Considered, wantC)
			}
			p := tt.p
			p.Barriers = slices.Clone(p.Barriers)
			slices.Sort(p.Barriers)
			for _, s := range res.Chunks {
				if !retrieval.Visible(p, &s.Chunk) {
					t.Errorf("result %s is not visible to %+v", s.Chunk.ChunkID, tt.p)
				}
			}
		})
	}
}

// TestExclusionCountedOncePerRanking: one hidden chunk found by both
// retrievers counts twice, once per ranking, and is considered twice. (Under
// the entitled scope this principal's statistics hold no chunk, so its
// lexical ranking is empty and the chunk is counted once, by the dense side.)
func TestExclusionCountedOncePerRanking(t *testing.T) {
	settings := index.DefaultSettings()
	settings.Statistics = bm25.ScopeTenant
	st := newStoreWith(t, settings, doc("wholesale", "secret", cordontype.Restricted, 0, "merger code name bluebird"))
	all := allSeeing(t, st, "wholesale", "bluebird")
	if len(all.Lexical) != 1 || len(all.Dense) != 1 {
		t.Fatalf("unfiltered rankings have %d and %d hits, want 1 and 1", len(all.Lexical), len(all.Dense))
	}
	res := retrieve(t, st, query(principal("wholesale", cordontype.Confidential), "bluebird", nil))
	if len(res.Chunks) != 0 || res.ExcludedByEntitlement != 2 || res.Considered != 2 || res.ExcludedByFreshness != 0 {
		t.Errorf("got %d results, considered %d, excluded_by_entitlement %d, excluded_by_freshness %d; want 0, 2, 2, 0",
			len(res.Chunks), res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness)
	}
	ent := retrieve(t, newStore(t, doc("wholesale", "secret", cordontype.Restricted, 0, "merger code name bluebird")),
		query(principal("wholesale", cordontype.Confidential), "bluebird", nil))
	if len(ent.Chunks) != 0 || ent.ExcludedByEntitlement != 1 || ent.Considered != 1 {
		t.Errorf("entitled scope: got %d results, considered %d, excluded_by_entitlement %d; want 0, 1, 1",
			len(ent.Chunks), ent.Considered, ent.ExcludedByEntitlement)
	}
}

func TestFreshness(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	const text = "hold procedure payments"
	p := principal("wholesale", cordontype.Public)
	tests := []struct {
		name      string
		maxStale  *int64
		wantFresh int
		wantOld   bool
	}{
		{"no contract keeps the old document", nil, 0, true},
		{"stale by 110 ticks with 50 allowed", ptr[int64](50), 2, false},
		{"exactly at the limit is kept", ptr[int64](110), 0, true},
		{"one tick over the limit", ptr[int64](109), 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := retrieve(t, st, query(p, text, func(pol *retrieval.Policy) { pol.MaxStaleTicks = tt.maxStale }))
			if res.ExcludedByFreshness != tt.wantFresh {
				t.Errorf("excluded_by_freshness = %d, want %d", res.ExcludedByFreshness, tt.wantFresh)
			}
			if got := slices.Contains(resultIDs(res), "pay-004::0"); got != tt.wantOld {
				t.Errorf("pay-004::0 in results = %v, want %v (results %q)", got, tt.wantOld, resultIDs(res))
			}
		})
	}
	// A hidden stale chunk is counted as hidden only: with clearance public,
	// the stale restricted chunk must not add to excluded_by_freshness.
	st2 := newStore(t, doc("wholesale", "old-secret", cordontype.Restricted, 0, "bluebird"), doc("wholesale", "old-public", cordontype.Public, 0, "bluebird"))
	res := retrieve(t, st2, query(p, "bluebird", func(pol *retrieval.Policy) { pol.MaxStaleTicks = ptr[int64](10) }))
	if res.ExcludedByEntitlement != 2 || res.ExcludedByFreshness != 2 || len(res.Chunks) != 0 {
		t.Errorf("entitlement, freshness, results = %d, %d, %d, want 2, 2, 0", res.ExcludedByEntitlement, res.ExcludedByFreshness, len(res.Chunks))
	}
}

// TestHiddenChunkShiftsNoRank: pre-filtering happens before truncation and
// fusion, so a hidden chunk that outranks everything changes no visible
// chunk's rank or fused score, and takes no top_n slot.
func TestHiddenChunkShiftsNoRank(t *testing.T) {
	visible := []cordontype.Document{
		doc("w", "v1", cordontype.Public, 0, "bluebird merger timeline and bluebird approvals"),
		doc("w", "v2", cordontype.Public, 0, "bluebird notes"),
		doc("w", "v3", cordontype.Public, 0, "unrelated cafeteria menu"),
	}
	hidden := doc("w", "h", cordontype.Restricted, 0, "bluebird bluebird bluebird")
	with := newStore(t, append(slices.Clone(visible), hidden)...)
	without := newStore(t, visible...)
	q := query(principal("w", cordontype.Public), "bluebird", func(p *retrieval.Policy) { p.TopN = 2; p.EnableRerank = false })
	got, want := retrieve(t, with, q), retrieve(t, without, q)
	if got.ExcludedByEntitlement == 0 {
		t.Fatalf("the hidden chunk was not excluded; the test tests nothing")
	}
	if !slices.Equal(resultIDs(got), resultIDs(want)) {
		t.Fatalf("results with a hidden chunk = %q, want %q", resultIDs(got), resultIDs(want))
	}
	for i := range got.Chunks {
		g, w := got.Chunks[i], want.Chunks[i]
		if !reflect.DeepEqual(g.BM25Rank, w.BM25Rank) || !reflect.DeepEqual(g.CosineRank, w.CosineRank) || g.Fused != w.Fused {
			t.Errorf("%s: ranks %v/%v fused %v, want %v/%v fused %v", g.Chunk.ChunkID,
				g.BM25Rank, g.CosineRank, g.Fused, w.BM25Rank, w.CosineRank, w.Fused)
		}
	}
}

// TestNothingMatched is invariant 9: a query that matches nothing returns an
// empty list, never the least irrelevant chunks.
func TestNothingMatched(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	tests := []struct {
		name string
		text string
	}{
		{"unknown words", "zebra quantum marmalade"},
		{"empty query", ""},
		{"punctuation only", "?!? --"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := retrieve(t, st, query(principal("wholesale", cordontype.Restricted, "deal-x"), tt.text, nil))
			if len(res.Chunks) != 0 {
				t.Errorf("got %q, want no results", resultIDs(res))
			}
			if res.Degraded == nil || len(res.Degraded) != 0 {
				t.Errorf("degraded = %#v, want an empty non-nil list", res.Degraded)
			}
		})
	}
}

// collidingWord finds a word, absent from the corpus, that hashes to the same
// bucket and sign as target: a query of it has cosine > 0 with target's chunk
// but shares no token with it.
func collidingWord(t *testing.T, target string) string {
	t.Helper()
	ti, ts := hashembed.Bucket(target, hashembed.DefaultDims)
	for i := range 100000 {
		w := fmt.Sprintf("zq%d", i)
		if j, s := hashembed.Bucket(w, hashembed.DefaultDims); j == ti && s == ts {
			return w
		}
	}
	t.Fatalf("no colliding word for %q", target)
	return ""
}

// TestRerankFloor: a dense hit that shares only a hash bucket with the query is
// removed by the floor; with rerank shed it can appear and degraded says so.
func TestRerankFloor(t *testing.T) {
	st := newStore(t, doc("w", "d", cordontype.Public, 0, "bluebird"))
	w := collidingWord(t, "bluebird")
	p := principal("w", cordontype.Public)
	on := retrieve(t, st, query(p, w, nil))
	if len(on.Chunks) != 0 || on.Considered != 1 {
		t.Errorf("rerank on: got %q considered %d, want no results, considered 1", resultIDs(on), on.Considered)
	}
	off := retrieve(t, st, query(p, w, func(pol *retrieval.Policy) { pol.EnableRerank = false }))
	if !slices.Equal(resultIDs(off), []string{"d::0"}) || !slices.Equal(off.Degraded, []string{"rerank"}) {
		t.Fatalf("rerank off: got %q degraded %q, want [d::0] and [rerank]", resultIDs(off), off.Degraded)
	}
	s := off.Chunks[0]
	if s.BM25 != nil || s.BM25Rank != nil || s.Cosine == nil || *s.Cosine != 1 || s.CosineRank == nil || *s.CosineRank != 1 || s.Rerank != nil {
		t.Errorf("rerank off: got bm25 %v rank %v cosine %v rank %v rerank %v, want nil nil 1 1 nil", s.BM25, s.BM25Rank, s.Cosine, s.CosineRank, s.Rerank)
	}
	// min_score: a chunk with 1 of 4 query terms is kept at 0.25, dropped at 0.3.
	st2 := newStore(t, doc("w", "one", cordontype.Public, 0, "alpha"), doc("w", "two", cordontype.Public, 0, "alpha beta"))
	for _, tc := range []struct {
		min  float64
		want []string
	}{{0.25, []string{"two::0", "one::0"}}, {0.3, []string{"two::0"}}, {0.5, []string{"two::0"}}, {0.51, nil}} {
		res := retrieve(t, st2, query(p, "alpha beta gamma delta", func(pol *retrieval.Policy) { pol.MinScore = tc.min }))
		if !slices.Equal(resultIDs(res), tc.want) {
			t.Errorf("min_score %v: got %q, want %q", tc.min, resultIDs(res), tc.want)
		}
	}
}

func TestRerankSwitch(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	p := principal("wholesale", cordontype.Restricted, "deal-x")
	tests := []struct {
		name         string
		enable       bool
		wantDegraded []string
	}{
		{"enabled", true, []string{}},
		{"disabled", false, []string{"rerank"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := retrieve(t, st, query(p, "PMT-771 hold release", func(pol *retrieval.Policy) { pol.EnableRerank = tt.enable }))
			if res.Degraded == nil || !slices.Equal(res.Degraded, tt.wantDegraded) {
				t.Errorf("degraded = %#v, want %#v", res.Degraded, tt.wantDegraded)
			}
			if len(res.Chunks) == 0 {
				t.Fatalf("no results")
			}
			for _, s := range res.Chunks {
				if (s.Rerank != nil) != tt.enable {
					t.Errorf("%s rerank = %v, want present %v", s.Chunk.ChunkID, s.Rerank, tt.enable)
				}
			}
			if !tt.enable {
				for i := 1; i < len(res.Chunks); i++ {
					if res.Chunks[i-1].Fused < res.Chunks[i].Fused {
						t.Errorf("rerank off: fused order broken at %d: %v < %v", i, res.Chunks[i-1].Fused, res.Chunks[i].Fused)
					}
				}
			}
		})
	}
}

func TestRerankDepthAndLimit(t *testing.T) {
	var docs []cordontype.Document
	for i := range 8 {
		docs = append(docs, doc("w", fmt.Sprintf("d%d", i), cordontype.Public, 0, fmt.Sprintf("bluebird report %d %s", i, "filler words")))
	}
	st := newStore(t, docs...)
	p := principal("w", cordontype.Public)
	tests := []struct {
		name        string
		depth, lim  int
		enable      bool
		wantResults int
	}{
		{"depth 2 drops the rest even with limit 5", 2, 5, true, 2},
		{"depth 20, limit 5", 20, 5, true, 5},
		{"limit 1", 20, 1, true, 1},
		{"depth ignored when rerank is off", 2, 5, false, 5},
		{"everything", 20, 100, true, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := retrieve(t, st, query(p, "bluebird", func(pol *retrieval.Policy) {
				pol.RerankDepth, pol.Limit, pol.EnableRerank = tt.depth, tt.lim, tt.enable
			}))
			if len(res.Chunks) != tt.wantResults {
				t.Errorf("got %d results %q, want %d", len(res.Chunks), resultIDs(res), tt.wantResults)
			}
		})
	}
}

// TestIDFNonNegativeEndToEnd: a term present in every chunk still ranks every
// chunk with a positive BM25 score.
func TestIDFNonNegativeEndToEnd(t *testing.T) {
	var docs []cordontype.Document
	for i := range 5 {
		docs = append(docs, doc("w", fmt.Sprintf("d%d", i), cordontype.Public, 0, fmt.Sprintf("payment %d", i)))
	}
	st := newStore(t, docs...)
	rk := allSeeing(t, st, "w", "payment")
	if len(rk.Lexical) != 5 {
		t.Fatalf("lexical ranking has %d chunks, want all 5", len(rk.Lexical))
	}
	for _, h := range rk.Lexical {
		if !(h.Score > 0) {
			t.Errorf("%s BM25 = %v, want > 0", h.Chunk.ChunkID, h.Score)
		}
	}
}

// TestRetrieveDeterministic is invariant 12: the same query many times, and
// on a store filled in another order, gives identical results.
func TestRetrieveDeterministic(t *testing.T) {
	docs := corpus("wholesale")
	for i := range 30 {
		docs = append(docs, doc("wholesale", fmt.Sprintf("n%02d", i), cordontype.Public, 100, fmt.Sprintf("hold note %d for payment batch %d", i%4, i%3)))
	}
	fwd := newStore(t, docs...)
	rev := slices.Clone(docs)
	slices.Reverse(rev)
	bwd := newStore(t, rev...)
	q := query(principal("wholesale", cordontype.Restricted, "deal-x"), "payment hold note", func(p *retrieval.Policy) { p.Limit = 50 })
	first := retrieve(t, fwd, q)
	if len(first.Chunks) < 10 {
		t.Fatalf("only %d results; want many ties to order", len(first.Chunks))
	}
	for i := range 50 {
		if got := retrieve(t, fwd, q); !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d differs: got %q, want %q", i, resultIDs(got), resultIDs(first))
		}
	}
	if got := retrieve(t, bwd, q); !reflect.DeepEqual(got, first) {
		t.Errorf("store filled in reverse order: got %q, want %q", resultIDs(got), resultIDs(first))
	}
}

func TestRetrieveInvalid(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	good := query(principal("wholesale", cordontype.Public), "hold", nil)
	tests := []struct {
		name    string
		edit    func(q *retrieval.Query)
		wantErr error
	}{
		{"bad tenant", func(q *retrieval.Query) { q.Principal.Tenant = "Wholesale" }, cordontype.ErrInvalid},
		{"bad clearance", func(q *retrieval.Query) { q.Principal.Clearance = 4 }, cordontype.ErrInvalid},
		{"bad barrier", func(q *retrieval.Query) { q.Principal.Barriers = []string{"has space"} }, cordontype.ErrInvalid},
		{"negative now", func(q *retrieval.Query) { q.NowTick = -1 }, cordontype.ErrInvalid},
		{"now over 2^62", func(q *retrieval.Query) { q.NowTick = 1<<62 + 1 }, cordontype.ErrInvalid},
		{"limit 0", func(q *retrieval.Query) { q.Policy.Limit = 0 }, retrieval.ErrInvalidPolicy},
		{"min_score 2", func(q *retrieval.Query) { q.Policy.MinScore = 2 }, retrieval.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := good
			q.Principal.Barriers = slices.Clone(good.Principal.Barriers)
			tt.edit(&q)
			_, err := retrieval.New(st).Retrieve(context.Background(), q)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Retrieve error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := retrieval.New(st).Retrieve(context.Background(), query(principal("wholesale", cordontype.Public), "hold", func(p *retrieval.Policy) { p.MaxStaleTicks = ptr[int64](1 << 62) })); err != nil {
		t.Errorf("max_stale_ticks 2^62: got %v, want no error", err)
	}
}

func tokens(s string) []string { return analysis.Tokenize(s) }

func terms(s string) []string { return analysis.TokenSet(s) }
