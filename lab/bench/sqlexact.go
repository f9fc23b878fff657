package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
)

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// openPool opens a pool with pgvector's types registered and the given
// session settings applied to every connection.
func openPool(ctx context.Context, url string, conns int32, settings ...string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if conns > 0 {
		cfg.MaxConns = conns
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, s := range settings {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return pgxvec.RegisterTypes(ctx, c)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// sqlExactSystem answers the whole retrieve pipeline with one SQL statement
// over Cordon's chunks table and a plain postings table, one row per
// posting, copied from Cordon's index: BM25 with SQL's ln() and an
// unordered sum(), the dense side as a full scan of pgvector's inner
// product, the entitlement and freshness filter in WHERE, RRF and the
// rerank floor in SQL. It is what "just write it in SQL" gives: exact in
// intent, but not bit-identical (glibc's ln, summation order), and its
// cost grows with the postings of common terms and with the tenant's size.
type sqlExactSystem struct {
	url  string
	pool *pgxpool.Pool
}

// ExactSchema is the schema of the sql_exact system's postings tables,
// one per tenant, named as the tenant's schema.
const ExactSchema = "bench_exact"

func newSQLExact(ctx context.Context, url string, conns int32) (*sqlExactSystem, error) {
	pool, err := openPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	return &sqlExactSystem{url: url, pool: pool}, nil
}

// Ingest copies each tenant's postings from the index the cordon system
// wrote into a table (term, chunk, tf) of ExactSchema, indexed by term. It
// reports false: sql_exact has no ingest of its own.
func (s *sqlExactSystem) Ingest(ctx context.Context, g *Generator, _, _ int, progress func(int64)) (bool, error) {
	st, err := postgres.Open(ctx, s.url, postgres.Options{})
	if err != nil {
		return false, err
	}
	defer st.Close()
	if _, err := s.pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoteIdent(ExactSchema)); err != nil {
		return false, err
	}
	for t := range g.Config().Tenants {
		tenant := g.TenantName(t)
		schema, err := postgres.SchemaName(tenant)
		if err != nil {
			return false, err
		}
		table := pgx.Identifier{ExactSchema, schema}
		if _, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS `+table.Sanitize()); err != nil {
			return false, err
		}
		if _, err := s.pool.Exec(ctx, `CREATE TABLE `+table.Sanitize()+` (term text COLLATE "C" NOT NULL, chunk bigint NOT NULL, tf integer NOT NULL)`); err != nil {
			return false, err
		}
		if err := copyPostings(ctx, st, s.pool, tenant, table); err != nil {
			return false, err
		}
		if _, err := s.pool.Exec(ctx, `CREATE INDEX ON `+table.Sanitize()+` (term); ANALYZE `+table.Sanitize()); err != nil {
			return false, err
		}
		progress(int64((t + 1) * g.Config().Chunks / g.Config().Tenants))
	}
	return false, nil
}

// copyPostings streams tenant's postings from st into table.
func copyPostings(ctx context.Context, st *postgres.Store, pool *pgxpool.Pool, tenant string, table pgx.Identifier) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type posting struct {
		term  string
		chunk int64
		tf    int32
	}
	ch := make(chan []posting, 4)
	read := make(chan error, 1)
	go func() {
		defer close(ch)
		var batch []posting
		err := st.EachPosting(ctx, tenant, func(term string, chunk int64, tf int32) error {
			if batch = append(batch, posting{term, chunk, tf}); len(batch) == 4096 {
				select {
				case ch <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch = nil
			}
			return nil
		})
		if err == nil && len(batch) > 0 {
			ch <- batch
		}
		read <- err
	}()
	var cur []posting
	row := make([]any, 3)
	_, err := pool.CopyFrom(ctx, table, []string{"term", "chunk", "tf"}, pgx.CopyFromFunc(func() ([]any, error) {
		if len(cur) == 0 {
			var ok bool
			if cur, ok = <-ch; !ok {
				return nil, nil
			}
		}
		row[0], row[1], row[2] = cur[0].term, cur[0].chunk, cur[0].tf
		cur = cur[1:]
		return row, nil
	}))
	if err != nil {
		cancel()
		for range ch {
		}
		return err
	}
	return <-read
}

// sqlExactQuery is the pipeline. %[1]s is the tenant's quoted schema, %[2]s
// its postings table. $1 distinct terms, $2 query vector, $3 clearance, $4
// barriers, $5 now, $6 max_stale (NULL: none), $7 k1, $8 b, $9 top_n, $10
// rrf_k, $11 rerank depth, $12 min_score, $13 limit.
const sqlExactQuery = `
WITH st AS (
	SELECT n_chunks::float8 AS n, sum_len::float8 / greatest(n_chunks, 1) AS avgdl FROM %[1]s.stats
), hits AS (
	SELECT p.term, p.chunk, p.tf
	FROM %[2]s p JOIN %[1]s.chunks c ON c.id = p.chunk
	WHERE p.term = ANY($1::text[])
), df AS (
	SELECT term, count(*)::float8 AS df FROM hits GROUP BY term
), lex AS (
	SELECT c.id, c.chunk_id,
	       sum(greatest(0, ln((st.n - df.df + 0.5) / (df.df + 0.5) + 1))
	           * (h.tf * ($7::float8 + 1)) / (h.tf + $7::float8 * (1 - $8::float8 + $8::float8 * c.length / st.avgdl))) AS score,
	       count(*) AS nterms
	FROM hits h JOIN df ON df.term = h.term JOIN %[1]s.chunks c ON c.id = h.chunk CROSS JOIN st
	WHERE c.classification <= $3 AND c.barriers <@ $4::text[]
	  AND NOT ($6::bigint IS NOT NULL AND $5::bigint - c.as_of_tick > $6::bigint)
	GROUP BY c.id, c.chunk_id
), lexr AS (
	SELECT id, chunk_id, row_number() OVER (ORDER BY score DESC, chunk_id) AS r
	FROM lex WHERE score > 0 ORDER BY score DESC, chunk_id LIMIT $9
), dense AS (
	SELECT c.id, c.chunk_id, -(c.embedding <#> $2::vector) / sqrt(c.norm_sq::float8) AS score
	FROM %[1]s.chunks c
	WHERE c.classification <= $3 AND c.barriers <@ $4::text[]
	  AND NOT ($6::bigint IS NOT NULL AND $5::bigint - c.as_of_tick > $6::bigint)
	  AND (c.embedding <#> $2::vector) < 0
	ORDER BY score DESC, c.chunk_id LIMIT $9
), denser AS (
	SELECT id, chunk_id, row_number() OVER (ORDER BY score DESC, chunk_id) AS r FROM dense
), fused AS (
	SELECT id, chunk_id, sum(1.0::float8 / ($10::bigint + r)) AS fused
	FROM (SELECT id, chunk_id, r FROM lexr UNION ALL SELECT id, chunk_id, r FROM denser) u
	GROUP BY id, chunk_id ORDER BY fused DESC, chunk_id LIMIT $11
), reranked AS (
	SELECT f.chunk_id, f.fused,
	       coalesce(l.nterms, 0)::float8 / greatest(cardinality($1::text[]), 1) AS overlap
	FROM fused f LEFT JOIN lex l ON l.id = f.id
)
SELECT chunk_id FROM reranked
WHERE overlap > 0 AND overlap >= $12
ORDER BY overlap DESC, fused DESC, chunk_id LIMIT $13`

func (s *sqlExactSystem) Query(ctx context.Context, q Query) ([]string, error) {
	schema, err := postgres.SchemaName(q.Principal.Tenant)
	if err != nil {
		return nil, err
	}
	tokens, terms := queryTerms(q.Text)
	if terms == nil {
		terms = []string{}
	}
	vec := pgvector.NewVector(index.Float32s(hashembed.Vector(tokens, hashembed.DefaultDims)))
	p := bm25.DefaultParams()
	rows, err := s.pool.Query(ctx, fmt.Sprintf(sqlExactQuery, quoteIdent(schema), pgx.Identifier{ExactSchema, schema}.Sanitize()),
		terms, vec, int16(q.Principal.Clearance), q.Principal.Barriers, q.NowTick, q.MaxStaleTicks,
		p.K1, p.B, TopN, int64(RRFK), RerankDepth, MinScore, Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// BytesPerChunk is not reported: sql_exact's postings table is a copy of
// Cordon's index, not an ingest of its own.
func (s *sqlExactSystem) BytesPerChunk(context.Context) (float64, bool, error) { return 0, false, nil }

func (s *sqlExactSystem) Close() error { s.pool.Close(); return nil }
