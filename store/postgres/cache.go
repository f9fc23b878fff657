package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
)

// cache keeps tenants' indexes in process memory for the in-memory query
// path; this file holds its mechanics, and query.go decides when to use it.
// Postgres stays the source of truth: every query reads the tenant's
// stats.version in its own snapshot and brings the cached index to exactly
// that version (re-preparing the documents changed since, from the change
// log) before ranking, so a query never sees older state than a SQL query in
// the same snapshot would. Documents are re-prepared with index.Prepare, the
// code that wrote them, so the cached chunks, terms and vectors are the
// stored ones.
type cache struct {
	budget int64

	mu      sync.Mutex
	tenants map[string]*cachedTenant
	clock   int64 // LRU clock
}

type cachedTenant struct {
	mu      sync.RWMutex
	x       *memindex.Index
	version int64
	// incarnation is the OID of the tenant's stats table: a tenant dropped
	// and created again starts over at version 0 with a new OID, so its old
	// index can never pass for the new one.
	incarnation int64
	settings    index.Settings
	bytes       int64
	lastUse     int64
	// tooBig records that the tenant exceeded the budget at this chunk count;
	// it is retried only once the tenant has shrunk.
	tooBig int64
}

func newCache(budget int64) *cache {
	return &cache{budget: budget, tenants: make(map[string]*cachedTenant)}
}

// CacheStats reports the in-memory query path's use of its budget.
type CacheStats struct {
	Budget  int64
	Bytes   int64
	Tenants int
}

// CacheStats returns the cache's size; zero when the cache is disabled.
func (s *Store) CacheStats() CacheStats {
	if s.cache == nil {
		return CacheStats{}
	}
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	st := CacheStats{Budget: c.budget}
	for _, ct := range c.tenants {
		if ct.bytes > 0 {
			st.Bytes += ct.bytes
			st.Tenants++
		}
	}
	return st
}

// entry returns the schema's cache entry, marked as just used; a missing
// one is created when create is set, else nil is returned.
func (c *cache) entry(schema string, create bool) *cachedTenant {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.tenants[schema]
	if ct == nil {
		if !create {
			return nil
		}
		ct = &cachedTenant{}
		c.tenants[schema] = ct
	}
	c.clock++
	ct.lastUse = c.clock
	return ct
}

