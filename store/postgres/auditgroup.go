package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Audit appends are grouped per tenant (group commit). A request queues its
// record and waits; whichever request finds its tenant's queue idle becomes
// the committer: it takes the tenant's advisory lock, reads the chain head,
// chains every queued record in queue order (up to maxAuditBatch), inserts
// them and commits in one transaction, then releases each waiter with its
// record as stored. Records that queued while that commit ran form the next
// batch; a lone request commits at once (no timer ever waits for company).
//
// Guarantees, as with one transaction per record:
//   - a waiter is released with success only after its batch committed;
//   - if the batch's transaction fails, every waiter of the batch gets the
//     error and nothing of the batch is visible;
//   - the advisory lock and the head read inside the transaction keep the
//     chain linear across processes that share the database.
//
// A waiter whose context ends returns its context's error and its request
// fails; its record may still be written by the batch it joined. The audit
// log then holds a record of a request that was not answered, never the
// reverse.
const maxAuditBatch = 256

// auditBatchTimeout bounds one batch's transaction. The batch runs on no
// single request's context, so that one caller going away does not fail
// the records of the others.
const auditBatchTimeout = 30 * time.Second

// auditWaiter is one queued record and, once its batch ended, the outcome.
type auditWaiter struct {
	ctx  context.Context
	rec  AuditRecord
	err  error
	done chan struct{}
}

// auditQueue is one tenant's pending records; running is set while a
// committer drains them. Both are guarded by auditGroups.mu.
type auditQueue struct {
	pending []*auditWaiter
	running bool
}

// auditGroups holds the queues of the tenants with records pending or
// being committed (an idle queue is forgotten, so requests naming many
// tenants leave nothing behind) and the counters.
type auditGroups struct {
	mu      sync.Mutex
	queues  map[string]*auditQueue
	records atomic.Int64
	commits atomic.Int64
}

// enqueue adds w to tenant's queue and reports whether the queue was idle,
// in which case the caller commits it.
func (g *auditGroups) enqueue(tenant string, w *auditWaiter) (q *auditQueue, lead bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queues == nil {
		g.queues = map[string]*auditQueue{}
	}
	q = g.queues[tenant]
	if q == nil {
		q = &auditQueue{}
		g.queues[tenant] = q
	}
	q.pending = append(q.pending, w)
	lead = !q.running
	q.running = true
	return q, lead
}

// take removes the next batch, up to maxAuditBatch records, from q.
func (g *auditGroups) take(q *auditQueue) []*auditWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(q.pending), maxAuditBatch)
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	if len(q.pending) == 0 {
		q.pending = nil
	}
	return batch
}

// idle reports whether q has nothing pending; if so q is marked idle and
// forgotten, and the next record queued for its tenant starts a new one.
func (g *auditGroups) idle(tenant string, q *auditQueue) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(q.pending) > 0 {
		return false
	}
	q.running = false
	delete(g.queues, tenant)
	return true
}

// AuditStats counts the audit records this store committed and the
// transactions they were committed in (Records/Commits is the mean batch
// size), and the records queued now, waiting for a batch.
type AuditStats struct {
	Records int64
	Commits int64
	Queued  int64
}

// AuditStats returns the store's audit append counters.
func (s *Store) AuditStats() AuditStats {
	st := AuditStats{Records: s.audit.records.Load(), Commits: s.audit.commits.Load()}
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	for _, q := range s.audit.queues {
		st.Queued += int64(len(q.pending))
	}
	return st
}

