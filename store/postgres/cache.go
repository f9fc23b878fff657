package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/retrieval"
)

// cache keeps tenants' indexes in process memory for the in-memory query
// path. Postgres stays the source of truth: every query reads the tenant's
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
	mu       sync.RWMutex
	x        *memindex.Index
	version  int64
	settings index.Settings
	bytes    int64
	lastUse  int64
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

func (c *cache) entry(schema string) *cachedTenant {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.tenants[schema]
	if ct == nil {
		ct = &cachedTenant{}
		c.tenants[schema] = ct
	}
	c.clock++
	ct.lastUse = c.clock
	return ct
}

// bytesPerChunk estimates one cached chunk's memory: its int8 vector column
// entries, per-slot arrays and chunk record, and its distinct terms with their
// postings.
func bytesPerChunk(dims int, terms int) int64 {
	return int64(dims) + 320 + int64(terms)*40
}

// rank answers req from the cached index when it can. ok is false when the
// caller must use the SQL path (the tenant does not fit the budget, or
// another query moved the cache past this query's snapshot).
func (c *cache) rank(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest) (retrieval.Rankings, bool, error) {
	var version, n int64
	if err := tx.QueryRow(ctx, `SELECT version, n_chunks FROM `+t.tables.stats).Scan(&version, &n); err != nil {
		return retrieval.Rankings{}, false, classify(err)
	}
	ct := c.entry(t.schema)
	ct.mu.RLock()
	current := ct.x != nil && ct.version == version && ct.settings == t.settings
	if !current {
		ct.mu.RUnlock()
		ct.mu.Lock()
		err := c.refresh(ctx, tx, t, ct, version, n)
		ct.mu.Unlock()
		if err != nil {
			return retrieval.Rankings{}, false, err
		}
		ct.mu.RLock()
		current = ct.x != nil && ct.version == version && ct.settings == t.settings
		if !current {
			ct.mu.RUnlock()
			return retrieval.Rankings{}, false, nil
		}
	}
	rk := ct.x.Rank(req)
	ct.mu.RUnlock()
	if err := fillTexts(ctx, tx, t, req, &rk); err != nil {
		return retrieval.Rankings{}, false, err
	}
	return rk, true, nil
}

// refresh brings ct to version (with the write lock held). It leaves ct
// unusable (x nil) when the tenant does not fit, and untouched when ct is
// already newer than this snapshot.
func (c *cache) refresh(ctx context.Context, tx pgx.Tx, t tenantInfo, ct *cachedTenant, version, n int64) error {
	switch {
	case ct.x != nil && ct.settings == t.settings && ct.version == version:
		return nil // another query refreshed it
	case ct.x != nil && ct.settings == t.settings && ct.version > version:
		return nil // newer than this snapshot: this query uses SQL
	case ct.tooBig > 0 && n >= ct.tooBig:
		return nil
	}
	if bytesPerChunk(t.settings.Dims, 0)*n > c.budget {
		ct.tooBig = max(n, 1)
		return nil
	}
	if ct.x != nil && ct.settings == t.settings {
		ok, err := applyChanges(ctx, tx, t, ct, version)
		if err != nil || ok {
			return err
		}
	}
	x := memindex.New(t.settings)
	rows, err := tx.Query(ctx, `SELECT doc_id, text, classification, barriers, as_of_tick FROM `+t.tables.documents)
	if err != nil {
		return classify(err)
	}
	var bytes int64
	err = forEachDoc(rows, t, func(doc *cordontype.Document, pcs []index.PreparedChunk) error {
		x.Put(doc.DocID, pcs, true)
		for i := range pcs {
			bytes += bytesPerChunk(t.settings.Dims, len(pcs[i].Terms))
		}
		if bytes > c.budget {
			return errTooBig
		}
		return nil
	})
	if errors.Is(err, errTooBig) {
		ct.x, ct.bytes, ct.tooBig = nil, 0, max(n, 1)
		return nil
	}
	if err != nil {
		return err
	}
	ct.x, ct.version, ct.settings, ct.bytes, ct.tooBig = x, version, t.settings, bytes, 0
	c.evict(ct)
	return nil
}

var errTooBig = errors.New("tenant exceeds the cache budget")

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
	rows, err = tx.Query(ctx, `SELECT doc_id, text, classification, barriers, as_of_tick FROM `+t.tables.documents+` WHERE doc_id = ANY($1)`, ids)
	if err != nil {
		return false, classify(err)
	}
	seen := make(map[string]bool, len(ids))
	err = forEachDoc(rows, t, func(doc *cordontype.Document, pcs []index.PreparedChunk) error {
		seen[doc.DocID] = true
		ct.x.Put(doc.DocID, pcs, true)
		for i := range pcs {
			ct.bytes += bytesPerChunk(t.settings.Dims, len(pcs[i].Terms))
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

// forEachDoc re-prepares each document row.
func forEachDoc(rows pgx.Rows, t tenantInfo, fn func(*cordontype.Document, []index.PreparedChunk) error) error {
	defer rows.Close()
	for rows.Next() {
		doc := cordontype.Document{Tenant: t.name}
		var class int16
		if err := rows.Scan(&doc.DocID, &doc.Text, &class, &doc.Barriers, &doc.AsOfTick); err != nil {
			return err
		}
		doc.Classification = cordontype.Classification(class)
		pcs, err := index.Prepare(&doc, t.settings)
		if err != nil {
			return fmt.Errorf("re-prepare stored document %q: %w", doc.DocID, err)
		}
		if err := fn(&doc, pcs); err != nil {
			return err
		}
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

// fillTexts loads the texts of the ranked chunks in this snapshot, with the
// pre-filter repeated in SQL.
func fillTexts(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, rk *retrieval.Rankings) error {
	ids := make([]string, 0, len(rk.Lexical)+len(rk.Dense))
	for _, h := range rk.Lexical {
		ids = append(ids, h.Chunk.ChunkID)
	}
	for _, h := range rk.Dense {
		ids = append(ids, h.Chunk.ChunkID)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT c.chunk_id, c.text FROM `+t.tables.chunks+` c
		WHERE c.chunk_id = ANY($1) AND `+visibleSQL+` AND NOT `+staleSQL,
		ids, int16(req.Principal.Clearance), req.Principal.Barriers, req.NowTick, req.MaxStaleTicks)
	if err != nil {
		return classify(err)
	}
	texts := make(map[string]string, len(ids))
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return err
		}
		texts[id] = text
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	for _, hs := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		for i := range hs {
			text, ok := texts[hs[i].Chunk.ChunkID]
			if !ok {
				return errors.New("a cached chunk is missing from its snapshot: this is a bug, please report it with a replay script")
			}
			hs[i].Chunk.Text = text
		}
	}
	return nil
}
