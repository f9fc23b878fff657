package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Audit appends are grouped per tenant (group commit). A request queues its
// record and waits; whichever request finds its tenant's queue idle becomes
// the committer: it chains every queued record in queue order (up to
// maxAuditBatch) on the chain head, inserts them with one statement and
// commits, in one transaction, then releases each waiter with its record as
// stored. Records that queued while that commit ran form the next batch; a
// lone request commits at once (no timer ever waits for company).
//
// A batch takes one round trip when the store knows the tenant's chain
// head: the head its last batch of the tenant committed (or read). Only one
// committer of a tenant runs at a time in a process, so that head is never
// read and written at once. The records are chained on it in this process
// (the key never leaves it), and one pipeline begins, takes the tenant's
// advisory lock, inserts them and commits. The insert writes nothing
// unless, under the lock, the tenant is registered with its schema and the
// table's newest row (read by the primary key) is that head. When it wrote
// nothing (another process appended, the tenant was dropped or created
// again), or the store knows no head (the tenant's first batch, or any
// batch after a failure), the batch takes two round trips in a new
// transaction: the first begins, looks the tenant up, takes the lock and
// reads the head; the second, once the records are chained on that head,
// inserts them and commits. A batch that fails leaves no head known. (A
// connection's first batch of a tenant adds a round trip that prepares
// its statements.)
//
// Guarantees, as with one transaction per record:
//   - a waiter is released with success only after its batch's COMMIT
//     answered;
//   - if the batch's transaction fails, every waiter of the batch gets the
//     error and nothing of the batch is visible;
//   - the advisory lock, and the head read or compared under it inside the
//     transaction, keep the chain linear across processes that share the
//     database; the seq primary key refuses a fork even so.
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

// auditHead is the newest row of a tenant's chain; seq 0 with the genesis
// hash stands for an empty chain.
type auditHead struct {
	seq   int64
	hash  []byte
	keyID string
}

// auditGroups holds the queues of the tenants with records pending or
// being committed (an idle queue is forgotten, so requests naming many
// tenants leave nothing behind), the chain heads of the tenants whose last
// batch committed, and the counters.
type auditGroups struct {
	mu     sync.Mutex
	queues map[string]*auditQueue
	// heads holds, per tenant, the head its last batch committed. Only
	// the tenant's committer takes or puts its entry; mu guards the map.
	// It holds one entry per registered tenant at most: an append to a
	// tenant that is not registered fails and puts none.
	heads   map[string]auditHead
	records atomic.Int64
	commits atomic.Int64
	fast    atomic.Int64
	stale   atomic.Int64
}

// takeHead removes tenant's known head and returns it: a batch that fails
// leaves none, and only a committed batch puts one back.
func (g *auditGroups) takeHead(tenant string) (auditHead, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.heads[tenant]
	delete(g.heads, tenant)
	return h, ok
}

// putHead records h as tenant's head.
func (g *auditGroups) putHead(tenant string, h auditHead) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.heads == nil {
		g.heads = map[string]auditHead{}
	}
	g.heads[tenant] = h
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
	// FastCommits counts the Commits that took one round trip, chained on
	// the head the store knew.
	FastCommits int64
	// StaleHeads counts the batches whose known head was no longer the
	// chain's (another process appended, the tenant was dropped or created
	// again); each was tried again with two round trips.
	StaleHeads int64
	Queued     int64
}

