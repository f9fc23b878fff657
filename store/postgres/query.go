package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/retrieval"
)

// This file is the whole query path: RankVersion and IDF enter through
// read, which resolves the tenant once (registry row, tokenizer check and
// stats row in one statement) and answers on the in-memory index (cache.go)
// or in SQL (rankTx, idfTx), passing that stats row down.

// float32Exact is 2^24: float32 holds every integer up to it exactly, so a
// float32 inner product whose partial sums stay below it is exact.
const float32Exact = 1 << 24

// The pre-filter, evaluated in SQL for every candidate. $2 is the clearance,
// $3 the principal's barriers, $4 now_tick, $5 max_stale_ticks (NULL: none).
// It mirrors retrieval.Visible and retrieval.Stale; the differential tests
// hold the two to the same answers.
const (
	visibleSQL = `(c.classification <= $2 AND c.barriers <@ $3::text[])`
	staleSQL   = `($5::bigint IS NOT NULL AND $4::bigint - c.as_of_tick > $5::bigint)`
)

// Rank implements [retrieval.Store] (see RankVersion).
func (s *Store) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	rk, _, err := s.RankVersion(ctx, req)
	return rk, err
}

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
	var memErr error
	version, err := s.read(ctx, req.Principal.Tenant,
		func(x *memindex.Index) { out, memErr = x.Rank(req) },
		func(tx pgx.Tx, t tenantInfo, st statsRow) error {
			rk, err := rankTx(ctx, tx, t, st, req)
			if err == nil {
				out = rk
			}
			return err
		})
	if err == nil {
		err = memErr
	}
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
		func(tx pgx.Tx, t tenantInfo, st statsRow) error {
			idf, err := idfTx(ctx, tx, t, st, p, terms)
			if err == nil {
				out = idf
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("idf tenant %q: %w", p.Tenant, err)
	}
	return out, nil
}

// read answers one query of tenant on one of the two query paths and
// returns the index version that answered: mem on the cached index when it
// is current, else sql, in one read-only REPEATABLE READ snapshot. Neither
// runs for an unknown tenant (version 0): the caller's zero answer stands.
//
// With the cache, one statement outside any transaction first reads the
// tenant's registry and stats rows; a cached index at that version or newer
// (a later committed state) answers at once (cache.current). Otherwise the
// snapshot's own first statement reads both rows again, and the cache is
// brought to that version (cache.use), or SQL ranks.
func (s *Store) read(ctx context.Context, tenant string, mem func(*memindex.Index), sql func(pgx.Tx, tenantInfo, statsRow) error) (int64, error) {
	var version int64
	err := s.onReader(ctx, func(c *pgxpool.Conn) error {
		var err error
		version, err = s.readOn(ctx, c, tenant, mem, sql)
		return err
	})
	return version, err
}

// readOn is read on connection c (to the primary or a replica).
func (s *Store) readOn(ctx context.Context, c *pgxpool.Conn, tenant string, mem func(*memindex.Index), sql func(pgx.Tx, tenantInfo, statsRow) error) (int64, error) {
	if s.cache != nil {
		var st statsRow
		t, found, err := lookupTenant(ctx, c, tenant, &st)
		if err == nil && !found {
			return 0, nil
		}
		if s.citus {
			st.incarnation = placementIncarnation(st.incarnation, st.node)
		}
		if err == nil {
			if version, ok := s.cache.current(t, st, mem); ok {
				return version, nil
			}
		}
		// An error is reported by the transactional path, which meets it
		// again.
	}
	var version int64
	_, err := snapshotOn(ctx, c, tenant, s.placementCheck(), func(tx pgx.Tx, t tenantInfo, st statsRow) error {
		version = st.version
		if s.cache != nil {
			ok, load, err := s.cache.use(ctx, tx, t, st, mem)
			if err != nil || ok {
				return err
			}
			if load {
				// This query does not wait: SQL answers it while the
				// tenant loads.
				s.startLoad(tenant, t.schema)
			}
		}
		return sql(tx, t, st)
	})
	return version, err
}

// errNoTenant makes inSnapshot roll back when the tenant is not registered.
var errNoTenant = errors.New("tenant not registered")

// inSnapshot runs fn in one read-only REPEATABLE READ transaction, given
// tenant's registry and stats rows as the snapshot's first statement read
// them. found is false, and fn does not run, when the tenant is not
// registered.
func (s *Store) inSnapshot(ctx context.Context, tenant string, fn func(pgx.Tx, tenantInfo, statsRow) error) (found bool, err error) {
	err = s.onReader(ctx, func(c *pgxpool.Conn) error {
		var err error
		found, err = snapshotOn(ctx, c, tenant, s.placementCheck(), fn)
		return err
	})
	return found, err
}

