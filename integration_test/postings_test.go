package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// TestPostingsGarbageCollected: removed chunks leave their postings in
// blocks until the dead ones outweigh a quarter of the live tokens; then a
// writer rewrites the blocks without them. Before and after, retrievals
// equal the reference's, and blocks stay few per term.
func TestPostingsGarbageCollected(t *testing.T) {
	dbURL := migrated(t)
	m := newMirror(t, dbURL, cordontype.Principal{Tenant: "gc", Clearance: cordontype.Confidential})
	words := []string{"wire", "hold", "release", "ledger", "swap", "margin", "tx4096", "desk", "limit", "breach", "audit", "nostro"}
	doc := func(i, round int) cordontype.Document {
		var text strings.Builder
		for j := range 90 {
			text.WriteString(words[(i*7+j*j+round)%len(words)] + fmt.Sprint((i+j)%13) + " ")
		}
		return cordontype.Document{Tenant: "gc", DocID: fmt.Sprintf("d%d", i), Text: text.String(), Classification: cordontype.Classification(i % 3)}
	}
	apply := m.put
	check := func(step string) {
		t.Helper()
		m.check(step, "wire3 hold", "tx40966 ledger breach", "desk1 limit2 margin swap", "nostro")
	}
	dead := func() int64 { return queryInt(t, dbURL, `SELECT dead_postings FROM cordon_t_gc.stats`) }
	stored := func() int64 {
		return queryInt(t, dbURL, `SELECT coalesce(sum(n), 0)::bigint FROM cordon_t_gc.postings`)
	}
	live := func() int64 { return livePostings(t, dbURL, "cordon_t_gc") }
	for i := range 80 {
		apply(doc(i, 0))
	}
	check("written")
	// 80 writes, one segment each, merged size-tiered after each write: at
	// most 7 segments per size class remain.
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_gc.segments WHERE cols IS NULL`); n > 7*3 {
		t.Fatalf("%d segments after 80 writes: merges did not run", n)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_gc.postings p WHERE NOT EXISTS (SELECT 1 FROM cordon_t_gc.segments s WHERE s.block = p.block)`); n != 0 {
		t.Fatalf("%d postings rows outside any segment", n)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_gc.segments s WHERE postings <> (SELECT sum(n) FROM cordon_t_gc.postings p WHERE p.block = s.block)`); n != 0 {
		t.Fatalf("%d segments miscounted", n)
	}
	// Replace a few: their old postings stay, counted as dead.
	for i := range 10 {
		apply(doc(i, 1))
	}
	if d := dead(); d == 0 || stored() <= live() {
		t.Fatalf("after replacements: dead_postings %d, %d stored, %d live: want garbage", d, stored(), live())
	}
	check("replaced")
	// Delete most: the dead outweigh the live and the next write collects.
	for i := 10; i < 75; i++ {
		m.del(fmt.Sprintf("d%d", i))
	}
	// 75 documents of 90 tokens were removed or replaced: 6,750 dead tokens,
	// past the 4,096 threshold and a quarter of the live ones, so a writer
	// collected on the way; what is left is bounded by the counter.
	if d, s, l := dead(), stored(), live(); d >= 75*90 || s-l > d {
		t.Fatalf("after deleting most documents: dead_postings %d, %d postings stored, %d live: want a collection, and garbage <= the counter", d, s, l)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM `+unpacked("cordon_t_gc")+` p WHERE n = 0 OR cardinality(chunks) <> n OR cardinality(tfs) <> n`); n != 0 {
		t.Fatalf("%d blocks empty or miscounted after collection", n)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_gc.postings WHERE data IS NULL`); n != 0 {
		t.Fatalf("%d rows still in arrays after collection", n)
	}
	check("collected")
	if n := queryInt(t, dbURL, `SELECT coalesce(max(c), 0)::bigint FROM (SELECT count(*) AS c FROM cordon_t_gc.postings GROUP BY term) x`); n > 7*4 {
		t.Fatalf("a term has %d blocks", n)
	}
}

// mirror applies the same writes to a Postgres store and to the reference
// store, and compares their retrievals for one principal.
type mirror struct {
	t   *testing.T
	ref *memory.Store
	st  *postgres.Store
	p   cordontype.Principal
}

func newMirror(t *testing.T, dbURL string, p cordontype.Principal) *mirror {
	t.Helper()
	settings := index.DefaultSettings()
	ref, err := memory.New(settings)
	if err != nil {
		t.Fatal(err)
	}
	return &mirror{t: t, ref: ref, st: openStore(t, dbURL, postgres.Options{AutoCreate: &settings}), p: p}
}

func (m *mirror) put(d cordontype.Document) {
	m.t.Helper()
	put(m.t, m.st, d)
	if _, err := m.ref.Put(context.Background(), d); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mirror) del(docID string) {
	m.t.Helper()
	ctx := context.Background()
	if _, err := m.st.Delete(ctx, m.p.Tenant, docID); err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.ref.Delete(ctx, m.p.Tenant, docID); err != nil {
		m.t.Fatal(err)
	}
}

// check retrieves each text from both stores and requires the same chunks,
// scores, texts and counters.
func (m *mirror) check(step string, texts ...string) {
	m.t.Helper()
	ctx := context.Background()
	for _, text := range texts {
		q := retrieval.Query{Principal: m.p, Text: text, Policy: retrieval.DefaultPolicy()}
		want, err := retrieval.New(m.ref).Retrieve(ctx, q)
		if err != nil {
			m.t.Fatal(err)
		}
		got, err := retrieval.New(m.st).Retrieve(ctx, q)
		if err != nil {
			m.t.Fatalf("%s: %v", step, err)
		}
		if ids(got) != ids(want) {
			m.t.Fatalf("%s, query %q: got %s, want %s", step, text, ids(got), ids(want))
		}
	}
}

// livePostings counts the postings in schema's blocks whose chunk exists.
func livePostings(t *testing.T, dbURL, schema string) int64 {
	t.Helper()
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	return queryInt(t, dbURL, `SELECT count(*) FROM `+unpacked(schema)+` p
		CROSS JOIN LATERAL unnest(p.chunks) AS u(chunk) JOIN `+q("chunks")+` c ON c.id = u.chunk`)
}

// unpacked is SQL for schema's postings table with each row's postings as
// arrays: unpacked from data (cordon.unpack_postings), or as stored by a
// row written before packed postings.
func unpacked(schema string) string {
	return `(SELECT p.term, p.block, p.n, p.data,
		        CASE WHEN p.data IS NULL THEN p.chunks ELSE u.chunks END AS chunks,
		        CASE WHEN p.data IS NULL THEN p.tfs ELSE u.tfs END AS tfs,
		        CASE WHEN p.data IS NULL THEN p.terms ELSE u.terms END AS terms
		FROM ` + pgx.Identifier{schema, "postings"}.Sanitize() + ` p LEFT JOIN LATERAL cordon.unpack_postings(p.data) u ON true)`
}

// TestPostingsBucketRows: a segment keeps the postings of its rare terms in
// bucket rows and those of its common terms in term rows; retrievals equal
// the reference's through writes, deletes, merges, a collection, the
// downgrade that expands bucket rows into term rows, and the upgrade back.
func TestPostingsBucketRows(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	m := newMirror(t, dbURL, cordontype.Principal{Tenant: "bkt", Clearance: cordontype.Confidential})
	common := []string{"wire", "hold", "release", "ledger", "swap", "margin"}
	doc := func(i int) cordontype.Document {
		var text strings.Builder
		for j := range 30 {
			text.WriteString(common[(i+j*j)%len(common)] + " ")
		}
		fmt.Fprintf(&text, "rare%d pmt%d tx%d", i, i%7, i%3)
		return cordontype.Document{Tenant: "bkt", DocID: fmt.Sprintf("d%d", i), Text: text.String(), Classification: cordontype.Classification(i % 3)}
	}
	queries := []string{"wire hold", "rare5", "rare17 pmt3", "pmt6 ledger", "tx1 swap rare33", "rare999"}
	batch := func(from, to int) {
		t.Helper()
		var docs []cordontype.Document
		for i := from; i < to; i++ {
			docs = append(docs, doc(i))
			if _, err := m.ref.Put(ctx, doc(i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.st.PutBatch(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	batch(0, 40)
	m.check("one segment", queries...)
	rows := func(where string) int64 {
		return queryInt(t, dbURL, `SELECT count(*) FROM `+unpacked("cordon_t_bkt")+` p WHERE `+where)
	}
	// 40 chunks: the common words, their stem terms (the English
	// analyzer, the default) and tx0..2 have more than 8 postings each,
	// rareN one and pmtN five or six (tokens with a digit have no stem).
	if n := rows(`terms IS NULL`); n != 2*int64(len(common))+3 {
		t.Fatalf("%d term rows, want %d (the common words, their stems and tx0..2)", n, 2*len(common)+3)
	}
	if n := rows(`terms IS NOT NULL`); n == 0 || n > 40+7 {
		t.Fatalf("%d bucket rows for 47 rare terms", n)
	}
	if n := rows(`terms IS NOT NULL AND term !~ '^#[0-9a-f]{2}$'`); n != 0 {
		t.Fatalf("%d bucket rows with a malformed key", n)
	}
	if n := rows(`'rare5' = ANY(terms)`); n != 1 {
		t.Fatalf("rare5 in %d bucket rows, want 1", n)
	}
	// Many small writes, merged size-tiered; some documents replaced or
	// deleted, so blocks hold postings of chunks that are gone.
	for i := 40; i < 140; i += 5 {
		batch(i, i+5)
	}
	for i := 0; i < 140; i += 9 {
		m.del(fmt.Sprintf("d%d", i))
	}
	m.put(doc(3))
	m.check("merged", queries...)
	if n := rows(`terms IS NOT NULL`); n == 0 {
		t.Fatal("no bucket rows after the merges")
	}
	before := queryInt(t, dbURL, `SELECT count(*) FROM (SELECT DISTINCT coalesce(u.term, p.term), p.block
		FROM `+unpacked("cordon_t_bkt")+` p CROSS JOIN LATERAL unnest(p.chunks, p.terms) AS u(chunk, term)) x`)
	postings := queryInt(t, dbURL, `SELECT sum(n)::bigint FROM cordon_t_bkt.postings`)

	// Down to schema version 9: one term row per term and block.
	if err := migrate.DownTo(ctx, dbURL, 11); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'cordon_t_bkt' AND table_name = 'postings' AND column_name = 'terms'`); n != 0 {
		t.Fatal("the terms column survived the downgrade")
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_bkt.postings`); n != before {
		t.Fatalf("down: %d rows, want %d (one per term and block)", n, before)
	}
	if n := queryInt(t, dbURL, `SELECT sum(n)::bigint FROM cordon_t_bkt.postings`); n != postings {
		t.Fatalf("down: %d postings, want %d", n, postings)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_bkt.postings WHERE term LIKE '#%'`); n != 0 {
		t.Fatalf("down: %d rows under a bucket key", n)
	}

	// Up again: the term rows stay valid, and new segments bucket again.
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	m.check("down and up", queries...)
	for i := 140; i < 220; i += 5 {
		batch(i, i+5)
	}
	m.check("written after the upgrade", append(queries, "rare150 pmt2", "rare219")...)
	if n := rows(`terms IS NOT NULL`); n == 0 {
		t.Fatal("no bucket rows after writes on the upgraded schema")
	}
}
