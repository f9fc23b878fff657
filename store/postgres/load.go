package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/migrations"
	"github.com/cordon-rag/cordon/retrieval"
)

// ErrChunkNotFound is returned by [Store.LoadChunks] when one of the asked
// chunks does not exist or the principal may not see it. Which one, and
// why, is deliberately not said: existence must not leak.
var ErrChunkNotFound = errors.New("chunk not found")

// ErrNotReady is returned by [Store.Ready] when the database is reachable but
// its migrations or tenant schemas are behind this binary.
var ErrNotReady = errors.New("database not ready")

// RankVersion ranks req (SPEC section 5, steps 2-4) and returns the tenant's
// index version (stats.version) that answered, so an audit record can cite
// exactly which index it was. An unknown tenant has no chunks and version 0.
//
// With the in-memory path enabled, a query whose tenant is cached at its
// committed version (or newer) is answered in one statement; otherwise, and
// always without the cache, everything is read in one read-only
// REPEATABLE READ snapshot, refreshing the cache on the way.
func (s *Store) RankVersion(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, int64, error) {
	out := retrieval.Funnel(req, nil, nil)
	version, err := s.read(ctx, req.Principal.Tenant,
		func(x *memindex.Index) { out = x.Rank(req) },
		func(tx pgx.Tx, t tenantInfo) (err error) {
			out, err = rankTx(ctx, tx, t, req)
			return err
		})
	if err != nil {
		return retrieval.Rankings{}, 0, fmt.Errorf("rank tenant %q: %w", req.Principal.Tenant, err)
	}
	return out, version, nil
}

// IDF implements [retrieval.Store]: each term's idf under p's statistics
// scope, read as RankVersion reads (the in-memory index when current, else
// SQL in one read-only snapshot); all zero for an unknown tenant.
func (s *Store) IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	out := make([]float64, len(terms))
	_, err := s.read(ctx, p.Tenant,
		func(x *memindex.Index) { out = x.IDF(p, terms) },
		func(tx pgx.Tx, t tenantInfo) (err error) {
			out, err = idfTx(ctx, tx, t, p, terms)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("idf tenant %q: %w", p.Tenant, err)
	}
	return out, nil
}

