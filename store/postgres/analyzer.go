package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// reindexPage is how many documents SetAnalyzer reads and writes at a
// time.
const reindexPage = 256

// fieldsReaderMin is the reader_min of a tenant whose field terms are
// under the current rules (analysis.FieldsVersion: section paths and
// length-normalised frequencies): the migration that added them (00018;
// create_tenant records it too). pathFieldsReaderMin is that of the rules
// before (analysis.FieldsPathVersion), which need chunks.section_path
// (00017).
const (
	fieldsReaderMin     = 18
	pathFieldsReaderMin = 17
)

// SetAnalyzer changes tenant's analyzer (analysis.AnalyzerExact or
// analysis.AnalyzerEnglish) and whether it indexes field terms
// (index.Settings.Fields), and re-indexes every document under them, in
// one transaction: the documents are read back from the database and
// written again as they were (text, title, metadata, labels, as_of_tick),
// their chunks, postings and column blocks rebuilt, so the tenant is
// indexed wholly under the old analyzer or wholly under the new one. The
// tenant's writes wait meanwhile (its write lock is held exclusively);
// queries answer from the old index until the commit. A tenant whose
// model is not hashing has its chunks embedded again by the store's
// provider. progress, when set, is called after each page of documents
// with the documents written and the total. It reports how many documents
// were re-indexed; a tenant already under analyzer and fields is re-indexed
// too (a repair). Re-embedding must be finished first.
func (s *Store) SetAnalyzer(ctx context.Context, tenant, analyzer string, fields bool, progress func(done, total int64)) (int64, error) {
	if err := cordontype.ValidateTenant(tenant); err != nil {
		return 0, err
	}
	if err := analysis.ValidateAnalyzer(analyzer); err != nil {
		return 0, fmt.Errorf("%w: %w", cordontype.ErrInvalid, err)
	}
	var done int64
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		t, found, err := lookupTenant(ctx, tx, tenant, nil)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
		}
		if t.reembed != "none" {
			return fmt.Errorf("%w: tenant %q is re-embedding (%s): finish or roll back first ('cordon tenant reembed')", ErrReembed, tenant, t.reembed)
		}
		if err := lockWriteExclusive(ctx, tx, t.tables); err != nil {
			return err
		}
		// Field terms under the current rules need a binary that reads
		// their frequencies as such (migration 18): one without must refuse
		// the tenant, and may serve it again once it has none (no other
		// rule raises reader_min to fieldsReaderMin or pathFieldsReaderMin).
		_, err = tx.Exec(ctx, `UPDATE cordon.tenants SET tokenizer_version = $2,
			reader_min = CASE WHEN $3 THEN greatest(reader_min, $4)
				WHEN reader_min IN ($4, $5) THEN $5 - 1 ELSE reader_min END
			WHERE name = $1`, tenant, analysis.Version(analyzer, fields), fields, fieldsReaderMin, pathFieldsReaderMin)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return fmt.Errorf("%w: the database role may not change tenant %q (%s): run 'cordon tenant set --analyzer %s %s' as the owner role",
				ErrOwnerRequired, tenant, pe.Message, analyzer, tenant)
		}
		if err != nil {
			return classify(err)
		}
		t.settings.Analyzer, t.settings.Fields, t.settings.FieldRules = analyzer, fields, ""
		var total int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.tables.documents).Scan(&total); err != nil {
			return classify(err)
		}
		after := ""
		for {
			docs, metas, err := readDocPage(ctx, tx, t, after)
			if err != nil {
				return err
			}
			if len(docs) == 0 {
				return nil
			}
			batch, err := s.prepareDocs(ctx, t, docs)
			if err != nil {
				return fmt.Errorf("re-index tenant %q: %w", tenant, err)
			}
			for i := range batch {
				batch[i].meta = metas[i] // the stored jsonb, as it is
			}
			w, err := s.prepareWrite(ctx, t.tables, batch)
			if err != nil {
				return err
			}
			if err := putTx(ctx, tx, t, w); err != nil {
				return err
			}
			done += int64(len(docs))
			after = docs[len(docs)-1].DocID
			if progress != nil {
				progress(done, total)
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("set the analyzer of tenant %q: %w", tenant, err)
	}
	if s.cache != nil {
		schema, _ := SchemaName(tenant)
		s.cache.forget(schema)
	}
	return done, nil
}

// readDocPage reads up to reindexPage documents of t with doc ids after
// after, in doc id order, and their metadata as stored.
func readDocPage(ctx context.Context, tx pgx.Tx, t tenantInfo, after string) ([]cordontype.Document, []string, error) {
	rows, err := tx.Query(ctx, `SELECT doc_id, classification, barriers, as_of_tick, title, metadata::text, text
		FROM `+t.tables.documents+` WHERE doc_id > $1 ORDER BY doc_id LIMIT $2`, after, reindexPage)
	if err != nil {
		return nil, nil, classify(err)
	}
	defer rows.Close()
	var docs []cordontype.Document
	var metas []string
	for rows.Next() {
		var d cordontype.Document
		var class int16
		var meta string
		if err := rows.Scan(&d.DocID, &class, &d.Barriers, &d.AsOfTick, &d.Title, &meta, &d.Text); err != nil {
			return nil, nil, classify(err)
		}
		d.Tenant, d.Classification = t.name, cordontype.Classification(class)
		if d.Barriers == nil {
			d.Barriers = []string{}
		}
		docs = append(docs, d)
		metas = append(metas, meta)
	}
	return docs, metas, classify(rows.Err())
}
