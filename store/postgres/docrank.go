package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/retrieval"
)

// docRankTx is the document ranking of req (SPEC section 5, "Document
// evidence") in SQL, in tx's snapshot: the query terms' postings of the
// scope's chunks summed per document in Go (retrieval.DocCounter), N
// counted over the documents table (a document's labels are its chunks'),
// and the lengths of the documents that may be ranked. sumLen is the chunk
// scope's length sum, which is the document scope's.
func docRankTx(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, sumLen int64, entitled bool, filterArgs []any) ([]retrieval.DocHit, error) {
	if len(req.Terms) == 0 {
		return []retrieval.DocHit{}, nil
	}
	scope := ``
	if entitled {
		scope = ` AND ` + visibleSQL
	}
	rows, err := tx.Query(ctx, `
		SELECT q.ord::int, u.tf, c.doc_id, `+visibleSQL+` AND NOT `+staleSQL+`
		FROM unnest($1::text[], $6::text[]) WITH ORDINALITY AS q(term, bucket, ord)
		JOIN `+t.tables.postings+` p ON p.term IN (q.term, q.bucket)
		CROSS JOIN LATERAL unnest(p.chunks, p.tfs, p.terms) AS u(chunk, tf, term)
		JOIN `+t.tables.chunks+` c ON c.id = u.chunk
		WHERE coalesce(u.term, p.term) = q.term`+scope,
		append(append([]any{req.Terms}, filterArgs...), TermBuckets(req.Terms))...)
	if err != nil {
		return nil, classify(err)
	}
	counter := retrieval.NewDocCounter(len(req.Terms))
	for rows.Next() {
		var ord int
		var tf int64
		var docID string
		var ok bool
		if err := rows.Scan(&ord, &tf, &docID, &ok); err != nil {
			rows.Close()
			return nil, err
		}
		counter.Add(ord-1, docID, tf, ok)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	ids := counter.IDs()
	sc := retrieval.DocScope{SumLen: sumLen}
	countSQL := `SELECT count(*)::bigint FROM ` + t.tables.documents + ` c`
	var countArgs []any
	if entitled {
		countSQL += ` WHERE c.classification <= $1 AND c.barriers <@ $2::text[]`
		countArgs = filterArgs[:2]
	}
	if err := tx.QueryRow(ctx, countSQL, countArgs...).Scan(&sc.N); err != nil {
		return nil, classify(err)
	}
	length := make(map[string]int64, len(ids))
	lrows, err := tx.Query(ctx, `
		SELECT doc_id, sum(length)::bigint FROM `+t.tables.chunks+`
		WHERE doc_id = ANY($1::text[]) GROUP BY doc_id`, ids)
	if err != nil {
		return nil, classify(err)
	}
	for lrows.Next() {
		var id string
		var n int64
		if err := lrows.Scan(&id, &n); err != nil {
			lrows.Close()
			return nil, err
		}
		length[id] = n
	}
	if err := lrows.Err(); err != nil {
		return nil, classify(err)
	}
	docs, df := counter.Evidence(func(docID string) int64 { return length[docID] })
	sc.DF = df
	return retrieval.RankDocs(&req, docs, sc, t.settings.BM25), nil
}
