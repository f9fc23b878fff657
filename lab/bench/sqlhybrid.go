package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// HybridSchema is the schema of the sql_hybrid system's table.
const HybridSchema = "bench_hybrid"

// hnswEfSearch is the HNSW candidate list size at query time: at least
// top_n, so the index can return top_n rows; pgvector's default is 40.
const hnswEfSearch = 100

// sqlHybridSystem is the usual SQL hybrid recipe, as in pgvector's hybrid
// search example: one table for all tenants with a tsvector column ('simple'
// configuration: no stemming, like Cordon's tokenizer) under a GIN index,
// ranked by ts_rank_cd, and the L2-normalised signed-hash vectors under an
// HNSW index (inner product, i.e. cosine), each side limited to top_n, fused
// by RRF in SQL. The entitlement and freshness filter is in each side's
// WHERE; pgvector 0.8's iterative index scan keeps a filtered HNSW search
// returning top_n rows. The fused top rerank_depth then get the same rerank
// floor as every other system (in Go, on the returned text), so recall@10
// measures only what the approximate candidate generation loses.
type sqlHybridSystem struct {
	pool *pgxpool.Pool
}

func newSQLHybrid(ctx context.Context, url string, conns int32) (*sqlHybridSystem, error) {
	pool, err := openPool(ctx, url, conns,
		fmt.Sprintf("SET hnsw.ef_search = %d", hnswEfSearch),
		"SET hnsw.iterative_scan = relaxed_order")
	if err != nil {
		return nil, err
	}
	return &sqlHybridSystem{pool: pool}, nil
}

func (s *sqlHybridSystem) Ingest(ctx context.Context, g *Generator, writers, batch int, progress func(int64)) (bool, error) {
	sc := quoteIdent(HybridSchema)
	for _, stmt := range []string{
		`DROP SCHEMA IF EXISTS ` + sc + ` CASCADE`,
		`CREATE SCHEMA ` + sc,
		fmt.Sprintf(`CREATE TABLE %s.chunks (
			id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			tenant         text NOT NULL,
			chunk_id       text COLLATE "C" NOT NULL,
			doc_id         text COLLATE "C" NOT NULL,
			text           text NOT NULL,
			classification smallint NOT NULL,
			barriers       text[] NOT NULL,
			as_of_tick     bigint NOT NULL,
			tsv            tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
			embedding      vector(%d) NOT NULL
		)`, sc, hashembed.DefaultDims),
	} {
		if _, err := s.pool.Exec(ctx, stmt); err != nil {
			return true, fmt.Errorf("sql_hybrid schema: %w", err)
		}
	}
	settings := index.DefaultSettings()
	err := feed(ctx, g, writers, batch, progress, func(ctx context.Context, docs []cordontype.Document) error {
		var rows [][]any
		ids := make([]string, len(docs))
		for i := range docs {
			ids[i] = docs[i].DocID
			pcs, err := index.Prepare(&docs[i], settings)
			if err != nil {
				return err
			}
			for j := range pcs {
				c := &pcs[j].Chunk
				rows = append(rows, []any{c.Tenant, c.ChunkID, c.DocID, c.Text, int16(c.Classification), c.Barriers, c.AsOfTick, normalized(pcs[j].Vector, pcs[j].NormSq)})
			}
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// The batch in one transaction, replacing older versions, as an
			// application keeping the table current would.
			if _, err := tx.Exec(ctx, `DELETE FROM `+sc+`.chunks WHERE tenant = $1 AND doc_id = ANY($2)`, docs[0].Tenant, ids); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{HybridSchema, "chunks"},
				[]string{"tenant", "chunk_id", "doc_id", "text", "classification", "barriers", "as_of_tick", "embedding"},
				pgx.CopyFromRows(rows))
			return err
		})
	})
	if err != nil {
		return true, err
	}
	// Indexes after the bulk load, as pgvector recommends; their build time
	// counts as ingest time. One session, so the SET applies to the builds.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return true, err
	}
	defer conn.Release()
	for _, stmt := range []string{
		`SET maintenance_work_mem = '1GB'`,
		`CREATE INDEX ON ` + sc + `.chunks (tenant, doc_id)`,
		`CREATE INDEX ON ` + sc + `.chunks USING gin (tsv)`,
		`CREATE INDEX ON ` + sc + `.chunks USING hnsw (embedding vector_ip_ops)`,
		`RESET maintenance_work_mem`,
		`ANALYZE ` + sc + `.chunks`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return true, fmt.Errorf("sql_hybrid index: %w", err)
		}
	}
	return true, nil
}