// snapshotOn is inSnapshot on connection c. With moved not nil (on
// Citus), the snapshot is taken again, after calling moved, when a tenant
// move switched placements while it was read (see checkPlacement).
func snapshotOn(ctx context.Context, c *pgxpool.Conn, tenant string, moved func(tenantInfo), fn func(pgx.Tx, tenantInfo, statsRow) error) (found bool, err error) {
	var movedFrom tenantInfo
	for attempt := 1; ; attempt++ {
		err = inTxOn(ctx, c, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var st statsRow
			t, ok, err := lookupTenant(ctx, tx, tenant, &st)
			if err != nil {
				return err
			}
			if !ok {
				// The lookup's statement may have failed (no such schema),
				// which aborts the transaction: roll back, do not commit.
				return errNoTenant
			}
			found = true
			if moved == nil {
				return fn(tx, t, st)
			}
			st.incarnation = placementIncarnation(st.incarnation, st.node)
			if err := fn(tx, t, st); err != nil {
				return err
			}
			if err := checkPlacement(ctx, tx, t, st); err != nil {
				movedFrom = t
				return err
			}
			return nil
		})
		if errors.Is(err, errNoTenant) {
			return false, nil
		}
		if !errors.Is(err, errPlacementMoved) || attempt == maxPlacementAttempts {
			return found, err
		}
		moved(movedFrom)
	}
}

// scopeTotals is N and the length sum of p's statistics scope: the
// tenant's (from st), or the sum over the label sets p may see.
func scopeTotals(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, p cordontype.Principal) (n, sumLen int64, err error) {
	if !t.settings.Statistics.Entitled() {
		return st.nChunks, st.sumLen, nil
	}
	err = tx.QueryRow(ctx, `
		SELECT coalesce(sum(n_chunks), 0)::bigint, coalesce(sum(sum_len), 0)::bigint
		FROM `+t.tables.labelStats+` WHERE classification <= $1 AND barriers <@ $2::text[]`,
		int16(p.Clearance), p.Barriers).Scan(&n, &sumLen)
	return n, sumLen, classify(err)
}

// rankTx ranks req in SQL in tx's snapshot, whose stats row is st.
func rankTx(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, req retrieval.RankRequest) (retrieval.Rankings, error) {
	entitled := t.settings.Statistics.Entitled()
	n, sumLen, err := scopeTotals(ctx, tx, t, st, req.Principal)
	if err != nil {
		return retrieval.Rankings{}, err
	}
	filterArgs := []any{int16(req.Principal.Clearance), req.Principal.Barriers, req.NowTick, req.MaxStaleTicks}
	var rk retrieval.Rankings
	lex, err := lexical(ctx, tx, t, req, n, sumLen, entitled, filterArgs, &rk)
	if err != nil {
		return rk, err
	}
	dense, err := denseSide(ctx, tx, t, req, st.maxAbs, filterArgs, &rk)
	if err != nil {
		return rk, err
	}
	if err := fetchChunks(ctx, tx, t, req, filterArgs, lex, dense); err != nil {
		return rk, err
	}
	// A side with no hits is an empty ranking, never nil.
	if lex == nil {
		lex = []retrieval.Hit{}
	}
	if dense == nil {
		dense = []retrieval.Hit{}
	}
	rk.Lexical, rk.Dense = lex, dense
	if req.Docs && n > 0 {
		rk.Docs, err = docRankTx(ctx, tx, t, req, sumLen, entitled, filterArgs)
	}
	return rk, err
}