// read answers one query of tenant on one of the two query paths and
// returns the index version that answered: mem on the cached index when it
// is current (see cache.fastUse and cache.use), else sql, in one read-only
// REPEATABLE READ snapshot. Neither runs for an unknown tenant (version 0):
// the caller's zero answer stands.
func (s *Store) read(ctx context.Context, tenant string, mem func(*memindex.Index), sql func(pgx.Tx, tenantInfo) error) (int64, error) {
	if s.cache != nil {
		if version, ok := s.cache.fastUse(ctx, s.pool, tenant, mem); ok {
			return version, nil
		}
	}
	var version int64
	err := s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		t, found, err := lookupTenant(ctx, tx, tenant)
		if err != nil || !found {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT version FROM `+t.tables.stats).Scan(&version); err != nil {
			return classify(err)
		}
		// The same two paths as the fast one: the in-memory index when
		// enabled and current for this snapshot, else SQL.
		if s.cache != nil {
			ok, err := s.cache.use(ctx, tx, t, mem)
			if err != nil || ok {
				return err
			}
		}
		return sql(tx, t)
	})
	return version, err
}

// MaxLoadChunks bounds how many chunk ids one [Store.LoadChunks] call takes.
const MaxLoadChunks = 1000

// LoadChunks loads the chunks with the given ids, in the given order, for
// principal p, re-checking visibility (classification and barriers) in SQL in
// one snapshot. If any id is unknown, or names a chunk p may not see, it
// returns [ErrChunkNotFound] and no chunk: the caller cannot tell a hidden
// chunk from a missing one. It also returns the tenant's index version.
func (s *Store) LoadChunks(ctx context.Context, p cordontype.Principal, ids []string) ([]cordontype.Chunk, int64, error) {
	if err := p.Validate(); err != nil {
		return nil, 0, err
	}
	if len(ids) > MaxLoadChunks {
		return nil, 0, fmt.Errorf("%w: %d chunk ids: at most %d are allowed", cordontype.ErrInvalid, len(ids), MaxLoadChunks)
	}
	var out []cordontype.Chunk
	var version int64
	err := s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		t, found, err := lookupTenant(ctx, tx, p.Tenant)
		if err != nil {
			return err
		}
		if !found {
			if len(ids) > 0 {
				return ErrChunkNotFound
			}
			return nil
		}
		if err := tx.QueryRow(ctx, `SELECT version FROM `+t.tables.stats).Scan(&version); err != nil {
			return classify(err)
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `
			SELECT c.chunk_id, c.doc_id, c.section, c.text, c.start_char, c.end_char, c.length,
			       c.classification, c.barriers, c.as_of_tick
			FROM `+t.tables.chunks+` c
			WHERE c.chunk_id = ANY($1::text[]) AND `+visibleSQL,
			ids, int16(p.Clearance), p.Barriers)
		if err != nil {
			return classify(err)
		}
		byID := make(map[string]cordontype.Chunk, len(ids))
		for rows.Next() {
			var c cordontype.Chunk
			var class int16
			var start, end, length int32
			if err := rows.Scan(&c.ChunkID, &c.DocID, &c.Section, &c.Text, &start, &end, &length, &class, &c.Barriers, &c.AsOfTick); err != nil {
				rows.Close()
				return err
			}
			c.Tenant = p.Tenant
			c.StartChar, c.EndChar, c.Length = int(start), int(end), int(length)
			c.Classification = cordontype.Classification(class)
			byID[c.ChunkID] = c
		}
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		out = make([]cordontype.Chunk, 0, len(ids))
		for _, id := range ids {
			c, ok := byID[id]
			if !ok {
				return ErrChunkNotFound
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("load chunks of tenant %q: %w", p.Tenant, err)
	}
	return out, version, nil
}

// DocumentHashes returns the BLAKE2b-256 content hash of every document of
// tenant (documents stored before hashes existed have none). Ingestion uses
// it to skip unchanged files.
func (s *Store) DocumentHashes(ctx context.Context, tenant string) (map[string][]byte, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
	}
	rows, err := s.pool.Query(ctx, `SELECT doc_id, content_hash FROM `+t.tables.documents+` WHERE content_hash IS NOT NULL`)
	if err != nil {
		return nil, classify(err)
	}
	out := make(map[string][]byte)
	for rows.Next() {
		var id string
		var h []byte
		if err := rows.Scan(&id, &h); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// TenantExists reports whether tenant is registered.
func (s *Store) TenantExists(ctx context.Context, tenant string) (bool, error) {
	_, found, err := lookupTenant(ctx, s.pool, tenant)
	return found, err
}

// LatestMigration is the newest migration version embedded in this binary.
func LatestMigration() int64 {
	names, _ := fs.Glob(migrations.FS, "*.sql")
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// Ready checks that the database answers, that its migrations are those of
// this binary, and that every tenant schema is at the latest version. A
// connection failure wraps [ErrUnavailable]; anything behind wraps
// [ErrNotReady].
func (s *Store) Ready(ctx context.Context) error {
	current, err := databaseVersion(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("readiness: %w", classify(err))
	}
	if latest := LatestMigration(); current != latest {
		return fmt.Errorf("%w: database at migration %d, this binary needs %d: run 'cordon migrate'", ErrNotReady, current, latest)
	}
	var behind int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM cordon.tenants WHERE schema_version <> cordon.tenant_latest_version()`).Scan(&behind); err != nil {
		return fmt.Errorf("readiness: %w", classify(err))
	}
	if behind > 0 {
		return fmt.Errorf("%w: %d tenant schemas are not at the latest version", ErrNotReady, behind)
	}
	return nil
}
