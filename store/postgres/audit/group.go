package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

// Audit appends are grouped (group commit). A request queues its record on
// its tenant's queue and waits. One committer at a time (auditCommitters)
// takes the pending records of every tenant with records queued and no
// batch in flight, in the order the tenants' records arrived (up to
// maxAuditBatch records in all), writes them and releases each waiter with
// its record as stored. Records that queue while a batch is written form
// the next one; a lone request commits at once (no timer ever waits for
// company). The committer is a request that found no committer running;
// once its own record is done it hands what remains to a goroutine and
// answers.
//
// A batch of one tenant is one transaction of that tenant, as follows. It
// takes one round trip when the store knows the tenant's chain head: the
// head its last batch of the tenant committed (or read). A tenant has at
// most one batch in flight in a process, so that head is never read and
// written at once. The records are chained on it in this process (the key
// never leaves it), and one pipeline begins, takes the tenant's advisory
// lock, inserts them and commits. The insert writes nothing unless, under
// the lock, the tenant is registered with its schema and the table's
// newest row (read by the primary key) is that head. When it wrote nothing
// (another process appended, the tenant was dropped or created again), or
// the store knows no head (the tenant's first batch, or any batch after a
// failure), the batch takes two round trips in a new transaction: the
// first begins, looks the tenant up, takes the lock and reads the head;
// the second, once the records are chained on that head, inserts them and
// commits. A batch that fails leaves no head known. (A connection's first
// batch of a tenant, and its first of several records, adds a round trip
// that prepares its statements.)
//
// A batch of several tenants whose heads the store knows is one shared
// transaction: one pipeline begins, takes each tenant's lock and inserts
// its records as above (the locks in the order of their keys, so two
// processes never wait on each other's), and commits. Tenants whose head
// is not known are written each in a transaction of its own, beside it.
// One tenant's trouble stays its own: the shared transaction bounds its
// lock waits (auditSharedLockTimeout) and statements
// (auditSharedStatementTimeout), and when the database fails any of its
// statements (a refused value, a raising trigger, a lock or statement
// timeout, a missing table) nothing of it is committed and every tenant's
// records are written again in a transaction of the tenant's own, at
// once, each on its own goroutine: only the failing tenant's requests see
// the failure, and the committer goes on with the next batch. The tenant
// whose statement failed is then kept out of shared transactions for
// auditSoloFor, so a tenant in lasting trouble costs the others one. A tenant
// whose insert wrote nothing (a stale head) is written again the same way.
// A shared transaction whose outcome is unknown (the connection broke) is
// not written again: its records may be committed, and writing them again
// would audit a request twice.
//
// Guarantees, as with one transaction per record:
//   - a waiter is released with success only after the COMMIT of the
//     transaction holding its record answered;
//   - if that transaction fails, nothing of it is visible, and the
//     waiter gets the error unless its records are written again (above);
//   - the advisory lock, and the head read or compared under it inside the
//     transaction, keep the chain linear across processes that share the
//     database; the seq primary key refuses a fork even so.
//
// A waiter whose context ends returns its context's error and its request
// fails; its record may still be written by the batch it joined. The audit
// log then holds a record of a request that was not answered, never the
// reverse.
const maxAuditBatch = 256

// auditCommitters is how many committers run at once. One: every batch
// then holds whatever queued while the previous one was written, across
// tenants, which is what saves transactions; a tenant in trouble is moved
// off the committer's path (see above), so it cannot hold the others up
// for long.
const auditCommitters = 1

// auditSharedLockTimeout and auditSharedStatementTimeout bound what one
// tenant's statements may hold a shared transaction up: a lock another
// process holds, a slow trigger. A transaction of one tenant has no such
// bound beyond auditBatchTimeout.
const (
	auditSharedLockTimeout      = 100 * time.Millisecond
	auditSharedStatementTimeout = time.Second
)

// auditSoloFor is how long a tenant whose statement failed a shared
// transaction is kept out of shared ones: its records are written in
// transactions of its own meanwhile, so a tenant in lasting trouble costs
// the others one shared transaction, not one per batch.
var auditSoloFor = 5 * time.Second // a variable for the tests

// auditBatchTimeout bounds one batch's transaction. The batch runs on no
// single request's context, so that one caller going away does not fail
// the records of the others.
const auditBatchTimeout = 30 * time.Second

