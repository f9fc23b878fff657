package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// Put validates, chunks and stores doc in one transaction, replacing any
// document with the same id atomically. On any error nothing changes.
func (s *Store) Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error) {
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	t, found, err := lookupTenant(ctx, s.pool, doc.Tenant)
	if err != nil {
		return nil, err
	}
	if !found {
		if s.opts.AutoCreate == nil {
			return nil, fmt.Errorf("put document %q: %w: %q (create it with 'cordon tenant create %s')", doc.DocID, ErrTenantNotFound, doc.Tenant, doc.Tenant)
		}
		if _, err := createTenant(ctx, s.pool, doc.Tenant, *s.opts.AutoCreate); err != nil {
			return nil, err
		}
		if t, _, err = lookupTenant(ctx, s.pool, doc.Tenant); err != nil {
			return nil, err
		}
	}
	prepared, err := index.Prepare(&doc, t.settings)
	if err != nil {
		return nil, err
	}
	meta, err := metadataJSON(doc.Metadata)
	if err != nil {
		return nil, err
	}
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return putTx(ctx, tx, t.tables, &doc, meta, prepared)
	})
	if err != nil {
		return nil, fmt.Errorf("put document %q: %w", doc.DocID, err)
	}
	out := make([]cordontype.Chunk, len(prepared))
	for i := range prepared {
		out[i] = prepared[i].Chunk
	}
	return out, nil
}

// lockStats takes the tenant's write lock (its stats row).
func lockStats(ctx context.Context, tx pgx.Tx, tb tables) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM `+tb.stats+` FOR UPDATE`)
	return classify(err)
}

// removeDoc deletes a document (chunks and postings cascade) and returns how
// many chunks and tokens it had.
func removeDoc(ctx context.Context, tx pgx.Tx, tb tables, docID string) (existed bool, n, sumLen int64, err error) {
	err = tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(length), 0)::bigint FROM `+tb.chunks+` WHERE doc_id = $1`, docID).Scan(&n, &sumLen)
	if err != nil {
		return false, 0, 0, classify(err)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM `+tb.documents+` WHERE doc_id = $1`, docID)
	if err != nil {
		return false, 0, 0, classify(err)
	}
	return tag.RowsAffected() > 0, n, sumLen, nil
}

func putTx(ctx context.Context, tx pgx.Tx, tb tables, doc *cordontype.Document, meta string, prepared []index.PreparedChunk) error {
	if err := lockStats(ctx, tx, tb); err != nil {
		return err
	}
	_, oldN, oldLen, err := removeDoc(ctx, tx, tb, doc.DocID)
	if err != nil {
		return err
	}
	hash := blake2b.Sum256([]byte(doc.Text))
	if _, err := tx.Exec(ctx, `INSERT INTO `+tb.documents+`
		(doc_id, classification, barriers, as_of_tick, title, metadata, text, content_hash)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)`,
		doc.DocID, int16(doc.Classification), doc.Barriers, doc.AsOfTick, doc.Title, meta, doc.Text, hash[:]); err != nil {
		return classify(err)
	}
	var newLen int64
	var maxAbs int32
	rows := make([][]any, len(prepared))
	for i := range prepared {
		pc := &prepared[i]
		c := &pc.Chunk
		m := maxAbsOf(pc.Vector)
		maxAbs = max(maxAbs, m)
		newLen += int64(c.Length)
		rows[i] = []any{c.ChunkID, c.DocID, int32(i), c.Section, c.Text, int32(c.StartChar), int32(c.EndChar), int32(c.Length),
			int16(c.Classification), c.Barriers, c.AsOfTick, pgvector.NewVector(index.Float32s(pc.Vector)), pc.NormSq, m}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "chunks"},
		[]string{"chunk_id", "doc_id", "ord", "section", "text", "start_char", "end_char", "length",
			"classification", "barriers", "as_of_tick", "embedding", "norm_sq", "max_abs"},
		pgx.CopyFromRows(rows)); err != nil {
		return classify(err)
	}
	ids := make([]int64, len(prepared))
	r, err := tx.Query(ctx, `SELECT id, ord FROM `+tb.chunks+` WHERE doc_id = $1`, doc.DocID)
	if err != nil {
		return classify(err)
	}
	for r.Next() {
		var id int64
		var ord int32
		if err := r.Scan(&id, &ord); err != nil {
			r.Close()
			return err
		}
		ids[ord] = id
	}
	if err := r.Err(); err != nil {
		return classify(err)
	}
	var postings [][]any
	for i := range prepared {
		for j, term := range prepared[i].Terms {
			postings = append(postings, []any{term, ids[i], prepared[i].TF[j]})
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "postings"}, []string{"term", "chunk", "tf"}, pgx.CopyFromRows(postings)); err != nil {
		return classify(err)
	}
	var version int64
	if err := tx.QueryRow(ctx, `UPDATE `+tb.stats+` SET
		n_chunks = n_chunks - $1 + $2, sum_len = sum_len - $3 + $4,
		max_abs = greatest(max_abs, $5), version = version + 1
		RETURNING version`,
		oldN, int64(len(prepared)), oldLen, newLen, maxAbs).Scan(&version); err != nil {
		return classify(err)
	}
	return logChange(ctx, tx, tb, version, doc.DocID)
}

// changeLogKeep is how many versions of the change log writers keep; a
// cache further behind reloads the tenant.
const changeLogKeep = 100_000

// logChange records that docID changed at version, and prunes the log.
func logChange(ctx context.Context, tx pgx.Tx, tb tables, version int64, docID string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO `+tb.changes+` (version, doc_id) VALUES ($1, $2)`, version, docID); err != nil {
		return classify(err)
	}
	if version%1000 == 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM `+tb.changes+` WHERE version <= $1`, version-changeLogKeep); err != nil {
			return classify(err)
		}
	}
	return nil
}

// Delete removes a document in one transaction. It reports whether it existed;
// an unknown tenant has no documents.
func (s *Store) Delete(ctx context.Context, tenant, docID string) (bool, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return false, err
	}
	if err := cordontype.ValidateDocID(docID); err != nil {
		return false, err
	}
	t, found, err := lookupTenant(ctx, s.pool, tenant)
	if err != nil || !found {
		return false, err
	}
	var existed bool
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockStats(ctx, tx, t.tables); err != nil {
			return err
		}
		var n, sumLen int64
		var err error
		existed, n, sumLen, err = removeDoc(ctx, tx, t.tables, docID)
		if err != nil || !existed {
			return err
		}
		var version int64
		if err := tx.QueryRow(ctx, `UPDATE `+t.tables.stats+` SET n_chunks = n_chunks - $1, sum_len = sum_len - $2, version = version + 1
			RETURNING version`, n, sumLen).Scan(&version); err != nil {
			return classify(err)
		}
		return logChange(ctx, tx, t.tables, version, docID)
	})
	if err != nil {
		return false, fmt.Errorf("delete document %q: %w", docID, err)
	}
	return existed, nil
}

func maxAbsOf(v []int32) int32 {
	var m int32
	for _, x := range v {
		m = max(m, x, -x)
	}
	return m
}
