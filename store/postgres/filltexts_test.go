package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/retrieval"
)

// TestCachedIndexKeepsNoTexts: a cached tenant's index that keeps no texts
// (as one that would not fit the budget with them) ranks without texts, each hit naming its chunk row (Hit.Ref), and the store reads the
// hits' texts after the ranking: the answers are the reference's, byte for
// byte, from memory. A row changed behind the index's back (a
// classification raised without the tenant's version moving, which no
// writer of Cordon does) fails the fill's second look at the pre-filter,
// and the query is answered by the SQL path instead: the chunk is not
// served.
func TestCachedIndexKeepsNoTexts(t *testing.T) {
	f := newCacheFixture(t)
	fillTenant(f, "texts", 40)
	s := f.open(Options{CacheBytes: 1 << 30, cacheNoTexts: true})
	ctx := context.Background()
	queries := []string{"wire hold number 7", "release notes payment review", "texts number 12"}
	for _, q := range queries {
		f.check("load: "+q, s, cacheQuery("texts", q))
	}
	waitLoads(t, s)
	before := s.CacheStats().MemoryAnswers
	for _, q := range queries {
		f.check("from memory: "+q, s, cacheQuery("texts", q))
	}
	if got := s.CacheStats().MemoryAnswers - before; got != int64(len(queries)) {
		t.Fatalf("%d of %d queries answered from memory", got, len(queries))
	}

	// What the index itself answers: no texts, and row ids.
	req := cacheQuery("texts", queries[0])
	rreq := req.RankRequest()
	var rk retrieval.Rankings
	sqlRan := false
	if _, err := s.read(ctx, "texts", func(x *memindex.Index) { rk, _ = x.Rank(rreq) }, nil,
		func(pgx.Tx, tenantInfo, statsRow) error { sqlRan = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if sqlRan || len(rk.Lexical) == 0 {
		t.Fatalf("the cached index did not answer (SQL ran: %t, %d lexical hits)", sqlRan, len(rk.Lexical))
	}
	for _, h := range append(rk.Lexical, rk.Dense...) {
		if h.Chunk.Text != "" || h.Ref <= 0 {
			t.Fatalf("hit %s: text %q, row %d: want no text and a row id", h.Chunk.ChunkID, h.Chunk.Text, h.Ref)
		}
	}

	// A writer replaces the top hit's document after the index ranked a
	// query and before its texts are read: its rows are gone, and the
	// query is answered again in a snapshot, which sees the new version.
	top := rk.Lexical[0]
	var replaced int
	h := f.open(Options{CacheBytes: 1 << 30, cacheNoTexts: true, fillHook: func(string) {
		if replaced++; replaced == 1 {
			f.put(cordontype.Document{Tenant: "texts", DocID: top.Chunk.DocID, Text: "wire hold number 7 moved to the restricted desk",
				Classification: cordontype.Restricted})
		}
	}})
	f.check("loading the hooked store", h, req)
	waitLoads(t, h)
	answer := func(st retrieval.Store) string {
		t.Helper()
		r, err := retrieval.New(st).Retrieve(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Chunks {
			if c.Chunk.DocID == top.Chunk.DocID {
				t.Fatalf("%s, now restricted, was served to an internal principal", c.Chunk.ChunkID)
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	replaced = 0
	got := answer(h)
	if replaced == 0 {
		t.Fatal("the hook never ran: the cached index did not answer")
	}
	if want := answer(f.ref); got != want {
		t.Fatalf("a document replaced between ranking and texts: the cached store answered\n  %s\nwant (reference)\n  %s", got, want)
	}
	if want := answer(f.sql); got != want {
		t.Fatalf("a document replaced between ranking and texts: the cached store answered\n  %s\nwant (the SQL path)\n  %s", got, want)
	}
}

// TestCacheDropsTextsToFit: a tenant whose texts are most of its memory,
// under a budget between what its index takes with texts and without, is
// held without them and answered from memory as the reference answers;
// under a budget with room for its texts it keeps them.
func TestCacheDropsTextsToFit(t *testing.T) {
	f := newCacheFixture(t)
	long := strings.Repeat("settlement narrative for the desk ", 40)
	for i := range 60 {
		f.put(cordontype.Document{Tenant: "fit", DocID: fmt.Sprintf("d%02d", i), Text: fmt.Sprintf("wire hold %d %s", i, long),
			Classification: cordontype.Classification(i % 3)})
	}
	q := cacheQuery("fit", "wire hold 7 settlement")
	held := func(name string, opts Options) (*Store, CacheStats) {
		t.Helper()
		s := f.open(opts)
		f.check(name+", loading", s, q)
		waitLoads(t, s)
		before := s.CacheStats().MemoryAnswers
		f.check(name, s, q)
		st := s.CacheStats()
		if st.MemoryAnswers != before+1 || st.Loads != 1 {
			t.Fatalf("%s: %+v: want one load and the query answered from memory", name, st)
		}
		return s, st
	}
	_, with := held("with texts", Options{CacheBytes: 1 << 30})
	_, without := held("without texts", Options{CacheBytes: 1 << 30, cacheNoTexts: true})
	if without.Bytes*2 > with.Bytes {
		t.Fatalf("%d bytes with texts, %d without: the texts should be most of the index", with.Bytes, without.Bytes)
	}
	s, st := held("a budget between the two", Options{CacheBytes: (with.Bytes + without.Bytes) / 2})
	if st.Bytes != without.Bytes || st.LoadsDeclined != 0 {
		t.Fatalf("%+v: want the tenant held without texts (%d bytes)", st, without.Bytes)
	}
	for _, text := range []string{"settlement narrative", "hold 12", "desk"} {
		f.check("without texts: "+text, s, cacheQuery("fit", text))
	}
}