// lexical scores the postings of the query's distinct terms in Go with the
// scope's statistics (n, sumLen; df over visible postings when entitled),
// and records each term's idf in rk. A term's postings are those of its
// term rows and those of its bucket rows that name it (postings.go). The
// join to chunks drops postings of deleted chunks still in unmerged blocks,
// so df counts current chunks only. The hits it returns carry only their
// chunk ids (see fetchChunks).
func lexical(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, n, sumLen int64, entitled bool, filterArgs []any, rk *retrieval.Rankings) ([]retrieval.Hit, error) {
	if len(req.Terms) == 0 || n == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT q.ord::int, u.chunk, u.tf, c.length, `+visibleSQL+`, `+staleSQL+`,
		       CASE WHEN `+visibleSQL+` AND NOT `+staleSQL+` THEN c.chunk_id END
		FROM unnest($1::text[], $6::text[]) WITH ORDINALITY AS q(term, bucket, ord)
		JOIN `+t.tables.postings+` p ON p.term IN (q.term, q.bucket)
		CROSS JOIN LATERAL unnest(p.chunks, p.tfs, p.terms) AS u(chunk, tf, term)
		JOIN `+t.tables.chunks+` c ON c.id = u.chunk
		WHERE coalesce(u.term, p.term) = q.term`,
		append(append([]any{req.Terms}, filterArgs...), TermBuckets(req.Terms))...)
	if err != nil {
		return nil, classify(err)
	}
	type posting struct {
		ord int
		tf  int64
	}
	type chunkAcc struct {
		length         int64
		visible, stale bool
		chunkID        *string
		postings       []posting
	}
	df := make([]int64, len(req.Terms)+1)
	acc := make(map[int64]*chunkAcc)
	var order []int64
	for rows.Next() {
		var ord int
		var id, tf, length int64
		var visible, stale bool
		var chunkID *string
		if err := rows.Scan(&ord, &id, &tf, &length, &visible, &stale, &chunkID); err != nil {
			rows.Close()
			return nil, err
		}
		if visible || !entitled {
			df[ord]++
		}
		a := acc[id]
		if a == nil {
			a = &chunkAcc{length: length, visible: visible, stale: stale, chunkID: chunkID}
			acc[id] = a
			order = append(order, id)
		}
		a.postings = append(a.postings, posting{ord: ord, tf: tf})
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	w := bm25.NewIDFs(req.IDF, len(df)) // by ordinal, 1-based
	for ord := 1; ord < len(df); ord++ {
		w.Set(ord, n, df[ord])
	}
	idf, lex := w.IDF, w.Lex
	rk.IDF = idf[1:]
	avgdl := bm25.AvgDL(sumLen, n)
	slices.Sort(order) // no dependence on row order
	var kept []retrieval.Hit
	for _, id := range order {
		a := acc[id]
		// Sum in order of first occurrence in the query (SPEC section 4).
		slices.SortFunc(a.postings, func(x, y posting) int { return x.ord - y.ord })
		var score float64
		for _, p := range a.postings {
			score += float64(req.Weight(p.ord-1) * bm25.Term(lex[p.ord], p.tf, a.length, avgdl, t.settings.BM25))
		}
		if !(score > 0) {
			continue
		}
		rk.Considered++
		switch {
		case !a.visible:
			rk.ExcludedByEntitlement++
		case a.stale:
			rk.ExcludedByFreshness++
		default:
			kept = append(kept, retrieval.Hit{Chunk: cordontype.Chunk{ChunkID: *a.chunkID}, Score: score})
		}
	}
	retrieval.SortHits(kept)
	if len(kept) > req.TopN {
		kept = kept[:req.TopN]
	}
	return kept, nil
}

// exactDot is the SQL expression of the exact dot product of the vector
// column col with q (the statement's $1, passed as arg), for a column whose
// largest |component| is maxAbs. pgvector accumulates the inner product in
// float32: every |partial sum| is at most sum |q_i| * |d_i| <= l1(q) *
// maxAbs, and below 2^24 each one is an exact integer whatever the
// summation order, so the result is exact. Otherwise the expression sums
// exact bigint products instead.
func exactDot(col string, q []int32, maxAbs int32) (expr string, arg any) {
	var l1 int64
	for _, x := range q {
		l1 += int64(max(x, -x))
	}
	if l1*int64(maxAbs) < float32Exact {
		return `(-(` + col + ` <#> $1::vector))::bigint`, pgvector.NewVector(index.Float32s(q))
	}
	q64 := make([]int64, len(q))
	for i, x := range q {
		q64[i] = int64(x)
	}
	return `(SELECT sum(u.a::bigint * u.b) FROM unnest(` + col + `::real[], $1::bigint[]) AS u(a, b))`, q64
}

// denseSide computes exact dot products in SQL, counts the funnel and returns
// the top_n visible, fresh chunks by cosine, carrying only their chunk ids
// (see fetchChunks).
func denseSide(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, maxAbs int32, filterArgs []any, rk *retrieval.Rankings) ([]retrieval.Hit, error) {
	q, err := req.QueryVector(t.settings.Spec())
	if err != nil {
		return nil, err
	}
	qn := hashembed.NormSq(q)
	if qn == 0 {
		return nil, nil
	}
	dot, qarg := exactDot("c.embedding", q, maxAbs)
	qnorm := math.Sqrt(float64(qn))
	rows, err := tx.Query(ctx, `
		WITH d AS MATERIALIZED (
			SELECT c.chunk_id, c.norm_sq, `+dot+` AS dot,
			       `+visibleSQL+` AS visible, `+staleSQL+` AS stale
			FROM `+t.tables.chunks+` c
		), pos AS MATERIALIZED (
			SELECT chunk_id, norm_sq, dot, visible, stale FROM d WHERE dot > 0
		)
		SELECT 0 AS kind, count(*)::bigint, count(*) FILTER (WHERE NOT visible)::bigint,
		       count(*) FILTER (WHERE visible AND stale)::bigint, NULL::text, NULL::bigint, NULL::bigint
		FROM pos
		UNION ALL
		(SELECT 1, 0, 0, 0, chunk_id, dot, norm_sq FROM pos WHERE visible AND NOT stale
		 ORDER BY dot::float8 / ($6::float8 * sqrt(norm_sq::float8)) DESC, chunk_id
		 LIMIT $7)`,
		append(append([]any{qarg}, filterArgs...), qnorm, req.TopN)...)
	if err != nil {
		return nil, classify(err)
	}
	var kept []retrieval.Hit
	for rows.Next() {
		var kind int
		var considered, excl, fresh int64
		var dotV, normSq *int64
		var chunkID *string
		if err := rows.Scan(&kind, &considered, &excl, &fresh, &chunkID, &dotV, &normSq); err != nil {
			rows.Close()
			return nil, err
		}
		if kind == 0 {
			rk.Considered += int(considered)
			rk.ExcludedByEntitlement += int(excl)
			rk.ExcludedByFreshness += int(fresh)
			continue
		}
		kept = append(kept, retrieval.Hit{Chunk: cordontype.Chunk{ChunkID: *chunkID}, Score: hashembed.Cosine(*dotV, qn, *normSq)})
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	// The SQL order used the same IEEE operations; sorting again in Go makes
	// the reported order depend only on the Go-computed scores.
	retrieval.SortHits(kept)
	return kept, nil
}

// fetchChunks fills in the chunks of the ranked hits, re-checking
// visibility and freshness in the WHERE clause: a row the principal may not
// see cannot come back.
func fetchChunks(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, filterArgs []any, rankings ...[]retrieval.Hit) error {
	var ids []string
	for _, hits := range rankings {
		for _, h := range hits {
			ids = append(ids, h.Chunk.ChunkID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT `+chunkColumns+` FROM `+t.tables.chunks+` c
		WHERE c.chunk_id = ANY($1::text[]) AND `+visibleSQL+` AND NOT `+staleSQL,
		append([]any{ids}, filterArgs...)...)
	if err != nil {
		return classify(err)
	}
	chunks, err := collectChunks(rows, req.Principal.Tenant, len(ids))
	if err != nil {
		return err
	}
	for _, hits := range rankings {
		for i := range hits {
			c, ok := chunks[hits[i].Chunk.ChunkID]
			if !ok {
				return errors.New("a ranked chunk vanished within one snapshot: this is a bug, please report it with a replay script")
			}
			hits[i].Chunk = c
		}
	}
	return nil
}

// idfTx is each term's idf under p's statistics scope in tx's snapshot,
// whose stats row is st, with the scope's N and df counted exactly as rankTx
// counts them (df over the postings of current chunks, only visible ones
// under the entitled scope).
func idfTx(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, p cordontype.Principal, terms []string) ([]float64, error) {
	idf := make([]float64, len(terms))
	n, _, err := scopeTotals(ctx, tx, t, st, p)
	if err != nil || n == 0 || len(terms) == 0 {
		return idf, err
	}
	rows, err := tx.Query(ctx, `
		SELECT q.ord::int, count(*)::bigint
		FROM unnest($1::text[], $5::text[]) WITH ORDINALITY AS q(term, bucket, ord)
		JOIN `+t.tables.postings+` p ON p.term IN (q.term, q.bucket)
		CROSS JOIN LATERAL unnest(p.chunks, p.terms) AS u(chunk, term)
		JOIN `+t.tables.chunks+` c ON c.id = u.chunk
		WHERE coalesce(u.term, p.term) = q.term AND (NOT $4::boolean OR `+visibleSQL+`)
		GROUP BY q.ord`,
		terms, int16(p.Clearance), p.Barriers, t.settings.Statistics.Entitled(), TermBuckets(terms))
	if err != nil {
		return nil, classify(err)
	}
	df := make([]int64, len(terms))
	for rows.Next() {
		var ord int
		var count int64
		if err := rows.Scan(&ord, &count); err != nil {
			rows.Close()
			return nil, err
		}
		df[ord-1] = count
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	for i := range idf {
		idf[i] = bm25.IDF(n, df[i])
	}
	return idf, nil
}
