package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
)

// cache keeps tenants' indexes in process memory for the in-memory query
// path; this file holds its mechanics, and query.go decides when to use it.
// Postgres stays the source of truth: every query reads the tenant's
// stats.version in its own snapshot and brings the cached index to exactly
// that version (reading the documents changed since, from the change log)
// before ranking, so a query never sees older state than a SQL query in the
// same snapshot would. Loads read the stored chunk rows (cacheload.go), so
// the cached chunks and vectors are the stored ones and the terms those
// index.Prepare gave the write.
//
// # Budget
//
// used counts the bytes of every cached index plus what loads in progress
// have reserved, and never exceeds budget: a load reserves each document's
// bytes before it adds the document, evicting least recently used tenants
// to make room, and gives up (the tenant is ranked in SQL) when the room
// cannot be made. A tenant's bytes change only with both its lock and the
// cache's held.
//
// # Loads
//
// With background loads (Options.CacheLoadInBackground), a query that finds
// its tenant not loaded starts a load and is ranked in SQL without waiting:
// one load per tenant at a time, at most loadSlots at once. A load reads the
// tenant in a read-only snapshot of its own and installs the index at that
// snapshot's version, unless the cache already holds that version or a
// later one; queries at a later version bring it forward from the change
// log as usual. Without background loads the query loads its tenant itself,
// in its own snapshot, and waits.
type cache struct {
	budget     int64
	background bool
	// slots bounds the loads running at once (background loads only).
	slots chan struct{}
	// hook, when set, runs in a background load after its snapshot read
	// the stats row, before the documents (tests hold a load there).
	hook func(tenant string)
	// minIdle is how long a tenant must have gone unqueried before it may
	// be evicted to make room for another (negative: no minimum).
	minIdle time.Duration
	// dropTexts builds every index without texts, whether or not the
	// tenant would fit with them (tests).
	dropTexts bool

	mu      sync.Mutex
	tenants map[string]*cachedTenant
	clock   int64 // LRU clock
	used    int64 // bytes held and reserved, <= budget
	peak    int64 // the largest used so far
	closed  bool  // no more background loads start

	loads, failures, evictions int64 // under mu
	declined                   int64 // under mu
	// seenBytes and seenChunks sum the indexes loaded so far: their ratio
	// estimates a tenant's size before its load.
	seenBytes, seenChunks  int64
	loadTime               time.Duration
	memAnswers, sqlAnswers atomic.Int64

	ctx    context.Context // cancelled by close: background loads stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // background loads
}

// loadSlots is how many background loads may run at once. A load already
// decodes its chunks on every core, so more would only queue for
// the CPUs and hold more of the budget reserved.
const loadSlots = 2

// evictMinIdle is how long a tenant must have gone unqueried before it may
// be evicted to make room for another tenant. When the tenants in use do not
// all fit, evicting one that is still queried only to load another makes
// the two take turns: every query pays for a load and is still answered in
// SQL (measured 2026-12-02 with 100 tenants and a budget for 24: 304 loads
// for 1,000 queries, 2.6 times the CPU per query of the SQL path). So a tenant
// that would need such an eviction is not loaded; it is ranked in SQL, and
// loaded once room frees up (an index idle this long, or a larger budget).
const evictMinIdle = 30 * time.Second

// maxInlineChanges is how many changed documents a query reads
// itself to bring a cached index forward. With background loads, a tenant
// further behind is brought forward by a background load, and the query is
// ranked in SQL meanwhile.
const maxInlineChanges = 256

type cachedTenant struct {
	mu      sync.RWMutex
	x       *memindex.Index
	version int64
	// built is the incarnation x was built from: x answers only queries of
	// that incarnation. A tenant dropped and created again is another
	// incarnation (it starts over at version 0), so its old index can never
	// pass for the new one. built is set with x by install alone and
	// cleared with it by drop: no other path may relabel an index.
	built    incarnation
	settings index.Settings
	// bytes is the accounted size of x (in cache.used); changed only with
	// both mu and cache.mu held.
	bytes   int64
	lastUse int64 // under cache.mu
	// lastUsed is when the tenant was last queried, and retryAt when a
	// load that found no room may be tried again (both under cache.mu).
	lastUsed, retryAt time.Time
	// tooBig records that incarnation tooBigOf of the tenant exceeded the
	// budget at this chunk count; it is retried only once it has shrunk.
	// It says nothing of x.
	tooBig   int64
	tooBigOf incarnation
	// loading is set while a background load of the tenant runs (under
	// cache.mu).
	loading bool
}

