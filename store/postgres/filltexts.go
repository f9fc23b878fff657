package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/retrieval"
)

// A cached index of a tenant that would not fit the budget with its chunk
// texts keeps none (see cache.build): a packed text is a fifth to a
// quarter of a chunk's memory, and a query reads those of its hits alone.
// Each hit carries its chunk row's id (retrieval.Hit.Ref), and fillTexts
// reads their texts in one statement after the ranking. A row's text
// never changes, and a row id is never given again, so the text read is
// the one the index ranked; a document changed since the index's version
// has lost its rows, and the query is answered again in a snapshot.

// queryer runs a statement: a connection, or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fillFunc completes an answer of the cached index from the tenant's
// tables on q (see Store.read); false means the index cannot answer.
type fillFunc func(ctx context.Context, q queryer, t tenantInfo) (bool, error)

// run is fill on q, true when fill is nil.
func (fill fillFunc) run(ctx context.Context, q queryer, t tenantInfo) (bool, error) {
	if fill == nil {
		return true, nil
	}
	return fill(ctx, q, t)
}

// fillOnPrimary runs fill on a connection to the primary.
func (s *Store) fillOnPrimary(ctx context.Context, fill fillFunc, t tenantInfo) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, classify(err)
	}
	defer conn.Release()
	return fill(ctx, conn, t)
}

// fillTexts sets the texts of rk's hits, which a cached index ranked for
// req, from t's chunks table on q, by the hits' row ids. Every row is
// checked against req's pre-filter again (classification, barriers,
// freshness: SPEC section 5, steps 2-3), as the SQL path reads its hits.
// It reports false when a hit has no row id or its row is gone or no
// longer passes (its document changed after the index's version); rk is
// then to be ranked again, and its texts may be partly set.
func fillTexts(ctx context.Context, q queryer, t tenantInfo, req retrieval.RankRequest, rk *retrieval.Rankings) (bool, error) {
	n := len(rk.Lexical) + len(rk.Dense)
	if n == 0 {
		return true, nil
	}
	ids := make([]int64, 0, n)
	for _, hits := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		for _, h := range hits {
			if h.Ref == 0 {
				return false, nil
			}
			ids = append(ids, h.Ref)
		}
	}
	rows, err := q.Query(ctx, `SELECT c.id, c.text FROM `+t.tables.chunks+` c
		WHERE c.id = ANY($1::bigint[]) AND `+visibleSQL+` AND NOT `+staleSQL,
		ids, int16(req.Principal.Clearance), req.Principal.Barriers, req.NowTick, req.MaxStaleTicks)
	if err != nil {
		return false, classify(err)
	}
	texts := make(map[int64]string, n)
	var id int64
	var text string
	if _, err := pgx.ForEachRow(rows, []any{&id, &text}, func() error {
		texts[id] = text
		return nil
	}); err != nil {
		return false, classify(err)
	}
	for _, hits := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		for i := range hits {
			text, ok := texts[hits[i].Ref]
			if !ok {
				return false, nil
			}
			hits[i].Chunk.Text = text
		}
	}
	return true, nil
}