// AuditStats returns the store's audit append counters.
func (s *Store) AuditStats() AuditStats {
	st := AuditStats{Records: s.audit.records.Load(), Commits: s.audit.commits.Load(),
		FastCommits: s.audit.fast.Load(), StaleHeads: s.audit.stale.Load()}
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
// nothing was written. With a known head it takes one round trip, else two
// (see the top of this file); the waiters are released only after the
// COMMIT's result arrived.
func (s *Store) writeBatch(tenant string, key []byte, ws []*auditWaiter) error {
	ctx, cancel := context.WithTimeout(context.Background(), auditBatchTimeout)
	defer cancel()
	head, known := s.audit.takeHead(tenant)
	schema, err := SchemaName(tenant)
	if err != nil {
		return err
	}
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

	// A store without a key never continues a keyed chain; the
	// two-round-trip path reads the head again and says so.
	if known && (head.keyID == "" || key != nil) {
		recs := chainAudit(ws, head, key)
		b := &pgx.Batch{}
		b.Queue(`BEGIN`)
		// The insert reads the head by the primary key's index; see
		// lockAuditHead.
		b.Queue(`SET LOCAL enable_seqscan = off`)
		b.Queue(`SELECT pg_advisory_xact_lock(hashtext($1))`, auditLockKey(schema))
		queueAuditInsert(b, tenant, schema, head, recs)
		b.Queue(`COMMIT`)
		n, err := commitAudit(ctx, c, b)
		var pe *pgconn.PgError
		switch {
		case err == nil && n == int64(len(recs)):
			s.audit.fast.Add(1)
			s.committed(tenant, ws, recs)
			return nil
		case err == nil && n == 0:
			// Not the head any more, or the tenant is not registered
			// with its schema: the transaction committed nothing.
		case errors.As(err, &pe) && pe.Code == "42P01":
			// The table is gone, with its tenant most likely: the
			// two-round-trip path tells which.
			rollback()
		case err == nil:
			// The insert's condition holds for every row or none.
			return fmt.Errorf("audit batch: %d of %d records inserted", n, len(recs))
		default:
			return err
		}
		s.audit.stale.Add(1)
	}

	head, err = lockAuditHead(ctx, c, tenant, schema, rollback)
	if err != nil {
		return err
	}
	if head.keyID != "" && key == nil {
		return fmt.Errorf("%w: the newest record is keyed with %q", ErrAuditKeyRequired, head.keyID)
	}
	recs := chainAudit(ws, head, key)
	b := &pgx.Batch{}
	queueAuditInsert(b, tenant, schema, head, recs)
	b.Queue(`COMMIT`)
	n, err := commitAudit(ctx, c, b)
	if err != nil {
		return err
	}
	if n != int64(len(recs)) {
		// The head was read under the lock in this transaction.
		return fmt.Errorf("audit batch: %d of %d records inserted on the head read under the lock", n, len(recs))
	}
	s.committed(tenant, ws, recs)
	return nil
}

// committed counts a committed batch, keeps its last record as the
// tenant's head and gives each waiter its record as stored.
func (s *Store) committed(tenant string, ws []*auditWaiter, recs []AuditRecord) {
	s.audit.commits.Add(1)
	s.audit.records.Add(int64(len(ws)))
	last := recs[len(recs)-1]
	// A copy: the caller owns the record it gets back.
	s.audit.putHead(tenant, auditHead{seq: last.Seq, hash: bytes.Clone(last.Hash), keyID: last.KeyID})
	for i, w := range ws {
		w.rec = recs[i]
	}
}

// auditLockKey names the advisory lock that serialises the appends to a
// tenant's chain, in every process.
func auditLockKey(schema string) string { return "cordon.audit:" + schema }

// lockAuditHead begins a transaction on c, looks the tenant up, takes its
// chain's advisory lock and reads the chain head, in one round trip; it
// returns with the transaction open. rollback ends a failed transaction.
func lockAuditHead(ctx context.Context, c *pgxpool.Conn, tenant, schema string, rollback func()) (auditHead, error) {
	head := auditHead{hash: genesisHash}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	// The head is read with the primary key's index, whatever the
	// table's statistics say. A plan is cached per connection: made while
	// the table was empty after a VACUUM or ANALYZE (reltuples 0), it
	// would sort the whole table for every batch as the chain grows, until
	// the next analyze.
	b.Queue(`SET LOCAL enable_seqscan = off`)
	b.Queue(`SELECT schema_name FROM cordon.tenants WHERE name = $1`, tenant)
	b.Queue(`SELECT pg_advisory_xact_lock(hashtext($1))`, auditLockKey(schema))
	b.Queue(`SELECT seq, hash, key_id FROM ` + auditTable(schema) + ` ORDER BY seq DESC LIMIT 1`)
	var registered string
	br := c.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&registered)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		_ = br.Close()
		return head, ErrTenantNotFound
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&head.seq, &head.hash, &head.keyID)
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
			return head, ErrTenantNotFound
		}
	}
	if err != nil {
		return head, classify(err)
	}
	if registered != schema {
		return head, fmt.Errorf("tenant %q: registry names schema %q, want %q", tenant, registered, schema)
	}
	return head, nil
}

// chainAudit gives the waiters' records, in order, their seq, time and
// hashes, chained on head: MACs with key, or plain hashes without one.
func chainAudit(ws []*auditWaiter, head auditHead, key []byte) []AuditRecord {
	at := time.Now().UTC().Truncate(time.Microsecond)
	prev := head.hash
	recs := make([]AuditRecord, len(ws))
	for i, w := range ws {
		r := w.rec
		r.Seq = head.seq + 1 + int64(i)
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
	}
	return recs
}