// drop empties the schema's cache entry: the next query reloads it.
func (c *cache) drop(schema string) {
	ct := c.entry(schema, false)
	if ct == nil {
		return
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.x, ct.version, ct.incarnation, ct.bytes = nil, 0, 0, 0
}

// bytesPerChunk estimates one cached chunk's memory: its int8 vector column
// entries, per-slot arrays and chunk record, and its distinct terms with their
// postings. Chunk texts are counted on top (chunkBytes).
func bytesPerChunk(dims int, terms int) int64 {
	return int64(dims) + 320 + int64(terms)*40
}

func chunkBytes(dims int, pc *index.PreparedChunk) int64 {
	return bytesPerChunk(dims, len(pc.Terms)) + int64(len(pc.Chunk.Text))
}

// current runs use on the cached index of t, under the read lock, when it
// is of the incarnation st names and at st's version or newer (a later
// committed state), and reports the version that answered. ok is false
// when the caller must take the transactional path, which refreshes the
// cache. It sends no statement: st comes from the caller's lookup.
func (c *cache) current(t tenantInfo, st statsRow, use func(*memindex.Index)) (version int64, ok bool) {
	ct := c.entry(t.schema, false)
	if ct == nil {
		return 0, false
	}
	ct.mu.RLock()
	defer ct.mu.RUnlock()
	if ct.x == nil || ct.incarnation != st.incarnation || ct.settings != t.settings || ct.version < st.version {
		return 0, false
	}
	use(ct.x)
	return ct.version, true
}

// use runs use on the cached index of t, brought to the version of st
// (tx's snapshot's stats row), under the read lock. ok is false when the
// caller must use the SQL path (the tenant does not fit the budget, or
// another query moved the cache past this query's snapshot).
func (c *cache) use(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, use func(*memindex.Index)) (bool, error) {
	ct := c.entry(t.schema, true)
	current := func() bool {
		return ct.x != nil && ct.version == st.version && ct.incarnation == st.incarnation && ct.settings == t.settings
	}
	ct.mu.RLock()
	if !current() {
		ct.mu.RUnlock()
		ct.mu.Lock()
		err := c.refresh(ctx, tx, t, ct, st.version, st.nChunks, st.incarnation)
		ct.mu.Unlock()
		if err != nil {
			return false, err
		}
		ct.mu.RLock()
		if !current() {
			ct.mu.RUnlock()
			return false, nil
		}
	}
	use(ct.x)
	ct.mu.RUnlock()
	return true, nil
}

// refresh brings ct to version (with the write lock held). It leaves ct
// unusable (x nil) when the tenant does not fit, and untouched when ct is
// already newer than this snapshot.
func (c *cache) refresh(ctx context.Context, tx pgx.Tx, t tenantInfo, ct *cachedTenant, version, n, incarnation int64) error {
	if ct.x != nil && ct.incarnation == incarnation && ct.settings != t.settings && sameIndex(ct.settings, t.settings) {
		// Only the statistics scope changed: it is a query-time choice
		// over the same index, so nothing is reloaded.
		ct.x.SetStatistics(t.settings.Statistics)
		ct.settings = t.settings
	}
	same := ct.x != nil && ct.settings == t.settings && ct.incarnation == incarnation
	switch {
	case same && ct.version == version:
		return nil // another query refreshed it
	case same && ct.version > version:
		return nil // newer than this snapshot: this query uses SQL
	case ct.incarnation == incarnation && ct.tooBig > 0 && n >= ct.tooBig:
		return nil
	}
	if bytesPerChunk(t.settings.Dims, 0)*n > c.budget {
		ct.tooBig = max(n, 1)
		return nil
	}
	if same {
		ok, err := applyChanges(ctx, tx, t, ct, version)
		if err != nil {
			// Some changed documents may be in the index and others not:
			// it matches no version now, so nothing may answer from it
			// until a full reload.
			ct.x, ct.bytes = nil, 0
			return err
		}
		if ok {
			return nil
		}
	}
	x := memindex.New(t.settings)
	rows, err := tx.Query(ctx, docRowsSQL(t, ""))
	if err != nil {
		return classify(err)
	}
	var bytes int64
	err = forEachDoc(rows, t, func(doc *cordontype.Document, pcs []index.PreparedChunk) error {
		x.Put(doc.DocID, pcs, false)
		for i := range pcs {
			bytes += chunkBytes(t.settings.Dims, &pcs[i])
		}
		if bytes > c.budget {
			return errTooBig
		}
		return nil
	})
	if errors.Is(err, errTooBig) {
		ct.x, ct.bytes, ct.tooBig, ct.incarnation = nil, 0, max(n, 1), incarnation
		return nil
	}
	if err != nil {
		return err
	}
	ct.x, ct.version, ct.incarnation, ct.settings, ct.bytes, ct.tooBig = x, version, incarnation, t.settings, bytes, 0
	c.evict(ct)
	return nil
}

var errTooBig = errors.New("tenant exceeds the cache budget")

// sameIndex reports whether a and b build the same index: they may differ
// in the statistics scope only.
func sameIndex(a, b index.Settings) bool {
	a.Statistics = b.Statistics
	return a == b
}

// applyChanges re-prepares the documents changed between ct.version and
// version. ok is false when the change log no longer reaches back to
// ct.version (the caller reloads).
func applyChanges(ctx context.Context, tx pgx.Tx, t tenantInfo, ct *cachedTenant, version int64) (bool, error) {
	var oldest *int64
	if err := tx.QueryRow(ctx, `SELECT min(version) FROM `+t.tables.changes).Scan(&oldest); err != nil {
		return false, classify(err)
	}
	if oldest == nil || *oldest > ct.version+1 {
		return false, nil
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT doc_id FROM `+t.tables.changes+` WHERE version > $1 AND version <= $2`, ct.version, version)
	if err != nil {
		return false, classify(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, classify(err)
	}
	rows, err = tx.Query(ctx, docRowsSQL(t, ` WHERE d.doc_id = ANY($1)`), ids)
	if err != nil {
		return false, classify(err)
	}
	seen := make(map[string]bool, len(ids))
	err = forEachDoc(rows, t, func(doc *cordontype.Document, pcs []index.PreparedChunk) error {
		seen[doc.DocID] = true
		ct.x.Put(doc.DocID, pcs, false)
		for i := range pcs {
			ct.bytes += chunkBytes(t.settings.Dims, &pcs[i])
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if !seen[id] {
			ct.x.Remove(id)
		}
	}
	ct.version = version
	return true, nil
}

// docRowsSQL selects the document rows forEachDoc reads, with where (on
// documents d) appended. A tenant whose model is not hashing cannot
// recompute its vectors from the text: its rows carry the stored vectors of
// their chunks, in chunk order.
func docRowsSQL(t tenantInfo, where string) string {
	cols := `d.doc_id, d.text, d.classification, d.barriers, d.as_of_tick`
	if !t.settings.Spec().IsHash() {
		cols += `, (SELECT array_agg(c.embedding::real[] ORDER BY c.ord) FROM ` + t.tables.chunks + ` c WHERE c.doc_id = d.doc_id)`
	}
	return `SELECT ` + cols + ` FROM ` + t.tables.documents + ` d` + where
}

// storedVectors gives pcs the stored vectors vecs (one per chunk, in
// order), exact integers in float32.
func storedVectors(doc string, pcs []index.PreparedChunk, vecs [][]float32, dims int) error {
	if len(vecs) != len(pcs) {
		return fmt.Errorf("stored document %q has %d vectors for %d chunks", doc, len(vecs), len(pcs))
	}
	for i, f := range vecs {
		if len(f) != dims {
			return fmt.Errorf("stored document %q chunk %d has a vector of %d dimensions, want %d", doc, i, len(f), dims)
		}
		v := make([]int32, len(f))
		for j, x := range f {
			v[j] = int32(x)
		}
		pcs[i].Vector = v
		pcs[i].NormSq = hashembed.NormSq(v)
	}
	return nil
}

// forEachDoc re-prepares each document row on GOMAXPROCS workers (loading a
// large tenant is mostly tokenizing and hashing) and calls fn for each, in
// row order, on the calling goroutine.
func forEachDoc(rows pgx.Rows, t tenantInfo, fn func(*cordontype.Document, []index.PreparedChunk) error) error {
	defer rows.Close()
	stored := !t.settings.Spec().IsHash()
	type item struct {
		doc  cordontype.Document
		vecs [][]float32
		pcs  []index.PreparedChunk
		err  error
		done chan struct{}
	}
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan *item, 4*workers)
	order := make(chan *item, 4*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range jobs {
				it.pcs, it.err = index.Prepare(&it.doc, t.settings)
				if it.err == nil && stored {
					it.err = storedVectors(it.doc.DocID, it.pcs, it.vecs, t.settings.Dims)
				}
				if it.err != nil {
					it.err = fmt.Errorf("re-prepare stored document %q: %w", it.doc.DocID, it.err)
				}
				close(it.done)
			}
		}()
	}
	// The reader alone touches rows until it closes order; it feeds the
	// workers and records the order, and the caller consumes in that order.
	var readErr error
	var stop atomic.Bool
	go func() {
		defer close(order)
		defer close(jobs)
		for !stop.Load() && rows.Next() {
			it := &item{doc: cordontype.Document{Tenant: t.name}, done: make(chan struct{})}
			var class int16
			dest := []any{&it.doc.DocID, &it.doc.Text, &class, &it.doc.Barriers, &it.doc.AsOfTick}
			if stored {
				dest = append(dest, &it.vecs)
			}
			if readErr = rows.Scan(dest...); readErr != nil {
				return
			}
			it.doc.Classification = cordontype.Classification(class)
			jobs <- it
			order <- it
		}
	}()
	var err error
	for it := range order {
		<-it.done
		if err == nil {
			if it.err != nil {
				err = it.err
			} else {
				err = fn(&it.doc, it.pcs)
			}
		}
		if err != nil {
			stop.Store(true) // the reader stops at its next row
		}
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	return classify(rows.Err())
}

// evict drops least recently used tenants until the cache fits its budget;
// keep is never evicted.
func (c *cache) evict(keep *cachedTenant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		var total int64
		var victim *cachedTenant
		for _, ct := range c.tenants {
			total += ct.bytes
			if ct != keep && ct.bytes > 0 && (victim == nil || ct.lastUse < victim.lastUse) {
				victim = ct
			}
		}
		if total <= c.budget || victim == nil {
			return
		}
		if !victim.mu.TryLock() {
			return // in use; try again at the next load
		}
		victim.x, victim.bytes = nil, 0
		victim.mu.Unlock()
	}
}
