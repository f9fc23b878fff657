package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres/internal/pgtest"
)

// statementLog records every statement the pool's connections send (BEGIN,
// COMMIT and ROLLBACK included), and a batch of statements, sent in one
// round trip, as one entry.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sql []string
	for _, q := range d.Batch.QueuedQueries {
		sql = append(sql, strings.Join(strings.Fields(q.SQL), " "))
	}
	l.sql = append(l.sql, "batch: "+strings.Join(sql, "; "))
	return ctx
}

func (l *statementLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// during returns the statements fn sent.
func (l *statementLog) during(t *testing.T, fn func() error) []string {
	t.Helper()
	l.mu.Lock()
	start := len(l.sql)
	l.mu.Unlock()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.sql[start:]...)
}

// testDatabase creates a migrated database for one test (pgtest.Database).
func testDatabase(t *testing.T) string {
	t.Helper()
	return pgtest.Database(t)
}

// TestStatementsPerQuery counts the statements of one query on each path,
// so that a regression to repeated reads (the registry, the stats row) fails.
// Every count includes BEGIN and COMMIT (or ROLLBACK) where there is a
// transaction; the first query of each case warms the connection and the
// cache.
func TestStatementsPerQuery(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	setup, err := Open(ctx, dbURL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(setup.Close)
	for _, scope := range []bm25.Scope{bm25.ScopeEntitled, bm25.ScopeTenant} {
		st := index.DefaultSettings()
		st.Statistics = scope
		if _, err := setup.CreateTenant(ctx, string(scope), st); err != nil {
			t.Fatal(err)
		}
		for i, text := range []string{"wire hold for review", "release the wire hold today", "quarterly fee schedule"} {
			doc := cordontype.Document{Tenant: string(scope), DocID: fmt.Sprintf("d%d", i), Text: text, Classification: cordontype.Public}
			if _, err := setup.Put(ctx, doc); err != nil {
				t.Fatal(err)
			}
		}
	}
	rank := func(s *Store, tenant string) func() error {
		return func() error {
			toks := analysis.Tokenize("wire hold")
			req := retrieval.RankRequest{
				Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}},
				Tokens:    toks, Terms: analysis.TokenSet("wire hold"), NowTick: 10, TopN: 10,
			}
			rk, _, err := s.RankVersion(ctx, req)
			if err == nil && tenant != "nobody" && (len(rk.Lexical) == 0 || len(rk.Dense) == 0) {
				err = fmt.Errorf("rank %s: %d lexical, %d dense hits; want some of each", tenant, len(rk.Lexical), len(rk.Dense))
			}
			return err
		}
	}
	idf := func(s *Store, tenant string) func() error {
		return func() error {
			_, err := s.IDF(ctx, cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}}, []string{"wire", "fee"})
			return err
		}
	}
	load := func(s *Store, tenant string) func() error {
		return func() error {
			_, _, err := s.LoadChunks(ctx, cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}}, []string{"d0::0"})
			return err
		}
	}
	n := 0
	write := func(tenant string) func() error {
		return func() error {
			n++
			_, err := setup.Put(ctx, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("w%d", n), Text: "a new wire", Classification: cordontype.Public})
			return err
		}
	}
	tests := []struct {
		name    string
		cache   int64
		noTexts bool // the cache keeps no texts (Options.cacheNoTexts)
		// before runs first, uncounted (after one warming call of query).
		before func(s *Store) func() error
		query  func(s *Store) func() error
		want   int
	}{
		// BEGIN, tenant and stats, label_stats, postings and column blocks
		// (a batch of three statements: the postings, the blocks, their
		// dimension slices), texts, COMMIT.
		{name: "sql/entitled", query: func(s *Store) func() error { return rank(s, "entitled") }, want: 6},
		// BEGIN, tenant and stats, postings and column blocks, texts, COMMIT.
		{name: "sql/tenant", query: func(s *Store) func() error { return rank(s, "tenant") }, want: 5},
		// BEGIN, tenant and stats, ROLLBACK.
		{name: "sql/unknown tenant", query: func(s *Store) func() error { return rank(s, "nobody") }, want: 3},
		// BEGIN, tenant and stats, label_stats, postings and column blocks,
		// COMMIT.
		{name: "sql/idf", query: func(s *Store) func() error { return idf(s, "entitled") }, want: 5},
		// BEGIN, tenant and stats, chunks, COMMIT.
		{name: "load chunks", query: func(s *Store) func() error { return load(s, "entitled") }, want: 4},
		// Tenant and stats.
		{name: "cache/current", cache: 1 << 30, query: func(s *Store) func() error { return rank(s, "entitled") }, want: 1},
		// Tenant and stats; the hits' texts (fillTexts).
		{name: "cache/current, no texts", cache: 1 << 30, noTexts: true, query: func(s *Store) func() error { return rank(s, "entitled") }, want: 2},
		// Tenant and stats: no such tenant, nothing more to read.
		{name: "cache/unknown tenant", cache: 1 << 30, query: func(s *Store) func() error { return rank(s, "nobody") }, want: 1},
		{name: "cache/current idf", cache: 1 << 30, query: func(s *Store) func() error { return idf(s, "entitled") }, want: 1},
		// Tenant and stats; BEGIN, tenant and stats, oldest change,
		// changed ids, changed documents, COMMIT.
		{name: "cache/after a write", cache: 1 << 30, before: func(*Store) func() error { return write("entitled") },
			query: func(s *Store) func() error { return rank(s, "entitled") }, want: 7},
		// The same, and the hits' texts before COMMIT.
		{name: "cache/after a write, no texts", cache: 1 << 30, noTexts: true, before: func(*Store) func() error { return write("entitled") },
			query: func(s *Store) func() error { return rank(s, "entitled") }, want: 8},
		// Tenant and stats; then the SQL path: BEGIN, tenant and stats,
		// label_stats, postings and column blocks, texts, COMMIT.
		{name: "cache/over budget", cache: 1, query: func(s *Store) func() error { return rank(s, "entitled") }, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &statementLog{}
			s, err := Open(ctx, dbURL, Options{CacheBytes: tt.cache, MaxConns: 1, tracer: log, cacheNoTexts: tt.noTexts})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			log.during(t, tt.query(s))
			if tt.before != nil {
				log.during(t, tt.before(s))
			}
			got := log.during(t, tt.query(s))
			if len(got) != tt.want {
				t.Errorf("%d statements, want %d:\n  %s", len(got), tt.want, strings.Join(got, "\n  "))
			}
		})
	}
}