// queueAuditInsert queues the one statement that inserts recs, chained on
// head: one array element per record ($7 to $23), all of one time ($6).
// Arrays of arrays must be rectangular, so a record's chunk ids and
// degraded sides are each a slice of one flat array ($24, $25). The
// arrays are unnested in a select list, where they run in step one row at
// a time; unnested in FROM, each would fill a tuplestore of its own, which
// costs the backend more than the rest of a batch of one. The statement
// inserts nothing unless the tenant is registered with this schema ($1,
// $2) and the table's newest row, read by the primary key, is head ($3 to
// $5; seq 0 is an empty table); its command tag tells how many rows it
// inserted, all or none.
func queueAuditInsert(b *pgx.Batch, tenant, schema string, head auditHead, recs []AuditRecord) {
	// The columns of one type share an allocation.
	n := len(recs)
	i64, str, i32, byt := make([]int64, 5*n), make([]string, 6*n), make([]int32, 4*n), make([][]byte, 2*n)
	seq, considered, byEntitlement, byFreshness, indexVersion := i64[:n], i64[n:2*n], i64[2*n:3*n], i64[3*n:4*n], i64[4*n:]
	sub, op, query, policy, requestID, keyID := str[:n], str[n:2*n], str[2*n:3*n], str[3*n:4*n], str[4*n:5*n], str[5*n:]
	chunksFrom, chunksTo, degradedFrom, degradedTo := i32[:n], i32[n:2*n], i32[2*n:3*n], i32[3*n:]
	prevHash, hash := byt[:n], byt[n:]
	chunks, degraded := []string{}, []string{} // nil would be NULL
	for i, r := range recs {
		seq[i], considered[i], byEntitlement[i], byFreshness[i], indexVersion[i] = r.Seq, r.Considered, r.ExcludedByEntitlement, r.ExcludedByFreshness, r.IndexVersion
		sub[i], op[i], query[i], policy[i], requestID[i], keyID[i] = r.Sub, r.Op, r.Query, r.Policy, r.RequestID, r.KeyID
		// 1-based and inclusive: an empty slice is [k+1:k].
		chunksFrom[i] = int32(len(chunks)) + 1
		chunks = append(chunks, r.ChunkIDs...)
		chunksTo[i] = int32(len(chunks))
		degradedFrom[i] = int32(len(degraded)) + 1
		degraded = append(degraded, r.Degraded...)
		degradedTo[i] = int32(len(degraded))
		prevHash[i], hash[i] = r.PrevHash, r.Hash
	}
	table := auditTable(schema)
	b.Queue(`INSERT INTO `+table+`
		(seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
		 excluded_by_freshness, degraded, index_version, request_id, key_id, prev_hash, hash)
		SELECT r.seq, $6::timestamptz, r.sub, r.op, r.query, r.policy, ($24::text[])[r.chunks_from:r.chunks_to],
		       r.considered, r.excluded_by_entitlement, r.excluded_by_freshness,
		       ($25::text[])[r.degraded_from:r.degraded_to], r.index_version, r.request_id, r.key_id, r.prev_hash, r.hash
		FROM (SELECT unnest($7::bigint[]) AS seq, unnest($8::text[]) AS sub, unnest($9::text[]) AS op,
		             unnest($10::text[]) AS query, unnest($11::text[]) AS policy,
		             unnest($12::int[]) AS chunks_from, unnest($13::int[]) AS chunks_to,
		             unnest($14::bigint[]) AS considered, unnest($15::bigint[]) AS excluded_by_entitlement,
		             unnest($16::bigint[]) AS excluded_by_freshness,
		             unnest($17::int[]) AS degraded_from, unnest($18::int[]) AS degraded_to,
		             unnest($19::bigint[]) AS index_version, unnest($20::text[]) AS request_id,
		             unnest($21::text[]) AS key_id, unnest($22::bytea[]) AS prev_hash, unnest($23::bytea[]) AS hash) AS r
		WHERE EXISTS (SELECT FROM cordon.tenants WHERE name = $1 AND schema_name = $2)
		  AND coalesce((SELECT seq = $3::bigint AND hash = $4::bytea AND key_id = $5::text FROM `+table+`
		                ORDER BY seq DESC LIMIT 1), $3::bigint = 0)`,
		tenant, schema, head.seq, head.hash, head.keyID, recs[0].At,
		seq, sub, op, query, policy, chunksFrom, chunksTo,
		considered, byEntitlement, byFreshness, degradedFrom, degradedTo, indexVersion,
		requestID, keyID, prevHash, hash, chunks, degraded)
}

// commitAudit sends b, whose last two statements are the insert and
// COMMIT, and returns how many rows the insert wrote. It fails unless the
// COMMIT's result arrived and committed.
func commitAudit(ctx context.Context, c *pgxpool.Conn, b *pgx.Batch) (int64, error) {
	br := c.SendBatch(ctx, b)
	var insert, tag pgconn.CommandTag
	var err error
	for range b.Len() {
		insert = tag
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, classify(err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a failed transaction answers ROLLBACK.
		return 0, fmt.Errorf("audit batch: the transaction ended with %s, not COMMIT", tag)
	}
	return insert.RowsAffected(), nil
}