// normalized is the unit-length float32 form of a count vector.
func normalized(v []int32, normSq int64) pgvector.Vector {
	f := make([]float32, len(v))
	if normSq > 0 {
		n := math.Sqrt(float64(normSq))
		for i, x := range v {
			f[i] = float32(float64(x) / n)
		}
	}
	return pgvector.NewVector(f)
}

// sqlHybridQuery: %[1]s schema. $1 query vector, $2 tenant, $3 clearance,
// $4 barriers, $5 now, $6 max_stale, $7 top_n, $8 tsquery, $9 rrf_k,
// $10 fused rows returned.
const sqlHybridQuery = `
WITH semantic AS MATERIALIZED (
	SELECT id, embedding <#> $1::vector AS dist
	FROM %[1]s.chunks
	WHERE tenant = $2 AND classification <= $3 AND barriers <@ $4::text[]
	  AND NOT ($6::bigint IS NOT NULL AND $5::bigint - as_of_tick > $6::bigint)
	ORDER BY embedding <#> $1::vector LIMIT $7
), semantic_ranked AS (
	SELECT id, row_number() OVER (ORDER BY dist, id) AS r FROM semantic
), keyword AS MATERIALIZED (
	SELECT id, ts_rank_cd(tsv, query) AS score
	FROM %[1]s.chunks, to_tsquery('simple', $8) query
	WHERE tsv @@ query AND tenant = $2 AND classification <= $3 AND barriers <@ $4::text[]
	  AND NOT ($6::bigint IS NOT NULL AND $5::bigint - as_of_tick > $6::bigint)
	ORDER BY score DESC LIMIT $7
), keyword_ranked AS (
	SELECT id, row_number() OVER (ORDER BY score DESC, id) AS r FROM keyword
), fused AS (
	SELECT coalesce(s.id, k.id) AS id,
	       coalesce(1.0 / ($9 + s.r), 0.0) + coalesce(1.0 / ($9 + k.r), 0.0) AS score
	FROM semantic_ranked s FULL OUTER JOIN keyword_ranked k ON s.id = k.id
	ORDER BY score DESC LIMIT $10
)
SELECT c.chunk_id, c.text FROM fused f JOIN %[1]s.chunks c ON c.id = f.id
ORDER BY f.score DESC, c.chunk_id`

func (s *sqlHybridSystem) Query(ctx context.Context, q Query) ([]string, error) {
	tokens, terms := queryTerms(q.Text)
	if len(terms) == 0 {
		return nil, nil
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = "'" + t + "'" // tokens are letters and digits only
	}
	v := hashembed.Vector(tokens, hashembed.DefaultDims)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(sqlHybridQuery, quoteIdent(HybridSchema)),
		normalized(v, hashembed.NormSq(v)), q.Principal.Tenant, int16(q.Principal.Clearance), q.Principal.Barriers,
		q.NowTick, q.MaxStaleTicks, TopN, strings.Join(quoted, " | "), RRFK, RerankDepth)
	if err != nil {
		return nil, err
	}
	var fused []retrieval.Scored
	for rows.Next() {
		var c cordontype.Chunk
		if err := rows.Scan(&c.ChunkID, &c.Text); err != nil {
			rows.Close()
			return nil, err
		}
		fused = append(fused, retrieval.Scored{Chunk: c})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := retrieval.Rerank(fused, retrieval.RerankInput{Terms: terms, Depth: RerankDepth, MinScore: MinScore, Kind: retrieval.RerankOverlap})
	if len(out) > Limit {
		out = out[:Limit]
	}
	return ids(retrieval.Result{Chunks: out}), nil
}

// BytesPerChunk is the table with its indexes and TOAST, text excluded.
func (s *sqlHybridSystem) BytesPerChunk(ctx context.Context) (float64, bool, error) {
	sc := quoteIdent(HybridSchema)
	var size, text, n int64
	err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('`+sc+`.chunks'), coalesce(sum(octet_length(text)), 0)::bigint, count(*) FROM `+sc+`.chunks`).Scan(&size, &text, &n)
	if err != nil || n == 0 {
		return 0, false, err
	}
	return float64(size-text) / float64(n), true, nil
}

func (s *sqlHybridSystem) Close() error { s.pool.Close(); return nil }
