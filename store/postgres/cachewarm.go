package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// WarmCache starts loading, in the background, the tenants used most
// recently (by the time of their newest audit record: a retrieve, ground or
// assemble), the most recent first, one at a time, until one does not fit
// the budget beside those already loaded; tenants with no audit record are
// not loaded. Loading into an empty budget evicts nothing: the tenants
// loaded here count as just used, so the budget's idle protection keeps
// them while the rest are loaded, and the first that does not fit ends the
// warm-up. It returns the tenants it will try, in order, and a channel
// closed when the warm-up is over; queries answer meanwhile as they always
// do (from SQL until their tenant is loaded). Without the in-memory path it
// does nothing.
func (s *Store) WarmCache(ctx context.Context) ([]string, <-chan struct{}, error) {
	done := make(chan struct{})
	if s.cache == nil {
		close(done)
		return nil, done, nil
	}
	recent, err := s.recentTenants(ctx)
	if err != nil || len(recent) == 0 {
		close(done)
		return nil, done, err
	}
	order := make([]string, len(recent))
	for i, t := range recent {
		order[i] = t.name
	}
	c := s.cache
	// Entries are made least recent first, so that the most recent tenant
	// counts as the most recently used one should anything be evicted.
	cts := make([]*cachedTenant, len(order))
	for i := len(order) - 1; i >= 0; i-- {
		cts[i] = c.entry(recent[i].schema, true)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		close(done)
		return nil, done, nil
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(done)
		for i, name := range order {
			ct := cts[i]
			c.mu.Lock()
			if c.closed || c.ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			if ct.loading {
				c.mu.Unlock()
				continue // a query started its load already
			}
			ct.loading = true
			c.mu.Unlock()
			if !s.loadMarked(name, ct) {
				ct.mu.RLock()
				loaded := ct.x != nil
				ct.mu.RUnlock()
				if !loaded {
					return // it did not fit (or failed): the budget is full
				}
			}
		}
	}()
	return order, done, nil
}

// usedTenant is a tenant and the time of its newest audit record.
type usedTenant struct {
	name, schema string
	at           time.Time
}

// recentTenants lists the registered tenants with at least one audit
// record, the most recently audited first (ties by name).
func (s *Store) recentTenants(ctx context.Context) ([]usedTenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, schema_name FROM cordon.tenants`)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", classify(err))
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usedTenant, error) {
		var t usedTenant
		return t, r.Scan(&t.name, &t.schema)
	})
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", classify(err))
	}
	var out []usedTenant
	for _, t := range ts {
		err := s.pool.QueryRow(ctx, `SELECT at FROM `+pgx.Identifier{t.schema, "audit"}.Sanitize()+` ORDER BY seq DESC LIMIT 1`).Scan(&t.at)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tenant %q: newest audit record: %w", t.name, classify(err))
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b usedTenant) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		if a.name < b.name {
			return -1
		}
		return 1
	})
	return out, nil
}