// auditWaiter is one queued record and, once its batch ended, the outcome.
type auditWaiter struct {
	ctx    context.Context
	rec    Record
	err    error
	done   chan struct{}
	queued time.Time // when it was queued
}

// auditQueue is one tenant's pending records. running is set while a batch
// of its records is being written, ready while it is listed in
// auditGroups.ready. All are guarded by auditGroups.mu.
type auditQueue struct {
	schema  string // the tenant's
	pending []*auditWaiter
	running bool
	ready   bool
}

// tenantBatch is the records of one tenant taken for a batch.
type tenantBatch struct {
	tenant string
	q      *auditQueue
	ws     []*auditWaiter
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
// tenants leave nothing behind), the tenants ready for the next batch, the
// chain heads of the tenants whose last batch committed, and the counters.
type auditGroups struct {
	mu         sync.Mutex
	queues     map[string]*auditQueue
	ready      []string // tenants with records pending and no batch in flight
	committers int
	// heads holds, per tenant, the head its last batch committed. Only
	// the writer of the tenant's batch takes or puts its entry; mu guards
	// the map. It holds one entry per registered tenant at most: an
	// append to a tenant that is not registered fails and puts none.
	heads map[string]auditHead
	// solo holds, per tenant kept out of shared transactions, until when.
	solo map[string]time.Time
	// waited counts the records taken into a batch, waitNanos the time
	// they waited in their queue for it, waitMax the longest such wait.
	waited    atomic.Int64
	waitNanos atomic.Int64
	waitMax   atomic.Int64
	records   atomic.Int64
	commits   atomic.Int64
	fast      atomic.Int64
	stale     atomic.Int64
	shared    atomic.Int64
	redone    atomic.Int64
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

// keepSolo keeps tenant out of shared transactions for auditSoloFor.
func (g *auditGroups) keepSolo(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for t, until := range g.solo {
		if !now.Before(until) {
			delete(g.solo, t)
		}
	}
	if g.solo == nil {
		g.solo = map[string]time.Time{}
	}
	g.solo[tenant] = now.Add(auditSoloFor)
}

// sharable reports whether tenant's records may join a shared transaction:
// the store knows its head, can continue its chain (a keyed chain needs
// key) and does not keep the tenant solo.
func (g *auditGroups) sharable(tenant string, key []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, known := g.heads[tenant]
	if until, ok := g.solo[tenant]; ok {
		if time.Now().Before(until) {
			return false
		}
		delete(g.solo, tenant)
	}
	return known && (h.keyID == "" || key != nil)
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

// enqueue adds w to tenant's queue and reports whether the caller becomes
// a committer (none was running).
func (g *auditGroups) enqueue(tenant, schema string, w *auditWaiter) (lead bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queues == nil {
		g.queues = map[string]*auditQueue{}
	}
	q := g.queues[tenant]
	if q == nil {
		q = &auditQueue{schema: schema}
		g.queues[tenant] = q
	}
	w.queued = time.Now()
	q.pending = append(q.pending, w)
	if !q.running && !q.ready {
		q.ready = true
		g.ready = append(g.ready, tenant)
	}
	if g.committers < auditCommitters {
		g.committers++
		return true
	}
	return false
}

// takeBatch takes the next batch: the pending records of the ready
// tenants, in the order they became ready, up to maxAuditBatch records.
// Their tenants are running until [auditGroups.finish]. With nothing
// ready it returns nil, and the caller is no longer a committer.
func (g *auditGroups) takeBatch() []tenantBatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []tenantBatch
	room := maxAuditBatch
	now := time.Now()
	for len(g.ready) > 0 && room > 0 {
		t := g.ready[0]
		g.ready = g.ready[1:]
		q := g.queues[t]
		n := min(len(q.pending), room)
		for _, w := range q.pending[:n] {
			g.observeWait(now.Sub(w.queued))
		}
		out = append(out, tenantBatch{tenant: t, q: q, ws: q.pending[:n:n]})
		q.pending = q.pending[n:]
		if len(q.pending) == 0 {
			q.pending = nil
		}
		q.ready, q.running = false, true
		room -= n
	}
	if len(g.ready) == 0 {
		g.ready = nil
	}
	if len(out) == 0 {
		g.committers--
	}
	return out
}

// observeWait counts one record's wait in its queue. Called under mu.
func (g *auditGroups) observeWait(d time.Duration) {
	g.waited.Add(1)
	g.waitNanos.Add(int64(d))
	if int64(d) > g.waitMax.Load() {
		g.waitMax.Store(int64(d))
	}
}

// finish ends b's batch: its tenant is listed as ready again when records
// queued meanwhile, and forgotten otherwise. It reports whether the caller
// must start a committer: records became ready and none is running (a
// batch written on a goroutine of its own ends after the committer
// stopped), so that no record ever waits without one.
func (g *auditGroups) finish(b tenantBatch) (start bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b.q.running = false
	if len(b.q.pending) == 0 {
		delete(g.queues, b.tenant)
		return false
	}
	b.q.ready = true
	g.ready = append(g.ready, b.tenant)
	if g.committers < auditCommitters {
		g.committers++
		return true
	}
	return false
}

// stranded reports whether records are ready while no committer runs: the
// state finish and enqueue never leave (for the tests).
func (g *auditGroups) stranded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ready) > 0 && g.committers == 0
}

