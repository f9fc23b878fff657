package audit

import (
	"context"
	"testing"
)

// TestAuditQueueNeverStranded walks the queue through the sequence that
// stranded a record: a tenant's batch written on a goroutine of its own
// (a batch of several tenants) outlives the committer, a record of that
// tenant queues meanwhile (its request finds nothing ready and stops
// committing), and the batch ends. The end of the batch must start a
// committer; before, the record waited for the next request.
func TestAuditQueueNeverStranded(t *testing.T) {
	var g auditGroups
	w := func() *auditWaiter { return &auditWaiter{ctx: context.Background(), done: make(chan struct{})} }
	if !g.enqueue("a", "cordon_t_a", w()) {
		t.Fatal("the first record's request is not the committer")
	}
	g.enqueue("b", "cordon_t_b", w())
	batch := g.takeBatch()
	if len(batch) != 2 {
		t.Fatalf("the batch holds %d tenants, want 2", len(batch))
	}
	// Both tenants' batches now run on goroutines of their own; the
	// committer finds nothing ready and stops.
	if next := g.takeBatch(); next != nil {
		t.Fatalf("a second batch while both tenants run: %v", next)
	}
	// A record of a running tenant: its request becomes the committer,
	// finds nothing ready (the tenant runs) and stops.
	if !g.enqueue("a", "cordon_t_a", w()) {
		t.Fatal("with no committer running, the request is not the committer")
	}
	if next := g.takeBatch(); next != nil {
		t.Fatalf("a batch of a running tenant: %v", next)
	}
	if g.finish(batch[1]) {
		t.Fatal("finishing tenant b, with nothing queued, starts a committer")
	}
	if !g.finish(batch[0]) {
		t.Fatal("finishing tenant a, with a record queued and no committer running, does not start one")
	}
	if g.stranded() {
		t.Fatal("records are ready and no committer runs")
	}
	// The committer started by finish takes the record.
	next := g.takeBatch()
	if len(next) != 1 || next[0].tenant != "a" || len(next[0].ws) != 1 {
		t.Fatalf("the started committer's batch is %+v, want tenant a's one record", next)
	}
	if g.finish(next[0]) {
		t.Fatal("finishing with nothing queued starts a committer")
	}
	if g.takeBatch() != nil || g.committers != 0 || len(g.queues) != 0 {
		t.Fatalf("after the last batch: committers %d, queues %d, want 0 and 0", g.committers, len(g.queues))
	}
	if g.waited.Load() != 3 {
		t.Fatalf("waited counts %d records, want 3", g.waited.Load())
	}
}

// TestAuditQueueFinishWhileCommitting: a batch that ends while a committer
// runs leaves the ready records to it and starts no other.
func TestAuditQueueFinishWhileCommitting(t *testing.T) {
	var g auditGroups
	w := func() *auditWaiter { return &auditWaiter{ctx: context.Background(), done: make(chan struct{})} }
	g.enqueue("a", "cordon_t_a", w())
	g.enqueue("b", "cordon_t_b", w())
	batch := g.takeBatch() // the committer goes on running
	g.enqueue("a", "cordon_t_a", w())
	if g.finish(batch[0]) {
		t.Fatal("a second committer was started while one runs")
	}
	if g.stranded() {
		t.Fatal("stranded while a committer runs")
	}
	if next := g.takeBatch(); len(next) != 1 || next[0].tenant != "a" {
		t.Fatalf("the running committer's next batch is %+v, want tenant a's", next)
	}
}