// appendGrouped queues w on the tenant's queue and returns once its batch
// ended or ctx did.
func (s *Store) appendGrouped(ctx context.Context, tenant string, key []byte, w *auditWaiter) error {
	q, lead := s.audit.enqueue(tenant, w)
	if lead {
		// Commit batches until this request's record is done; then hand
		// the rest of the queue to a goroutine, so this request answers.
		for {
			s.commitNext(tenant, key, q)
			select {
			case <-w.done:
				if !s.audit.idle(tenant, q) {
					go s.drain(tenant, key, q)
				}
				return w.err
			default:
			}
		}
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain commits batches until the queue is empty.
func (s *Store) drain(tenant string, key []byte, q *auditQueue) {
	for !s.audit.idle(tenant, q) {
		s.commitNext(tenant, key, q)
	}
}

// commitNext takes up to maxAuditBatch records off q, writes them in one
// transaction and releases their waiters.
func (s *Store) commitNext(tenant string, key []byte, q *auditQueue) {
	batch := s.audit.take(q)
	// A waiter that already gave up is not written.
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			close(w.done)
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	err := s.writeBatch(tenant, key, live)
	var pe *pgconn.PgError
	if err != nil && len(live) > 1 && errors.As(err, &pe) && len(pe.Code) >= 2 && pe.Code[:2] == "22" {
		// A value the database refused (a data exception) belongs to one
		// record: write each alone, so only its own request fails.
		for _, w := range live {
			w.err = s.writeBatch(tenant, key, []*auditWaiter{w})
			close(w.done)
		}
		return
	}
	for _, w := range live {
		w.err = err
		close(w.done)
	}
}

// writeBatch chains ws onto the tenant's audit log in one transaction. On
// success each waiter's record holds its seq, time and hashes; on failure
// nothing was written.
//
// The transaction takes two round trips, its statements pipelined: the
// first begins it, looks the tenant up, takes the chain's advisory lock
// and reads the head; the second, once the records are chained on that
// head (the key never leaves this process), inserts them and commits. The
// waiters are released only after the COMMIT's result arrived.
func (s *Store) writeBatch(tenant string, key []byte, ws []*auditWaiter) error {
	ctx, cancel := context.WithTimeout(context.Background(), auditBatchTimeout)
	defer cancel()
	schema, err := SchemaName(tenant)
	if err != nil {
		return err
	}
	table := auditTable(schema)
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(err)
	}
	// A connection left inside the transaction (an error before the
	// commit) is rolled back here, or destroyed by Release.
	defer c.Release()
	rollback := func() {
		if c.Conn().PgConn().TxStatus() != 'I' {
			_, _ = c.Exec(ctx, `ROLLBACK`)
		}
	}
	defer rollback()

	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	// The head is read with the primary key's index, whatever the
	// table's statistics say. A plan is cached per connection: made while
	// the table was empty after a VACUUM or ANALYZE (reltuples 0), it
	// would sort the whole table for every batch as the chain grows, until
	// the next analyze.
	b.Queue(`SET LOCAL enable_seqscan = off`)
	b.Queue(`SELECT schema_name FROM cordon.tenants WHERE name = $1`, tenant)
	b.Queue(`SELECT pg_advisory_xact_lock(hashtext($1))`, "cordon.audit:"+schema)
	b.Queue(`SELECT seq, hash, key_id FROM ` + table + ` ORDER BY seq DESC LIMIT 1`)
	var registered string
	var last int64
	var lastKey string
	prev := genesisHash
	br := c.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&registered)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		_ = br.Close()
		return ErrTenantNotFound
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&last, &prev, &lastKey)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // an empty chain
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		// No audit table (its statements are prepared before any runs):
		// an unregistered tenant is not found; a registered one without
		// its table fails as it is.
		rollback()
		if e := c.QueryRow(ctx, `SELECT schema_name FROM cordon.tenants WHERE name = $1`, tenant).Scan(&registered); errors.Is(e, pgx.ErrNoRows) {
			return ErrTenantNotFound
		}
	}
	if err != nil {
		return classify(err)
	}
	if registered != schema {
		return fmt.Errorf("tenant %q: registry names schema %q, want %q", tenant, registered, schema)
	}
	if lastKey != "" && key == nil {
		return fmt.Errorf("%w: the newest record is keyed with %q", ErrAuditKeyRequired, lastKey)
	}

	at := time.Now().UTC().Truncate(time.Microsecond)
	recs := make([]AuditRecord, len(ws))
	b = &pgx.Batch{}
	for i, w := range ws {
		r := w.rec
		r.Seq = last + 1 + int64(i)
		r.At = at
		if r.ChunkIDs == nil {
			r.ChunkIDs = []string{}
		}
		if r.Degraded == nil {
			r.Degraded = []string{}
		}
		r.PrevHash = prev
		if key != nil {
			r.Hash = AuditMAC(key, prev, r)
		} else {
			r.Hash = AuditHash(prev, r)
		}
		prev = r.Hash
		recs[i] = r
		b.Queue(`INSERT INTO `+table+`
			(seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
			 excluded_by_freshness, degraded, index_version, request_id, key_id, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			r.Seq, r.At, r.Sub, r.Op, r.Query, r.Policy, r.ChunkIDs, r.Considered, r.ExcludedByEntitlement,
			r.ExcludedByFreshness, r.Degraded, r.IndexVersion, r.RequestID, r.KeyID, r.PrevHash, r.Hash)
	}
	b.Queue(`COMMIT`)
	br = c.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return classify(err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a failed transaction answers ROLLBACK.
		return fmt.Errorf("audit batch: the transaction ended with %s, not COMMIT", tag)
	}
	s.audit.commits.Add(1)
	s.audit.records.Add(int64(len(ws)))
	for i, w := range ws {
		w.rec = recs[i]
	}
	return nil
}