// keepCommitting reports whether batches are ready; if none, the caller is
// no longer a committer.
func (g *auditGroups) keepCommitting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ready) > 0 {
		return true
	}
	g.committers--
	return false
}

// Stats counts the audit records this store committed and the
// transactions they were committed in (Records/Commits is the mean batch
// size), and the records queued now, waiting for a batch.
type Stats struct {
	Records int64
	Commits int64
	// FastCommits counts the Commits of one tenant that took one round
	// trip, chained on the head the store knew.
	FastCommits int64
	// StaleHeads counts the batches whose known head was no longer the
	// chain's (another process appended, the tenant was dropped or created
	// again); each was tried again with two round trips.
	StaleHeads int64
	// SharedCommits counts the Commits that held records of more than one
	// tenant; SharedRedone the shared transactions that failed and whose
	// tenants' records were written again, each tenant on its own.
	SharedCommits int64
	SharedRedone  int64
	Queued        int64
	// OldestQueued is how long the oldest record queued now has waited
	// for its batch (0 with none queued). A record waits at most for the
	// batch of its tenant in flight (auditBatchTimeout) and the batch the
	// committer is writing; a value above that means records are stuck.
	OldestQueued time.Duration
	// Waited counts the records taken into a batch, WaitTotal the time
	// they waited in their queue for it and WaitMax the longest such wait.
	Waited    int64
	WaitTotal time.Duration
	WaitMax   time.Duration
}

// Stats returns the store's audit append counters.
func (s *Log) Stats() Stats {
	st := Stats{Records: s.groups.records.Load(), Commits: s.groups.commits.Load(),
		FastCommits: s.groups.fast.Load(), StaleHeads: s.groups.stale.Load(),
		SharedCommits: s.groups.shared.Load(), SharedRedone: s.groups.redone.Load(),
		Waited: s.groups.waited.Load(), WaitTotal: time.Duration(s.groups.waitNanos.Load()),
		WaitMax: time.Duration(s.groups.waitMax.Load())}
	now := time.Now()
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	for _, q := range s.groups.queues {
		st.Queued += int64(len(q.pending))
		if len(q.pending) > 0 {
			// A queue's records are in arrival order.
			st.OldestQueued = max(st.OldestQueued, now.Sub(q.pending[0].queued))
		}
	}
	return st
}

