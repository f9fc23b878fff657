package postgres

import (
	"context"
	"errors"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

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

// candidate is one chunk found by a side, before its text is fetched.
type candidate struct {
	id      int64
	chunkID string
	score   float64
}

// scopeTotals reads N and the length sum of p's statistics scope (the
// tenant's, or the sum over the label sets p may see), and the largest
// vector component magnitude of the tenant.
func scopeTotals(ctx context.Context, tx pgx.Tx, t tenantInfo, p cordontype.Principal) (n, sumLen int64, maxAbs int32, err error) {
	err = tx.QueryRow(ctx, `
		SELECT CASE WHEN $1 THEN l.n ELSE s.n_chunks END, CASE WHEN $1 THEN l.len ELSE s.sum_len END, s.max_abs
		FROM `+t.tables.stats+` s,
		     (SELECT coalesce(sum(n_chunks), 0)::bigint AS n, coalesce(sum(sum_len), 0)::bigint AS len
		      FROM `+t.tables.labelStats+` WHERE $1 AND classification <= $2 AND barriers <@ $3::text[]) l`,
		t.settings.Statistics == bm25.ScopeEntitled, int16(p.Clearance), p.Barriers).Scan(&n, &sumLen, &maxAbs)
	return n, sumLen, maxAbs, classify(err)
}

func rankTx(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest) (retrieval.Rankings, error) {
	entitled := t.settings.Statistics == bm25.ScopeEntitled
	n, sumLen, maxAbs, err := scopeTotals(ctx, tx, t, req.Principal)
	if err != nil {
		return retrieval.Rankings{}, err
	}
	filterArgs := []any{int16(req.Principal.Clearance), req.Principal.Barriers, req.NowTick, req.MaxStaleTicks}
	var rk retrieval.Rankings
	lex, err := lexical(ctx, tx, t, req, n, sumLen, entitled, filterArgs, &rk)
	if err != nil {
		return rk, err
	}
	dense, err := denseSide(ctx, tx, t, req, maxAbs, filterArgs, &rk)
	if err != nil {
		return rk, err
	}
	chunks, err := fetchChunks(ctx, tx, t, req, lex, dense, filterArgs)
	if err != nil {
		return rk, err
	}
	toHits := func(cs []candidate) []retrieval.Hit {
		h := make([]retrieval.Hit, len(cs))
		for i, c := range cs {
			h[i] = retrieval.Hit{Chunk: chunks[c.id], Score: c.score}
		}
		return h
	}
	rk.Lexical, rk.Dense = toHits(lex), toHits(dense)
	return rk, nil
}

// lexical scores the postings of the query's distinct terms in Go with the
// scope's statistics (n, sumLen; df over visible postings when entitled),
// and records each term's idf in rk. The join to chunks drops postings of
// deleted chunks still in unmerged blocks, so df counts current chunks only.
func lexical(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, n, sumLen int64, entitled bool, filterArgs []any, rk *retrieval.Rankings) ([]candidate, error) {
	if len(req.Terms) == 0 || n == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT q.ord::int, u.chunk, u.tf, c.length, `+visibleSQL+`, `+staleSQL+`,
		       CASE WHEN `+visibleSQL+` AND NOT `+staleSQL+` THEN c.chunk_id END
		FROM unnest($1::text[]) WITH ORDINALITY AS q(term, ord)
		JOIN `+t.tables.postings+` p ON p.term = q.term
		CROSS JOIN LATERAL unnest(p.chunks, p.tfs) AS u(chunk, tf)
		JOIN `+t.tables.chunks+` c ON c.id = u.chunk`,
		append([]any{req.Terms}, filterArgs...)...)
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
	idf := make([]float64, len(df))
	for ord := 1; ord < len(df); ord++ {
		idf[ord] = bm25.IDF(n, df[ord])
	}
	rk.IDF = idf[1:]
	avgdl := bm25.AvgDL(sumLen, n)
	slices.Sort(order) // no dependence on row order
	var kept []candidate
	for _, id := range order {
		a := acc[id]
		// Sum in order of first occurrence in the query (SPEC section 4).
		slices.SortFunc(a.postings, func(x, y posting) int { return x.ord - y.ord })
		var score float64
		for _, p := range a.postings {
			score += float64(req.Weight(p.ord-1) * bm25.Term(idf[p.ord], p.tf, a.length, avgdl, t.settings.BM25))
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
			kept = append(kept, candidate{id: id, chunkID: *a.chunkID, score: score})
		}
	}
	sortCandidates(kept)
	if len(kept) > req.TopN {
		kept = kept[:req.TopN]
	}
	return kept, nil
}

// idfTx is each term's idf under p's statistics scope in tx's snapshot,
// with the scope's N and df counted exactly as rankTx counts them (df over
// the postings of current chunks, only visible ones under the entitled
// scope).
func idfTx(ctx context.Context, tx pgx.Tx, t tenantInfo, p cordontype.Principal, terms []string) ([]float64, error) {
	idf := make([]float64, len(terms))
	n, _, _, err := scopeTotals(ctx, tx, t, p)
	if err != nil || n == 0 || len(terms) == 0 {
		return idf, err
	}
	rows, err := tx.Query(ctx, `
		SELECT q.ord::int, count(*)::bigint
		FROM unnest($1::text[]) WITH ORDINALITY AS q(term, ord)
		JOIN `+t.tables.postings+` p ON p.term = q.term
		CROSS JOIN LATERAL unnest(p.chunks) AS u(chunk)
		JOIN `+t.tables.chunks+` c ON c.id = u.chunk
		WHERE NOT $4::boolean OR `+visibleSQL+`
		GROUP BY q.ord`,
		terms, int16(p.Clearance), p.Barriers, t.settings.Statistics == bm25.ScopeEntitled)
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

func sortCandidates(c []candidate) {
	slices.SortFunc(c, func(a, b candidate) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.chunkID < b.chunkID:
			return -1
		case a.chunkID > b.chunkID:
			return 1
		}
		return 0
	})
}

// denseSide computes exact dot products in SQL, counts the funnel and returns
// the top_n visible, fresh chunks by cosine.
func denseSide(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, maxAbs int32, filterArgs []any, rk *retrieval.Rankings) ([]candidate, error) {
	q := hashembed.Vector(req.Tokens, t.settings.Dims)
	qn := hashembed.NormSq(q)
	if qn == 0 {
		return nil, nil
	}
	var l1 int64
	for _, x := range q {
		l1 += int64(max(x, -x))
	}
	// pgvector accumulates the inner product in float32. Every |partial sum|
	// is at most sum |q_i| * |d_i| <= l1 * maxAbs; below 2^24 each one is an
	// exact integer whatever the summation order, so the result is exact.
	// Otherwise sum exact bigint products instead.
	dot := `(-(c.embedding <#> $1::vector))::bigint`
	var qarg any = pgvector.NewVector(index.Float32s(q))
	if l1*int64(maxAbs) >= float32Exact {
		dot = `(SELECT sum(u.a::bigint * u.b) FROM unnest(c.embedding::real[], $1::bigint[]) AS u(a, b))`
		q64 := make([]int64, len(q))
		for i, x := range q {
			q64[i] = int64(x)
		}
		qarg = q64
	}
	qnorm := math.Sqrt(float64(qn))
	rows, err := tx.Query(ctx, `
		WITH d AS MATERIALIZED (
			SELECT c.id, c.chunk_id, c.norm_sq, `+dot+` AS dot,
			       `+visibleSQL+` AS visible, `+staleSQL+` AS stale
			FROM `+t.tables.chunks+` c
		), pos AS MATERIALIZED (
			SELECT id, chunk_id, norm_sq, dot, visible, stale FROM d WHERE dot > 0
		)
		SELECT 0 AS kind, count(*)::bigint, count(*) FILTER (WHERE NOT visible)::bigint,
		       count(*) FILTER (WHERE visible AND stale)::bigint, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint
		FROM pos
		UNION ALL
		(SELECT 1, 0, 0, 0, id, chunk_id, dot, norm_sq FROM pos WHERE visible AND NOT stale
		 ORDER BY dot::float8 / ($6::float8 * sqrt(norm_sq::float8)) DESC, chunk_id
		 LIMIT $7)`,
		append(append([]any{qarg}, filterArgs...), qnorm, req.TopN)...)
	if err != nil {
		return nil, classify(err)
	}
	var kept []candidate
	for rows.Next() {
		var kind int
		var considered, excl, fresh int64
		var id, dotV, normSq *int64
		var chunkID *string
		if err := rows.Scan(&kind, &considered, &excl, &fresh, &id, &chunkID, &dotV, &normSq); err != nil {
			rows.Close()
			return nil, err
		}
		if kind == 0 {
			rk.Considered += int(considered)
			rk.ExcludedByEntitlement += int(excl)
			rk.ExcludedByFreshness += int(fresh)
			continue
		}
		kept = append(kept, candidate{id: *id, chunkID: *chunkID, score: hashembed.Cosine(*dotV, qn, *normSq)})
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	// The SQL order used the same IEEE operations; sorting again in Go makes
	// the reported order depend only on the Go-computed scores.
	sortCandidates(kept)
	return kept, nil
}

// fetchChunks loads the kept chunks, re-checking visibility in the WHERE
// clause: a row the principal may not see cannot come back.
func fetchChunks(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, lex, dense []candidate, filterArgs []any) (map[int64]cordontype.Chunk, error) {
	ids := make([]int64, 0, len(lex)+len(dense))
	for _, c := range lex {
		ids = append(ids, c.id)
	}
	for _, c := range dense {
		ids = append(ids, c.id)
	}
	out := make(map[int64]cordontype.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT c.id, c.chunk_id, c.doc_id, c.section, c.text, c.start_char, c.end_char, c.length,
		       c.classification, c.barriers, c.as_of_tick
		FROM `+t.tables.chunks+` c
		WHERE c.id = ANY($1) AND `+visibleSQL+` AND NOT `+staleSQL,
		append([]any{ids}, filterArgs...)...)
	if err != nil {
		return nil, classify(err)
	}
	for rows.Next() {
		var id int64
		var c cordontype.Chunk
		var class int16
		var start, end, length int32
		if err := rows.Scan(&id, &c.ChunkID, &c.DocID, &c.Section, &c.Text, &start, &end, &length, &class, &c.Barriers, &c.AsOfTick); err != nil {
			rows.Close()
			return nil, err
		}
		c.Tenant = req.Principal.Tenant
		c.StartChar, c.EndChar, c.Length = int(start), int(end), int(length)
		c.Classification = cordontype.Classification(class)
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, errors.New("a ranked chunk vanished within one snapshot: this is a bug, please report it with a replay script")
		}
	}
	return out, nil
}
