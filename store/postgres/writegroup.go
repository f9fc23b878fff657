package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Batches written to one tenant at once are grouped (group commit). Each
// PutBatch chunks, tokenizes and embeds its documents itself, in parallel
// with the others, then queues the prepared batch and waits; whichever
// batch finds its tenant's queue idle becomes the committer: it writes every
// queued batch prepared under the same embedding models (up to
// maxGroupChunks chunks) in one transaction, as one postings segment, then
// releases each waiter. Up to maxWriteCommitters groups of a tenant are
// written at once; batches that queue meanwhile form the next groups; a
// lone batch commits at once (no timer ever waits for company).
//
// Why: a write's postings segment holds one row per distinct term of the
// write, and most of a write's cost in the server is inserting those rows.
// Eight batches of 50 documents share most of their terms, so one segment
// for all eight holds a fraction of the rows eight segments would (a 100k
// ingest: half the server's CPU with batches of 400 documents as with
// batches of 50).
//
// Guarantees, as with one transaction per batch:
//   - every batch is all or nothing: a group commits whole, and if its
//     transaction fails each of its batches is written again alone, so only
//     a batch that fails by itself fails;
//   - a waiter is released only when its batch committed or failed; a
//     caller whose context ends while its batch waits in the queue takes it
//     out and gets the context's error, but once a group holding its batch
//     is being written the caller waits for the outcome, so an error never
//     reports a batch that was stored;
//   - a document written by two batches of one group keeps the later
//     batch's version, as if the batches ran one after the other in queue
//     order;
//   - the tenant's version grows by one per batch (all of a group's
//     documents are logged under its last version).

// maxWriteCommitters is how many groups of one tenant this process writes
// at once: a group's transaction runs in one server process, so with one
// committer the server's side of ingest would use one core (a 100k ingest
// with 8 writers: 2,600-2,900 chunks/s with one, 3,400-4,200 with two,
// 3,500-6,400 with four, on a shared 2-core machine).
const maxWriteCommitters = 4

// maxGroupChunks bounds the chunks of a group (a lone larger batch is
// written alone).
const maxGroupChunks = 20_000

// writeGroupTimeout bounds the transaction of a group of several batches,
// which runs on no single caller's context. A lone batch runs on its
// caller's context.
const writeGroupTimeout = 5 * time.Minute

// writeWaiter is one queued batch and, once its group ended, the outcome.
type writeWaiter struct {
	ctx    context.Context
	t      tenantInfo
	batch  []preparedDoc
	chunks int
	// taken is set (under writeGroups.mu) when a committer took the batch.
	taken bool
	// merge asks the waiter to run the tenant's merges after its group
	// committed (one waiter per group does).
	merge bool
	err   error
	done  chan struct{}
}

// writeQueue is one tenant's pending batches; running counts the
// committers draining them. Both are guarded by writeGroups.mu.
type writeQueue struct {
	pending []*writeWaiter
	running int
}

// writeGroups holds the queues of the tenants with batches pending or being
// written; an idle queue is forgotten.
type writeGroups struct {
	mu     sync.Mutex
	queues map[string]*writeQueue
}

// enqueue adds w to its tenant's queue and reports whether the queue was
// idle, in which case the caller commits it.
func (g *writeGroups) enqueue(w *writeWaiter) (q *writeQueue, lead bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queues == nil {
		g.queues = map[string]*writeQueue{}
	}
	q = g.queues[w.t.schema]
	if q == nil {
		q = &writeQueue{}
		g.queues[w.t.schema] = q
	}
	q.pending = append(q.pending, w)
	if lead = q.running < maxWriteCommitters; lead {
		q.running++
	}
	return q, lead
}

// withdraw takes w out of q if no committer has taken it yet.
func (g *writeGroups) withdraw(q *writeQueue, w *writeWaiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.taken {
		return false
	}
	for i, p := range q.pending {
		if p == w {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
			return true
		}
	}
	return false
}

// take removes the next group from q: the first pending batch and the
// following ones prepared under the same models, up to maxGroupChunks.
func (g *writeGroups) take(q *writeQueue) []*writeWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	var group, rest []*writeWaiter
	chunks := 0
	for _, w := range q.pending {
		if len(group) == 0 || sameModels(group[0].t, w.t) && chunks+w.chunks <= maxGroupChunks {
			group = append(group, w)
			chunks += w.chunks
			w.taken = true
			continue
		}
		rest = append(rest, w)
	}
	q.pending = rest
	return group
}

// idle reports whether q has nothing pending; if so the calling committer
// stops, and a queue without committers is forgotten.
func (g *writeGroups) idle(schema string, q *writeQueue) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(q.pending) > 0 {
		return false
	}
	if q.running--; q.running == 0 {
		delete(g.queues, schema)
	}
	return true
}

// sameModels reports whether batches prepared under a and b carry vectors
// of the same models.
func sameModels(a, b tenantInfo) bool {
	if a.settings != b.settings || a.reembed != b.reembed || (a.next == nil) != (b.next == nil) {
		return false
	}
	return a.next == nil || *a.next == *b.next
}

// writeGrouped queues batch (prepared under t) and returns once it was
// written or failed; merge reports whether the caller should run the
// tenant's merges.
func (s *Store) writeGrouped(ctx context.Context, t tenantInfo, batch []preparedDoc) (merge bool, err error) {
	w := &writeWaiter{ctx: ctx, t: t, batch: batch, done: make(chan struct{})}
	for _, d := range batch {
		w.chunks += len(d.chunks)
	}
	q, lead := s.writes.enqueue(w)
	if lead {
		// Commit groups until this batch is done (another committer may
		// have taken it); then hand the rest of the queue to a goroutine,
		// so this caller returns.
		for {
			group := s.writes.take(q)
			if len(group) == 0 {
				<-w.done
			} else {
				s.writeNext(group)
			}
			select {
			case <-w.done:
				if !s.writes.idle(t.schema, q) {
					go s.drainWrites(t.schema, q)
				}
				return w.merge, w.err
			default:
			}
		}
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		if s.writes.withdraw(q, w) {
			return false, ctx.Err()
		}
		<-w.done
	}
	return w.merge, w.err
}

// drainWrites commits groups until the queue is empty.
func (s *Store) drainWrites(schema string, q *writeQueue) {
	for !s.writes.idle(schema, q) {
		if group := s.writes.take(q); len(group) > 0 {
			s.writeNext(group)
		}
	}
}

// writeNext writes group and releases its waiters.
func (s *Store) writeNext(group []*writeWaiter) {
	err := s.writeGroup(group)
	if err != nil && len(group) > 1 && !errors.Is(err, errModelsChanged) {
		// Write each batch alone, so only a batch that fails by itself
		// fails.
		for _, w := range group {
			if w.err = s.writeGroup([]*writeWaiter{w}); w.err == nil {
				w.merge = true
			}
			close(w.done)
		}
		return
	}
	for i, w := range group {
		w.err = err
		w.merge = err == nil && i == 0
		close(w.done)
	}
}

// writeGroup writes the batches of ws (prepared under the same models) in
// one transaction.
func (s *Store) writeGroup(ws []*writeWaiter) error {
	ctx := ws[0].ctx
	if len(ws) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), writeGroupTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := ws[0].t
	all := ws[0].batch
	if len(ws) > 1 {
		all = nil
		for _, w := range ws {
			all = append(all, w.batch...)
		}
		all = lastOfEach(all)
	}
	w, err := s.prepareWrite(ctx, t.tables, all)
	if err != nil {
		return err
	}
	w.writes = int64(len(ws))
	return s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return putTx(ctx, tx, t, w)
	})
}
