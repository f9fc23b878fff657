package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// TestCacheDropsTextsToFit: a tenant whose texts are a third of its memory,
// under a budget between what its index takes with texts and without, is
// held without them and answered from memory as the reference answers;
// under a budget with room for its texts it keeps them.
func TestCacheDropsTextsToFit(t *testing.T) {
	f := newCacheFixture(t)
	// Words of random letters in random order: an index keeps its texts
	// packed (memindex.PackText), and a text that repeats itself packs to
	// little.
	r := rand.New(rand.NewPCG(5, 6))
	words := make([]string, 100)
	for i := range words {
		b := make([]byte, 6+r.IntN(4))
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		words[i] = string(b)
	}
	for i := range 60 {
		var long strings.Builder
		for range 400 {
			long.WriteString(words[r.IntN(len(words))] + " ")
		}
		f.put(cordontype.Document{Tenant: "fit", DocID: fmt.Sprintf("d%02d", i), Text: fmt.Sprintf("wire hold %d settlement narrative for the desk %s", i, long.String()),
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
	if (with.Bytes-without.Bytes)*3 < with.Bytes {
		t.Fatalf("%d bytes with texts, %d without: the texts should be a third of the index or more", with.Bytes, without.Bytes)
	}
	s, st := held("a budget between the two", Options{CacheBytes: (with.Bytes + without.Bytes) / 2})
	if st.Bytes != without.Bytes || st.LoadsDeclined != 0 {
		t.Fatalf("%+v: want the tenant held without texts (%d bytes)", st, without.Bytes)
	}
	for _, text := range []string{"settlement narrative", "hold 12", "desk"} {
		f.check("without texts: "+text, s, cacheQuery("fit", text))
	}
}

// TestNoTextsStandbyBehindCache: a standby behind the cached index (here a
// second database holding the same writes but the last, so the same row
// ids but the last document's) lacks rows the index ranked; the texts are
// read from the primary, and the query is still answered from memory at
// the index's version, as the primary answers.
func TestNoTextsStandbyBehindCache(t *testing.T) {
	f := newCacheFixture(t)
	// A subtest, for a database of its own name.
	t.Run("standby", func(t *testing.T) { standbyBehindCache(t, f) })
}

func standbyBehindCache(t *testing.T, f *cacheFixture) {
	ctx := context.Background()
	standbyURL := testDatabase(t)
	stand, err := Open(ctx, standbyURL, Options{AutoCreate: f.write.opts.AutoCreate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stand.Close)
	docs := []cordontype.Document{}
	for i := range 20 {
		docs = append(docs, cordontype.Document{Tenant: "lag", DocID: fmt.Sprintf("d%02d", i),
			Text: fmt.Sprintf("wire hold number %d for the desk", i), Classification: cordontype.Public})
	}
	for _, d := range docs {
		f.put(d)
		if _, err := stand.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// The last write reaches the primary only.
	f.put(cordontype.Document{Tenant: "lag", DocID: "late", Text: "late wire hold release for the desk", Classification: cordontype.Public})
	tok, err := f.write.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader := f.open(Options{CacheBytes: 1 << 30, cacheNoTexts: true, Replicas: []string{standbyURL}})
	q := cacheQuery("lag", "late wire hold release")
	// With the token, the primary answers and the cache loads its version.
	if _, _, err := retrieval.New(reader).RetrieveVersion(WithConsistency(ctx, tok), q); err != nil {
		t.Fatal(err)
	}
	waitLoads(t, reader)
	if _, _, err := retrieval.New(reader).RetrieveVersion(WithConsistency(ctx, tok), q); err != nil {
		t.Fatal(err)
	}
	_, wantVersion, err := retrieval.New(f.sql).RetrieveVersion(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	// Without it, the standby is asked: the cache is ahead of it.
	served, answers := reader.ReadStats().Replicas[0].Served, reader.CacheStats().MemoryAnswers
	ref, err := retrieval.New(f.ref).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := string(wantJSON)
	res, v, err := retrieval.New(reader).RetrieveVersion(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if reader.ReadStats().Replicas[0].Served == served {
		t.Fatal("the standby was not asked")
	}
	if got := reader.CacheStats().MemoryAnswers - answers; got != 1 || v != wantVersion {
		t.Fatalf("%d answers from memory at version %d; want 1, at the primary's version %d", got, v, wantVersion)
	}
	got, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want || !strings.Contains(want, `"late::0"`) {
		t.Fatalf("behind a standby: the cached store answered\n  %s\nwant (reference, with late::0)\n  %s", got, want)
	}
}
