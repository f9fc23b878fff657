package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// TestWriteGroup queues three batches, two of them writing one document,
// and commits them as one group: one transaction, the later batch's version
// of the shared document, the version grown by three, every document in the
// change log, and the statistics of the stored chunks.
func TestWriteGroup(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, _ := openAutoCreate(t, dbURL)
	if _, err := s.Put(ctx, cordontype.Document{Tenant: "grp", DocID: "seed", Text: "seed words", Classification: cordontype.Public}); err != nil {
		t.Fatal(err)
	}
	ti, _, err := lookupTenant(ctx, s.pool, "grp", nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := [][]string{{"a:wire transfer hold", "b:card fraud limit"}, {"c:refund swift officer"}, {"a:sanctions release wire"}}
	q := &writeQueue{running: 1}
	var ws []*writeWaiter
	for _, batch := range texts {
		docs := make([]cordontype.Document, len(batch))
		for i, text := range batch {
			docs[i] = cordontype.Document{Tenant: "grp", DocID: text[:1], Text: text[2:], Classification: cordontype.Internal, Barriers: []string{"mna"}}
		}
		prepared, err := s.prepareDocs(ctx, ti, docs)
		if err != nil {
			t.Fatal(err)
		}
		w := &writeWaiter{ctx: ctx, t: ti, batch: prepared, done: make(chan struct{})}
		for _, d := range prepared {
			w.chunks += len(d.chunks)
		}
		q.pending = append(q.pending, w)
		ws = append(ws, w)
	}
	var before int64
	if err := s.pool.QueryRow(ctx, `SELECT version FROM cordon_t_grp.stats`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	s.writeNext(s.writes.take(q))
	for i, w := range ws {
		<-w.done
		if w.err != nil {
			t.Fatalf("batch %d: %v", i, w.err)
		}
		if w.merge != (i == 0) {
			t.Errorf("batch %d: merge %v, want %v (one merge per group)", i, w.merge, i == 0)
		}
	}
	if len(q.pending) != 0 {
		t.Fatalf("%d batches left in the queue, want one group of all", len(q.pending))
	}
	var version, segments, blocks int64
	var textA string
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT version FROM cordon_t_grp.stats), (SELECT count(*) FROM cordon_t_grp.segments WHERE cols IS NULL),
		(SELECT count(*) FROM cordon_t_grp.segments WHERE cols IS NOT NULL),
		(SELECT text FROM cordon_t_grp.documents WHERE doc_id = 'a')`).Scan(&version, &segments, &blocks, &textA); err != nil {
		t.Fatal(err)
	}
	if blocks != 2 {
		t.Errorf("%d column blocks, want 2 (the seed's and the group's)", blocks)
	}
	if version != before+3 {
		t.Errorf("version %d, want %d (one per batch)", version, before+3)
	}
	if segments != 2 {
		t.Errorf("%d postings segments, want 2 (the seed's and the group's)", segments)
	}
	if textA != "sanctions release wire" {
		t.Errorf("document a holds %q, want the later batch's text", textA)
	}
	for _, check := range []struct{ name, sql string }{
		{"n_chunks", `SELECT (SELECT n_chunks FROM cordon_t_grp.stats) - (SELECT count(*) FROM cordon_t_grp.chunks)`},
		{"sum_len", `SELECT (SELECT sum_len FROM cordon_t_grp.stats) - (SELECT sum(length) FROM cordon_t_grp.chunks)`},
		{"label_stats", `SELECT (SELECT n_chunks FROM cordon_t_grp.label_stats WHERE classification = 1 AND barriers = '{mna}')
			- (SELECT count(*) FROM cordon_t_grp.chunks WHERE classification = 1)`},
		{"changes", `SELECT 3 - count(DISTINCT doc_id) FROM cordon_t_grp.changes WHERE version > ` + fmt.Sprint(before)},
		{"postings of a", `SELECT count(*) FROM cordon_t_grp.postings WHERE term = 'transfer'`},
	} {
		var n int64
		if err := s.pool.QueryRow(ctx, check.sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", check.name, err)
		}
		if n != 0 {
			t.Errorf("%s: off by %d", check.name, n)
		}
	}
}