func newCache(budget int64, background bool, minIdle time.Duration) *cache {
	ctx, cancel := context.WithCancel(context.Background())
	if minIdle == 0 {
		minIdle = evictMinIdle
	}
	return &cache{budget: budget, background: background, slots: make(chan struct{}, loadSlots), minIdle: minIdle,
		tenants: make(map[string]*cachedTenant), ctx: ctx, cancel: cancel}
}

// close stops background loads and waits for them to end.
func (c *cache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// CacheStats reports the in-memory query path's use of its budget and its
// work since the store was opened.
type CacheStats struct {
	// Budget is the bound of Bytes; 0 when the in-memory path is off.
	Budget int64
	// Bytes is what the cached indexes and the loads in progress hold, by
	// the store's accounting; never more than Budget.
	Bytes int64
	// PeakBytes is the largest Bytes so far.
	PeakBytes int64
	// Tenants is the number of tenants with an index in memory.
	Tenants int
	// Loading is the number of background loads in progress.
	Loading int
	// Loads counts the completed loads of a whole tenant, LoadFailures
	// those that ended without an index (the tenant did not fit, or an
	// error), and LoadTime is the time both took.
	Loads, LoadFailures int64
	LoadTime            time.Duration
	// Evictions counts the indexes dropped to make room for others.
	Evictions int64
	// LoadsDeclined counts loads not started because the tenant would not
	// fit without evicting tenants queried in the last 30 seconds (see
	// evictMinIdle): a budget smaller than the tenants in use.
	LoadsDeclined int64
	// MemoryAnswers and SQLAnswers count the queries answered on the
	// in-memory index and, with the path on, in SQL.
	MemoryAnswers, SQLAnswers int64
}

// CacheStats returns the in-memory query path's figures; zero when it is
// off.
func (s *Store) CacheStats() CacheStats {
	if s.cache == nil {
		return CacheStats{}
	}
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	st := CacheStats{Budget: c.budget, Bytes: c.used, PeakBytes: c.peak, Loads: c.loads, LoadFailures: c.failures,
		LoadTime: c.loadTime, Evictions: c.evictions, LoadsDeclined: c.declined, MemoryAnswers: c.memAnswers.Load(), SQLAnswers: c.sqlAnswers.Load()}
	for _, ct := range c.tenants {
		if ct.bytes > 0 {
			st.Tenants++
		}
		if ct.loading {
			st.Loading++
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
	ct.lastUsed = time.Now()
	return ct
}

// evictable reports whether ct may be evicted for keep at now (c.mu is
// held): it holds an index and has not been queried for minIdle.
func (c *cache) evictable(ct, keep *cachedTenant, now time.Time) bool {
	return ct != keep && ct.bytes > 0 && (c.minIdle < 0 || now.Sub(ct.lastUsed) >= c.minIdle)
}

// admit reports whether a load of n chunks of dims dimensions for ct can
// find room, counting the bytes of tenants it may evict, and, when it
// cannot, declines it: ct is not loaded again for minIdle. The size is
// estimated from the indexes loaded so far (before any, from the
// chunks alone, which is low).
func (c *cache) admit(ct *cachedTenant, dims int, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Before(ct.retryAt) {
		return false
	}
	need := bytesPerChunk(dims, 0) * n
	if c.seenChunks > 0 {
		need = max(need, n*c.seenBytes/c.seenChunks)
	}
	free := c.budget - c.used
	for _, o := range c.tenants {
		if c.evictable(o, ct, now) {
			free += o.bytes
		}
	}
	if ct.bytes > 0 {
		free += ct.bytes // its old index is replaced
	}
	if need <= free {
		return true
	}
	c.declined++
	if c.minIdle > 0 {
		ct.retryAt = now.Add(c.minIdle)
	}
	return false
}

// reserve takes n bytes of the budget for keep, evicting least recently
// used other tenants that no query is using until they fit; false when
// they cannot be made to fit (nothing is taken then). With charge, the
// bytes are added to keep's own (keep's lock is held: its index grows);
// otherwise they stay reserved for an index being built.
func (c *cache) reserve(keep *cachedTenant, n int64, charge bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var busy map[*cachedTenant]bool
	now := time.Now()
	for c.used+n > c.budget {
		var victim *cachedTenant
		for _, ct := range c.tenants {
			if c.evictable(ct, keep, now) && !busy[ct] && (victim == nil || ct.lastUse < victim.lastUse) {
				victim = ct
			}
		}
		if victim == nil {
			return false
		}
		if !victim.mu.TryLock() {
			if busy == nil {
				busy = make(map[*cachedTenant]bool)
			}
			busy[victim] = true // a query is reading it
			continue
		}
		c.used -= victim.bytes
		victim.x, victim.bytes = nil, 0
		c.evictions++
		victim.mu.Unlock()
	}
	c.used += n
	c.peak = max(c.peak, c.used)
	if charge {
		keep.bytes += n
	}
	return true
}

// release gives back n reserved bytes.
func (c *cache) release(n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.used -= n
	c.mu.Unlock()
}

// drop removes ct's index and gives back its bytes (ct's lock is held);
// ct then answers no incarnation until install.
func (c *cache) drop(ct *cachedTenant) {
	c.mu.Lock()
	c.used -= ct.bytes
	ct.bytes = 0
	c.mu.Unlock()
	ct.x, ct.version, ct.built = nil, 0, incarnation{}
}

// serves reports whether ct holds an index built from incarnation inc
// with settings that build the same index as s (ct's lock is held, read
// or write).
func (ct *cachedTenant) serves(inc incarnation, s index.Settings) bool {
	return ct.x != nil && ct.built == inc && sameIndex(ct.settings, s)
}

// knownTooBig reports whether incarnation inc with n chunks is known not
// to fit the budget (ct's lock is held).
func (ct *cachedTenant) knownTooBig(inc incarnation, n int64) bool {
	return ct.tooBig > 0 && ct.tooBigOf == inc && n >= ct.tooBig
}

// markTooBig records that incarnation inc did not fit at n chunks (ct's
// lock is held). Any index of another incarnation is dropped: it can
// never answer again.
func (c *cache) markTooBig(ct *cachedTenant, inc incarnation, n int64) {
	if ct.x != nil && ct.built != inc {
		c.drop(ct)
	}
	ct.tooBig, ct.tooBigOf = max(n, 1), inc
}

// install makes x, built with reserved bytes, ct's index at version (ct's
// lock is held), giving back the bytes of the index it replaces.
func (c *cache) install(ct *cachedTenant, x *memindex.Index, reserved, version int64, inc incarnation, settings index.Settings) {
	c.mu.Lock()
	c.used -= ct.bytes
	ct.bytes = reserved
	c.seenBytes += reserved
	c.seenChunks += int64(x.Len())
	c.mu.Unlock()
	ct.x, ct.version, ct.built, ct.settings = x, version, inc, settings
	ct.tooBig, ct.tooBigOf = 0, incarnation{}
}

// forget empties the schema's cache entry, giving back its bytes: the next
// query reloads it.
func (c *cache) forget(schema string) {
	ct := c.entry(schema, false)
	if ct == nil {
		return
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c.drop(ct)
	ct.tooBig, ct.tooBigOf = 0, incarnation{}
}

// bytesPerChunk is the least a cached chunk of dims dimensions and terms
// distinct terms holds (memindex.SlotBytes): its entries in the index's
// per-slot arrays, its term ids and postings, and its share of the
// bitmaps and of a query's scratch, its strings and its terms' own
// dictionary entries aside. Before a load it bounds the tenant's size from
// below (admit, refresh); the load itself charges what the index counts of
// its memory (memindex.Index.Bytes: the dictionary and strings too). For
// the bench corpus (256 dimensions, 187 distinct terms a chunk under the
// default settings) the charge is about the live heap (see docs/benchmarks.md); for adversarial corpora
// (long unique tokens, many tiny documents, huge documents, non-Latin
// text) within 20% of it (TestLoadChargeWithinLiveHeap).
func bytesPerChunk(dims int, terms int) int64 {
	return memindex.SlotBytes(dims, terms)
}

// docBytes is what adding d's chunks adds to an index, terms being what
// its terms new to the index add (an estimate reserved before the add; the
// charge is settled from the index's own count once the changes are in).
func docBytes(dims int, d *storedDoc, terms int64) int64 {
	n := memindex.DocBytes(d.docID, len(d.pcs)) + terms
	for i := range d.pcs {
		n += memindex.ChunkBytes(dims, &d.pcs[i])
	}
	return n
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
	if ct.x == nil || ct.built != st.incarnation || ct.settings != t.settings || ct.version < st.version {
		return 0, false
	}
	use(ct.x)
	c.memAnswers.Add(1)
	return ct.version, true
}

// use runs use on the cached index of t, brought to the version of st
// (tx's snapshot's stats row), under the read lock. ok is false when the
// caller must use the SQL path (the tenant does not fit the budget, is
// being loaded in the background, or another query moved the cache past
// this query's snapshot). load is set when the caller should start a
// background load of the tenant (startLoad).
func (c *cache) use(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, use func(*memindex.Index)) (ok, load bool, err error) {
	ct := c.entry(t.schema, true)
	current := func() bool {
		return ct.x != nil && ct.version == st.version && ct.built == st.incarnation && ct.settings == t.settings
	}
	ct.mu.RLock()
	if !current() {
		ct.mu.RUnlock()
		ct.mu.Lock()
		load, err = c.refresh(ctx, tx, t, ct, st.version, st.nChunks, st.incarnation)
		ct.mu.Unlock()
		if err != nil {
			return false, false, err
		}
		ct.mu.RLock()
		if !current() {
			ct.mu.RUnlock()
			c.sqlAnswers.Add(1)
			return false, load, nil
		}
	}
	use(ct.x)
	ct.mu.RUnlock()
	c.memAnswers.Add(1)
	return true, false, nil
}

// refresh brings ct to version (with the write lock held). It leaves ct
// unusable (x nil) when the tenant does not fit, and untouched when ct is
// already newer than this snapshot. With background loads it loads nothing
// whole: load asks the caller to start a background load instead.
func (c *cache) refresh(ctx context.Context, tx pgx.Tx, t tenantInfo, ct *cachedTenant, version, n int64, inc incarnation) (load bool, err error) {
	if ct.x != nil && ct.built != inc {
		// The index is of a tenant that was dropped (or moved): it can
		// never answer again.
		c.drop(ct)
	}
	if ct.serves(inc, t.settings) && ct.settings != t.settings {
		// Only the statistics scope changed: it is a query-time choice
		// over the same index, so nothing is reloaded.
		ct.x.SetStatistics(t.settings.Statistics)
		ct.settings = t.settings
	}
	same := ct.serves(inc, t.settings)
	switch {
	case same && ct.version == version:
		return false, nil // another query refreshed it
	case same && ct.version > version:
		return false, nil // newer than this snapshot: this query uses SQL
	case ct.knownTooBig(inc, n):
		return false, nil
	}
	if bytesPerChunk(t.settings.Dims, 0)*n > c.budget {
		c.drop(ct)
		c.markTooBig(ct, inc, n)
		return false, nil
	}
	if same {
		limit := -1
		if c.background {
			limit = maxInlineChanges
		}
		ok, err := c.applyChanges(ctx, tx, t, ct, version, limit)
		if err != nil {
			// Some changed documents may be in the index and others not:
			// it matches no version now, so nothing may answer from it
			// until a full reload.
			c.drop(ct)
			if errors.Is(err, errTooBig) {
				return c.background, nil
			}
			return false, err
		}
		if ok {
			return false, nil
		}
	}
	if c.background {
		return true, nil
	}
	if !c.admit(ct, t.settings.Dims, n) {
		return false, nil
	}
	// The index is replaced whole: its bytes are free for the new one.
	c.drop(ct)
	start := time.Now()
	x, reserved, tooBig, err := c.build(ctx, tx, t, n)
	c.counted(start, x != nil)
	if tooBig {
		c.markTooBig(ct, inc, n)
	}
	if err != nil || x == nil {
		return false, err
	}
	c.install(ct, x, reserved, version, inc, t.settings)
	return false, nil
}

// counted records one load of a whole tenant, begun at start.
func (c *cache) counted(start time.Time, installed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadTime += time.Since(start)
	if installed {
		c.loads++
	} else {
		c.failures++
	}
}

// build reads every document of t in tx's snapshot into a new index,
// reserving its bytes as it goes (evicting other tenants' indexes, never
// one of t's). x is nil when the tenant does not fit; tooBig then says it
// exceeds the budget by itself. build touches no cache entry: the caller
// installs x, or records tooBig, for the incarnation it read.
//
// The index keeps the chunks' texts, so that a query answered from memory
// reads nothing more, unless the tenant would not fit with them: then it
// is built again without them (memindex.Index.DropTexts), and its queries
// read their hits' texts by row id (fillTexts), one statement more than
// from an index with texts, and still far less than the SQL path.
func (c *cache) build(ctx context.Context, tx pgx.Tx, t tenantInfo, n int64) (x *memindex.Index, reserved int64, tooBig bool, err error) {
	x, reserved, tooBig, err = c.buildFrom(ctx, tx, t, n, c.dropTexts)
	if err == nil && tooBig && !c.dropTexts {
		return c.buildFrom(ctx, tx, t, n, true)
	}
	return x, reserved, tooBig, err
}

// buildFrom is build in one pass over t's chunk rows, keeping no texts
// when dropTexts is set.
func (c *cache) buildFrom(ctx context.Context, tx pgx.Tx, t tenantInfo, n int64, dropTexts bool) (*memindex.Index, int64, bool, error) {
	rows, err := tx.Query(ctx, chunkRowsSQL(t, ""), binaryRows)
	if err != nil {
		return nil, 0, false, classify(err)
	}
	return c.buildRows(rows, t, n, dropTexts)
}

// buildRows is build over the rows of its chunkRowsSQL query, into an index
// that keeps no texts when dropTexts is set.
func (c *cache) buildRows(rows pgx.Rows, t tenantInfo, n int64, dropTexts bool) (x *memindex.Index, reserved int64, tooBig bool, err error) {
	var building cachedTenant // reserve's keep: evicts any other entry
	builder := memindex.NewBuilder(t.settings, int(n))
	if dropTexts {
		builder.DropTexts()
	} else {
		builder.PackedTexts()
	}
	err = forEachStoredDoc(rows, t, false, !dropTexts, func(d *storedDoc) error {
		if dropTexts {
			d.dropTexts()
		}
		b := docBytes(t.settings.Dims, d, d.termBytes)
		if !c.reserve(&building, b, false) {
			tooBig = reserved+b > c.budget
			return errTooBig
		}
		reserved += b
		builder.AddCounted(d.docID, d.pcs, d.vocab, d.ids)
		return nil
	})
	if err == nil {
		x = builder.Index()
		var count int64
		if count, err = c.settleBuild(&building, x, reserved); err != nil {
			tooBig = count > c.budget
			reserved = 0 // settleBuild gave it back
		} else {
			reserved = count
		}
	}
	if err != nil {
		c.release(reserved)
		if errors.Is(err, errTooBig) {
			return nil, 0, tooBig, nil
		}
		return nil, 0, false, err
	}
	return x, reserved, false, nil
}

// startLoad loads tenant (whose cache entry is that of schema) in the
// background unless a load of it runs already or the cache is closing.
func (s *Store) startLoad(tenant, schema string) {
	c := s.cache
	ct := c.entry(schema, true)
	c.mu.Lock()
	if ct.loading || c.closed || time.Now().Before(ct.retryAt) {
		c.mu.Unlock()
		return
	}
	ct.loading = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		s.loadMarked(tenant, ct)
	}()
}

// loadMarked loads tenant into ct, whose loading flag the caller set, and
// clears the flag. It reports whether an index was installed.
func (s *Store) loadMarked(tenant string, ct *cachedTenant) bool {
	c := s.cache
	start, ok, tried := s.load(tenant, ct)
	if tried {
		c.counted(start, ok)
	}
	c.mu.Lock()
	ct.loading = false
	c.mu.Unlock()
	return ok
}

// load reads tenant in a read-only snapshot of its own and installs its
// index in ct at that snapshot's version, unless ct holds that version or
// a later one by then. ok is false when no index was installed; tried is
// false when none was needed (ct was current, or known not to fit) or the
// store closed first.
func (s *Store) load(tenant string, ct *cachedTenant) (start time.Time, ok, tried bool) {
	c := s.cache
	select {
	case c.slots <- struct{}{}:
	case <-c.ctx.Done():
		return time.Now(), false, false
	}
	defer func() { <-c.slots }()
	start = time.Now()
	installed := false
	_, err := s.inSnapshot(c.ctx, tenant, func(tx pgx.Tx, t tenantInfo, st statsRow) error {
		ct.mu.RLock()
		have := ct.serves(st.incarnation, t.settings) && ct.version >= st.version
		tooBig := ct.knownTooBig(st.incarnation, st.nChunks)
		ct.mu.RUnlock()
		if have || tooBig {
			return nil
		}
		if bytesPerChunk(t.settings.Dims, 0)*st.nChunks > c.budget {
			ct.mu.Lock()
			c.markTooBig(ct, st.incarnation, st.nChunks)
			ct.mu.Unlock()
			return nil
		}
		if !c.admit(ct, t.settings.Dims, st.nChunks) {
			return nil
		}
		tried = true
		if c.hook != nil {
			c.hook(tenant)
		}
		// The index ct holds is behind this snapshot, or of another
		// incarnation or settings: no query at this version or later can
		// use it, and admit counted its bytes as free, so it is dropped
		// now. (Kept, it could not be evicted for the new one: the query
		// that started this load has just marked ct used.)
		ct.mu.Lock()
		if ct.x != nil && !(ct.serves(st.incarnation, t.settings) && ct.version >= st.version) {
			c.drop(ct)
		}
		ct.mu.Unlock()
		// ct's lock is not held while building: a query may bring an
		// index forward meanwhile, which is checked below.
		x, reserved, tooBig, err := c.build(c.ctx, tx, t, st.nChunks)
		if err != nil {
			return err
		}
		ct.mu.Lock()
		defer ct.mu.Unlock()
		if x == nil {
			if tooBig {
				c.markTooBig(ct, st.incarnation, st.nChunks)
			}
			return nil
		}
		if ct.serves(st.incarnation, t.settings) && ct.version >= st.version {
			c.release(reserved) // a query brought ct this far meanwhile
			return nil
		}
		c.install(ct, x, reserved, st.version, st.incarnation, t.settings)
		installed = true
		return nil
	})
	_ = err // the next query of the tenant tries again
	return start, installed, tried || err != nil
}

// sameIndex reports whether a and b build the same index: they may differ
// in the statistics scope only.
func sameIndex(a, b index.Settings) bool {
	a.Statistics = b.Statistics
	return a == b
}

// applyChanges reads the documents changed between ct.version and
// version (ct's lock is held), reserving the bytes they add. ok is false
// when the change log no longer reaches back to ct.version, or more than
// limit documents changed (limit < 0: no limit); the caller reloads. An
// error wrapping errTooBig means the added bytes did not fit.
func (c *cache) applyChanges(ctx context.Context, tx pgx.Tx, t tenantInfo, ct *cachedTenant, version int64, limit int) (bool, error) {
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
	if limit >= 0 && len(ids) > limit {
		return false, nil
	}
	rows, err = tx.Query(ctx, chunkRowsSQL(t, ` WHERE c.doc_id = ANY($1)`), binaryRows, ids)
	if err != nil {
		return false, classify(err)
	}
	seen := make(map[string]bool, len(ids))
	// The texts are packed on the decoding workers, in parallel, and
	// reserved as the index keeps them.
	pack := !ct.x.DropsTexts()
	err = forEachStoredDoc(rows, t, true, pack, func(d *storedDoc) error {
		seen[d.docID] = true
		if !pack {
			d.dropTexts()
		}
		if !c.reserve(ct, docBytes(t.settings.Dims, d, ct.x.NewTermBytes(d.pcs)), true) {
			return errTooBig
		}
		ct.x.PutPacked(d.docID, d.pcs)
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
	if !c.settle(ct) {
		return false, errTooBig
	}
	ct.version = version
	return true, nil
}
