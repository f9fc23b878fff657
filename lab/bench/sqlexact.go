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
// over Cordon's own tables: BM25 from the postings blocks with SQL's ln() and
// an unordered sum(), the dense side as a full scan of pgvector's inner
// product, the entitlement and freshness filter in WHERE, RRF and the rerank
// floor in SQL. It is what "just write it in SQL" gives: exact in intent,
// but not bit-identical (glibc's ln, summation order), and its cost grows
// with the postings of common terms and with the tenant's size.
type sqlExactSystem struct {
	pool *pgxpool.Pool
}

func newSQLExact(ctx context.Context, url string, conns int32) (*sqlExactSystem, error) {
	pool, err := openPool(ctx, url, conns)
	if err != nil {
		return nil, err
	}
	return &sqlExactSystem{pool: pool}, nil
}

// Ingest does nothing: sql_exact reads the tables the cordon system wrote.
func (s *sqlExactSystem) Ingest(context.Context, *Generator, int, int, func(int64)) (bool, error) {
	return false, nil
}

// sqlExactQuery is the pipeline. %[1]s is the tenant's quoted schema.
// $1 distinct terms, $2 query vector, $3 clearance, $4 barriers, $5 now,
// $6 max_stale (NULL: none), $7 k1, $8 b, $9 top_n, $10 rrf_k, $11 rerank
// depth, $12 min_score, $13 limit, $14 the terms' bucket keys.
const sqlExactQuery = `
WITH q AS (
	SELECT term, bucket FROM unnest($1::text[], $14::text[]) AS q(term, bucket)
), st AS (
	SELECT n_chunks::float8 AS n, sum_len::float8 / greatest(n_chunks, 1) AS avgdl FROM %[1]s.stats
), hits AS (
	SELECT q.term, u.chunk, u.tf
	FROM q JOIN %[1]s.postings p ON p.term IN (q.term, q.bucket)
	CROSS JOIN LATERAL unnest(p.chunks, p.tfs, p.terms) AS u(chunk, tf, term)
	JOIN %[1]s.chunks c ON c.id = u.chunk
	WHERE coalesce(u.term, p.term) = q.term
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
	rows, err := s.pool.Query(ctx, fmt.Sprintf(sqlExactQuery, quoteIdent(schema)),
		terms, vec, int16(q.Principal.Clearance), q.Principal.Barriers, q.NowTick, q.MaxStaleTicks,
		p.K1, p.B, TopN, int64(RRFK), RerankDepth, MinScore, Limit, postgres.TermBuckets(terms))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// BytesPerChunk does not apply: sql_exact stores nothing of its own (it
// needs exactly Cordon's tables).
func (s *sqlExactSystem) BytesPerChunk(context.Context) (float64, bool, error) { return 0, false, nil }

func (s *sqlExactSystem) Close() { s.pool.Close() }