// appendGrouped queues w on the tenant's queue and returns once its batch
// ended or ctx did.
func (s *Log) appendGrouped(ctx context.Context, tenant, schema string, key []byte, w *auditWaiter) error {
	if s.groups.enqueue(tenant, schema, w) {
		// Commit batches until this request's record is done; then hand
		// the rest to a goroutine, so this request answers.
		for b := s.groups.takeBatch(); b != nil; b = s.groups.takeBatch() {
			s.commitBatch(key, b)
			select {
			case <-w.done:
				if s.groups.keepCommitting() {
					go s.drain(key)
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

// drain commits batches until none is ready.
func (s *Log) drain(key []byte) {
	for b := s.groups.takeBatch(); b != nil; b = s.groups.takeBatch() {
		s.commitBatch(key, b)
	}
}

// release ends b's batch and then releases its waiters, whose outcome is
// set; when records of b's tenant queued meanwhile and no committer runs,
// it starts one.
func (s *Log) release(key []byte, b tenantBatch) {
	s.finish(key, b)
	for _, w := range b.ws {
		close(w.done)
	}
}

// finish ends b's batch, starting a committer when one is needed (see
// [auditGroups.finish]).
func (s *Log) finish(key []byte, b tenantBatch) {
	if s.groups.finish(b) {
		go s.drain(key)
	}
}

// commitBatch writes the records of batch and releases their waiters
// (some of them later, from goroutines of their own: see the top of this
// file).
func (s *Log) commitBatch(key []byte, batch []tenantBatch) {
	var shared, solo []tenantBatch
	for _, b := range batch {
		// A waiter that already gave up is not written.
		live := b.ws[:0:0]
		for _, w := range b.ws {
			if err := w.ctx.Err(); err != nil {
				w.err = err
				close(w.done)
				continue
			}
			live = append(live, w)
		}
		b.ws = live
		if len(live) == 0 {
			s.finish(key, b)
			continue
		}
		if s.groups.sharable(b.tenant, key) {
			shared = append(shared, b)
		} else {
			solo = append(solo, b)
		}
	}
	if len(shared) == 1 {
		solo, shared = append(solo, shared[0]), nil
	}
	if len(shared) > 1 {
		redo := s.writeShared(key, shared)
		solo = append(solo, redo...)
	}
	if len(solo) == 1 && len(shared) == 0 {
		// One tenant (the common case): no goroutine.
		s.commitTenant(key, solo[0])
		s.release(key, solo[0])
		return
	}
	for _, b := range solo {
		go func() {
			s.commitTenant(key, b)
			s.release(key, b)
		}()
	}
}

// commitTenant writes b's records in transactions of its tenant and sets
// each waiter's outcome.
func (s *Log) commitTenant(key []byte, b tenantBatch) {
	err := s.writeBatch(b.tenant, key, b.ws)
	var pe *pgconn.PgError
	if err != nil && len(b.ws) > 1 && errors.As(err, &pe) && len(pe.Code) >= 2 && pe.Code[:2] == "22" {
		// A value the database refused (a data exception) belongs to one
		// record: write each alone, so only its own request fails.
		for _, w := range b.ws {
			w.err = s.writeBatch(b.tenant, key, []*auditWaiter{w})
		}
		return
	}
	for _, w := range b.ws {
		w.err = err
	}
}

// writeShared writes the batches of several tenants, whose heads the store
// knows, in one transaction (see the top of this file). It releases the
// waiters of the tenants it committed, or fails, and returns the batches
// to be written again, each tenant on its own.
func (s *Log) writeShared(key []byte, bs []tenantBatch) (redo []tenantBatch) {
	ctx, cancel := context.WithTimeout(context.Background(), auditBatchTimeout)
	defer cancel()
	type item struct {
		b      tenantBatch
		schema string
		lock   string
		head   auditHead
		recs   []Record
		// first and insert are the positions in the pipeline of the
		// tenant's first statement (its lock) and of its insert.
		first, insert int
	}
	items := make([]item, 0, len(bs))
	for _, b := range bs {
		head, _ := s.groups.takeHead(b.tenant)
		items = append(items, item{b: b, schema: b.q.schema, lock: auditLockKey(b.q.schema), head: head})
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.lock, b.lock) })
	fail := func(err error) {
		for _, it := range items {
			for _, w := range it.b.ws {
				w.err = err
			}
			s.release(key, it.b)
		}
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		fail(pgexec.Classify(err))
		return nil
	}
	defer c.Release()
	defer func() {
		if c.Conn().PgConn().TxStatus() != 'I' {
			_, _ = c.Exec(ctx, `ROLLBACK`)
		}
	}()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	// The heads are read by the primary key's index (see lockHead).
	b.Queue(`SELECT set_config('enable_seqscan', 'off', true), set_config('lock_timeout', $1, true),
		set_config('statement_timeout', $2, true)`,
		strconv.FormatInt(auditSharedLockTimeout.Milliseconds(), 10), strconv.FormatInt(auditSharedStatementTimeout.Milliseconds(), 10))
	for i := range items {
		it := &items[i]
		it.recs = chainAudit(it.b.ws, it.head, key)
		it.first = b.Len()
		b.Queue(`SELECT pg_advisory_xact_lock(hashtext($1))`, it.lock)
		it.insert = b.Len()
		queueAuditInsert(b, it.b.tenant, it.schema, it.head, it.recs)
	}
	b.Queue(`COMMIT`)
	br := c.SendBatch(ctx, b)
	tags := make([]pgconn.CommandTag, 0, b.Len())
	for range b.Len() {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err != nil {
			break
		}
		tags = append(tags, tag)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		// The database refused a statement: nothing was committed. The
		// refused statement is the len(tags)th; when it is a tenant's
		// lock or insert, it names the tenant in trouble.
		for _, it := range items {
			if it.first <= len(tags) && len(tags) <= it.insert {
				s.groups.keepSolo(it.b.tenant)
			}
		}
		s.groups.redone.Add(1)
		for _, it := range items {
			redo = append(redo, it.b)
		}
		return redo
	case err != nil:
		fail(pgexec.Classify(err))
		return nil
	case tags[len(tags)-1].String() != "COMMIT":
		fail(fmt.Errorf("audit batch: the shared transaction ended with %s, not COMMIT", tags[len(tags)-1]))
		return nil
	}
	s.groups.commits.Add(1)
	s.groups.shared.Add(1)
	for _, it := range items {
		switch n := tags[it.insert].RowsAffected(); {
		case n == int64(len(it.recs)):
			s.committed(it.b.tenant, it.b.ws, it.recs)
			s.release(key, it.b)
		case n == 0:
			// A stale head, or the tenant is gone: its own transaction
			// tells which.
			s.groups.stale.Add(1)
			redo = append(redo, it.b)
		default:
			for _, w := range it.b.ws {
				w.err = fmt.Errorf("audit batch: %d of %d records inserted", n, len(it.recs))
			}
			s.release(key, it.b)
		}
	}
	return redo
}

// writeBatch chains ws onto the tenant's audit log in one transaction. On
// success each waiter's record holds its seq, time and hashes; on failure
// nothing was written. With a known head it takes one round trip, else two
// (see the top of this file); the waiters are released only after the
// COMMIT's result arrived.
func (s *Log) writeBatch(tenant string, key []byte, ws []*auditWaiter) error {
	ctx, cancel := context.WithTimeout(context.Background(), auditBatchTimeout)
	defer cancel()
	head, known := s.groups.takeHead(tenant)
	schema, err := s.schema(tenant)
	if err != nil {
		return err
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return pgexec.Classify(err)
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
		// lockHead. set_config(..., true) is SET LOCAL, in the lock's
		// statement: one statement fewer for the database to run.
		b.Queue(`SELECT set_config('enable_seqscan', 'off', true), pg_advisory_xact_lock(hashtext($1))`, auditLockKey(schema))
		queueAuditInsert(b, tenant, schema, head, recs)
		b.Queue(`COMMIT`)
		n, err := commitAudit(ctx, c, b)
		var pe *pgconn.PgError
		switch {
		case err == nil && n == int64(len(recs)):
			s.groups.fast.Add(1)
			s.groups.commits.Add(1)
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
		s.groups.stale.Add(1)
	}

	head, err = lockHead(ctx, c, tenant, schema, rollback)
	if err != nil {
		return err
	}
	if head.keyID != "" && key == nil {
		return fmt.Errorf("%w: the newest record is keyed with %q", ErrKeyRequired, head.keyID)
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
	s.groups.commits.Add(1)
	s.committed(tenant, ws, recs)
	return nil
}

// committed counts a committed batch's records, keeps its last record as the
// tenant's head and gives each waiter its record as stored.
func (s *Log) committed(tenant string, ws []*auditWaiter, recs []Record) {
	s.groups.records.Add(int64(len(ws)))
	last := recs[len(recs)-1]
	// A copy: the caller owns the record it gets back.
	s.groups.putHead(tenant, auditHead{seq: last.Seq, hash: bytes.Clone(last.Hash), keyID: last.KeyID})
	for i, w := range ws {
		w.rec = recs[i]
	}
}

// auditLockKey names the advisory lock that serialises the appends to a
// tenant's chain, in every process.
func auditLockKey(schema string) string { return "cordon.audit:" + schema }

// lockHead begins a transaction on c, looks the tenant up, takes its
// chain's advisory lock and reads the chain head, in one round trip; it
// returns with the transaction open. rollback ends a failed transaction.
func lockHead(ctx context.Context, c *pgxpool.Conn, tenant, schema string, rollback func()) (auditHead, error) {
	head := auditHead{hash: genesisHash}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT schema_name FROM cordon.tenants WHERE name = $1`, tenant)
	// The head is read with the primary key's index, whatever the
	// table's statistics say. A plan is cached per connection: made while
	// the table was empty after a VACUUM or ANALYZE (reltuples 0), it
	// would sort the whole table for every batch as the chain grows, until
	// the next analyze. set_config(..., true) is SET LOCAL; the statement,
	// the lock's, is the one-round-trip path's (writeBatch), so a
	// connection prepares it once for both.
	b.Queue(`SELECT set_config('enable_seqscan', 'off', true), pg_advisory_xact_lock(hashtext($1))`, auditLockKey(schema))
	b.Queue(`SELECT seq, hash, key_id FROM ` + auditTable(schema) + ` ORDER BY seq DESC LIMIT 1`)
	var registered string
	br := c.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&registered)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		_ = br.Close()
		return head, pgexec.ErrTenantNotFound
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
			return head, pgexec.ErrTenantNotFound
		}
	}
	if err != nil {
		return head, pgexec.Classify(err)
	}
	if registered != schema {
		return head, fmt.Errorf("tenant %q: registry names schema %q, want %q", tenant, registered, schema)
	}
	return head, nil
}

// chainAudit gives the waiters' records, in order, their seq, time and
// hashes, chained on head: MACs with key, or plain hashes without one.
func chainAudit(ws []*auditWaiter, head auditHead, key []byte) []Record {
	at := time.Now().UTC().Truncate(time.Microsecond)
	prev := head.hash
	recs := make([]Record, len(ws))
	// One hash for the batch, reset for each record: the same sums as
	// AuditMAC and AuditHash make, without a new HMAC state per record.
	var h hash.Hash
	if key != nil {
		h = hmac.New(sha256.New, key)
	} else {
		h = sha256.New()
	}
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
		h.Reset()
		r.Hash = writeAudit(h, prev, r)
		prev = r.Hash
		recs[i] = r
	}
	return recs
}

// queueAuditInsert queues the one statement that inserts recs, chained on
// head. A lone record's values are parameters as they are ($6 to $21);
// several records are sent as one array element per record ($7 to $23),
// all of one time ($6).
// Arrays of arrays must be rectangular, so a record's chunk ids and
// degraded sides are each a slice of one flat array ($24, $25). The
// arrays are unnested in a select list, where they run in step one row at
// a time; unnested in FROM, each would fill a tuplestore of its own, which
// costs the backend more than the rest of a batch of one. The statement
// inserts nothing unless the tenant is registered with this schema ($1,
// $2) and the table's newest row, read by the primary key, is head ($3 to
// $5; seq 0 is an empty table); its command tag tells how many rows it
// inserted, all or none.
func queueAuditInsert(b *pgx.Batch, tenant, schema string, head auditHead, recs []Record) {
	table := auditTable(schema)
	if len(recs) == 1 {
		// One record (every batch while requests come one at a time):
		// no arrays for the backend to receive and unnest, no
		// set-returning functions in its plan.
		r := recs[0]
		b.Queue(`INSERT INTO `+table+`
		(seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
		 excluded_by_freshness, degraded, index_version, request_id, key_id, prev_hash, hash)
		SELECT $6::bigint, $7::timestamptz, $8::text, $9::text, $10::text, $11::text, $12::text[],
		       $13::bigint, $14::bigint, $15::bigint, $16::text[], $17::bigint, $18::text, $19::text,
		       $20::bytea, $21::bytea
		WHERE EXISTS (SELECT FROM cordon.tenants WHERE name = $1 AND schema_name = $2)
		  AND coalesce((SELECT seq = $3::bigint AND hash = $4::bytea AND key_id = $5::text FROM `+table+`
		                ORDER BY seq DESC LIMIT 1), $3::bigint = 0)`,
			tenant, schema, head.seq, head.hash, head.keyID,
			r.Seq, r.At, r.Sub, r.Op, r.Query, r.Policy, r.ChunkIDs, r.Considered, r.ExcludedByEntitlement,
			r.ExcludedByFreshness, r.Degraded, r.IndexVersion, r.RequestID, r.KeyID, r.PrevHash, r.Hash)
		return
	}
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
		return 0, pgexec.Classify(err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a failed transaction answers ROLLBACK.
		return 0, fmt.Errorf("audit batch: the transaction ended with %s, not COMMIT", tag)
	}
	return insert.RowsAffected(), nil
}
