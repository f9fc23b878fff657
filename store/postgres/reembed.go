package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
)

// Re-embedding moves a tenant to another embedding model (or dimensions)
// with no downtime; migrations/00010_embedding_models.sql describes the
// states. Every step that changes the tenant's models takes the tenant's
// write lock, which every write takes too, so a write stores vectors of
// exactly the models current when it commits (scanModels), and a reader's
// snapshot sees one model in the registry and the same model's vectors in
// the embedding column.

// ReembedStatus is a tenant's re-embedding state.
type ReembedStatus struct {
	// State is "none", "backfill" or "cutover".
	State string
	// Current is the model queries use; Next the second slot's model (nil
	// in "none"): the target during backfill, the previous model after the
	// cut-over.
	Current embed.Spec
	Next    *embed.Spec
	// Chunks counts the tenant's chunks and Filled those whose second slot
	// holds a vector.
	Chunks, Filled int64
}

// ReembedStatus reads tenant's re-embedding state.
func (s *Store) ReembedStatus(ctx context.Context, tenant string) (ReembedStatus, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil {
		return ReembedStatus{}, err
	}
	if !found {
		return ReembedStatus{}, fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
	}
	st := ReembedStatus{State: t.reembed, Current: t.settings.Spec(), Next: t.next}
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(embedding_next) FROM `+t.tables.chunks).Scan(&st.Chunks, &st.Filled); err != nil {
		return st, classify(err)
	}
	return st, nil
}

// reembedStep runs fn in one transaction holding tenant's write lock
// exclusively (no write runs beside it) and its stats row, with the
// registry row read (and locked) in that transaction.
func (s *Store) reembedStep(ctx context.Context, tenant string, fn func(tx pgx.Tx, t tenantInfo) error) error {
	return s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		t, found, err := lookupTenant(ctx, tx, tenant, nil)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
		}
		if err := lockWriteExclusive(ctx, tx, t.tables); err != nil {
			return err
		}
		if err := lockStats(ctx, tx, t.tables); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM cordon.tenants WHERE name = $1 FOR UPDATE`, tenant); err != nil {
			return ownerError(err, tenant)
		}
		// Read again under the lock: a step that committed meanwhile is seen.
		if t, _, err = lookupTenant(ctx, tx, tenant, nil); err != nil {
			return err
		}
		return fn(tx, t)
	})
}

// ownerError explains a refused registry change.
func ownerError(err error, tenant string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return fmt.Errorf("%w: the database role may not change tenant %q: re-embed as the owner role (%v)", ErrOwnerRequired, tenant, err)
	}
	return classify(err)
}

// BeginReembed starts moving tenant to the model to: from then on every
// write stores vectors of both models. Starting again with the same target
// is a no-op (a backfill resumes where it stopped).
func (s *Store) BeginReembed(ctx context.Context, tenant string, to embed.Spec) error {
	if to.Model == "" {
		to.Model = embed.Hash
	}
	if err := embed.ValidateModel(to.Model); err != nil {
		return err
	}
	if err := hashembed.ValidateDims(to.Dims); err != nil {
		return err
	}
	if err := s.opts.Models.Check(to); err != nil {
		return err
	}
	return s.reembedStep(ctx, tenant, func(tx pgx.Tx, t tenantInfo) error {
		switch {
		case t.reembed == "backfill" && *t.next == to:
			return nil
		case t.reembed == "backfill":
			return fmt.Errorf("%w: tenant %q is re-embedding to %s: finish that one (cut over, then finish) or abort it first", ErrReembed, tenant, *t.next)
		case t.reembed == "cutover":
			return fmt.Errorf("%w: tenant %q has cut over to %s: finish or roll back first", ErrReembed, tenant, t.settings.Spec())
		case t.settings.Spec() == to:
			return fmt.Errorf("%w: tenant %q already uses %s", ErrReembed, tenant, to)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+t.tables.chunks+` SET embedding_next = NULL, norm_sq_next = NULL, max_abs_next = NULL WHERE embedding_next IS NOT NULL`); err != nil {
			return classify(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+t.tables.stats+` SET max_abs_next = 0`); err != nil {
			return classify(err)
		}
		_, err := tx.Exec(ctx, `UPDATE cordon.tenants SET reembed_state = 'backfill', next_model = $2, next_dims = $3 WHERE name = $1`,
			tenant, to.Model, to.Dims)
		return ownerError(err, tenant)
	})
}

// Backfill fills the second vector slot of every chunk that has none, batch
// chunks at a time (embedded outside any transaction, stored in a short one
// under the write lock), calling progress after each batch. It stops when
// every chunk is filled or ctx ends; a backfill that stops for any reason
// loses nothing and resumes where it stopped.
func (s *Store) Backfill(ctx context.Context, tenant string, batch int, progress func(filled, total int64)) error {
	if batch < 1 {
		return fmt.Errorf("%w: batch %d must be >= 1", cordontype.ErrInvalid, batch)
	}
	for {
		t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
		}
		if t.reembed != "backfill" {
			return fmt.Errorf("%w: tenant %q is not backfilling (state %s): start with BeginReembed", ErrReembed, tenant, t.reembed)
		}
		rows, err := s.pool.Query(ctx, `SELECT id, text FROM `+t.tables.chunks+` WHERE embedding_next IS NULL ORDER BY id LIMIT $1`, batch)
		if err != nil {
			return classify(err)
		}
		var ids []int64
		var texts []string
		for rows.Next() {
			var id int64
			var text string
			if err := rows.Scan(&id, &text); err != nil {
				rows.Close()
				return classify(err)
			}
			ids, texts = append(ids, id), append(texts, text)
		}
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		if len(ids) == 0 {
			return nil
		}
		vecs, err := s.opts.Models.Vectors(ctx, *t.next, texts, embed.Document)
		if err != nil {
			return err
		}
		lits := make([]string, len(vecs))
		norms := make([]int64, len(vecs))
		maxes := make([]int32, len(vecs))
		var top int32
		for i, v := range vecs {
			lits[i], norms[i], maxes[i] = vectorLiteral(v), hashembed.NormSq(v), maxAbsOf(v)
			top = max(top, maxes[i])
		}
		next := *t.next
		err = s.reembedStep(ctx, tenant, func(tx pgx.Tx, t tenantInfo) error {
			if t.reembed != "backfill" || *t.next != next {
				return fmt.Errorf("%w: tenant %q stopped backfilling %s meanwhile", ErrReembed, tenant, next)
			}
			// A chunk replaced meanwhile is gone (its id is not reused)
			// and its successor was written with both vectors.
			if _, err := tx.Exec(ctx, `UPDATE `+t.tables.chunks+` c SET embedding_next = u.v::vector, norm_sq_next = u.n, max_abs_next = u.m
				FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::integer[]) AS u(id, v, n, m)
				WHERE c.id = u.id AND c.embedding_next IS NULL`, ids, lits, norms, maxes); err != nil {
				return classify(err)
			}
			_, err := tx.Exec(ctx, `UPDATE `+t.tables.stats+` SET max_abs_next = greatest(max_abs_next, $1)`, top)
			return classify(err)
		})
		if err != nil {
			return err
		}
		if progress != nil {
			st, err := s.ReembedStatus(ctx, tenant)
			if err != nil {
				return err
			}
			progress(st.Filled, st.Chunks)
		}
	}
}

// vectorLiteral is pgvector's text form of an integer vector.
func vectorLiteral(v []int32) string {
	b := make([]byte, 0, 4*len(v)+2)
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, ']'))
}

// Cutover swaps the two vector slots and the two models in one
// transaction: the next query ranks with the target model. It requires a
// complete backfill. The previous model's vectors stay in the second slot
// and writes go on storing both, so Rollback is exact.
func (s *Store) Cutover(ctx context.Context, tenant string) error {
	return s.reembedStep(ctx, tenant, func(tx pgx.Tx, t tenantInfo) error {
		if t.reembed != "backfill" {
			return fmt.Errorf("%w: tenant %q is not backfilling (state %s): nothing to cut over", ErrReembed, tenant, t.reembed)
		}
		var missing int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.tables.chunks+` WHERE embedding_next IS NULL`).Scan(&missing); err != nil {
			return classify(err)
		}
		if missing > 0 {
			return fmt.Errorf("%w: %d chunks of tenant %q have no %s vector yet: run the backfill again (cordon tenant reembed %s)", ErrReembed, missing, tenant, *t.next, tenant)
		}
		return swapSlots(ctx, tx, t, "cutover")
	})
}

// Rollback undoes a cut-over (the previous model answers again, and the
// tenant is backfilling the target, complete, so it may cut over again), or
// aborts a backfill (the second slot is cleared).
func (s *Store) Rollback(ctx context.Context, tenant string) error {
	return s.reembedStep(ctx, tenant, func(tx pgx.Tx, t tenantInfo) error {
		switch t.reembed {
		case "cutover":
			return swapSlots(ctx, tx, t, "backfill")
		case "backfill":
			return clearNext(ctx, tx, t)
		}
		return fmt.Errorf("%w: tenant %q is not re-embedding", ErrReembed, tenant)
	})
}

// FinishReembed ends a cut-over re-embedding: the previous model's vectors
// are dropped and writes store one vector again.
func (s *Store) FinishReembed(ctx context.Context, tenant string) error {
	return s.reembedStep(ctx, tenant, func(tx pgx.Tx, t tenantInfo) error {
		if t.reembed != "cutover" {
			return fmt.Errorf("%w: tenant %q has not cut over (state %s): cut over first", ErrReembed, tenant, t.reembed)
		}
		return clearNext(ctx, tx, t)
	})
}

// swapSlots exchanges the two vector slots of every chunk and the two
// models, and moves to state. The index version moves on: caches reload
// (their settings no longer match) and audit records cite the new one.
func swapSlots(ctx context.Context, tx pgx.Tx, t tenantInfo, state string) error {
	if _, err := tx.Exec(ctx, `UPDATE `+t.tables.chunks+` SET
		embedding = embedding_next, embedding_next = embedding,
		norm_sq = norm_sq_next, norm_sq_next = norm_sq,
		max_abs = max_abs_next, max_abs_next = max_abs`); err != nil {
		return classify(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+t.tables.stats+` SET max_abs = max_abs_next, max_abs_next = max_abs, version = version + 1`); err != nil {
		return classify(err)
	}
	// Every vector changed: the column blocks are built again (the caller
	// holds the write lock exclusively).
	if err := rebuildColumns(ctx, tx, t.tables); err != nil {
		return err
	}
	cur := t.settings.Spec()
	_, err := tx.Exec(ctx, `UPDATE cordon.tenants SET embed_model = next_model, dims = next_dims,
		next_model = $2, next_dims = $3, reembed_state = $4 WHERE name = $1`, t.name, cur.Model, cur.Dims, state)
	return ownerError(err, t.name)
}

// clearNext drops the second slot and ends the re-embedding.
func clearNext(ctx context.Context, tx pgx.Tx, t tenantInfo) error {
	if _, err := tx.Exec(ctx, `UPDATE `+t.tables.chunks+` SET embedding_next = NULL, norm_sq_next = NULL, max_abs_next = NULL WHERE embedding_next IS NOT NULL`); err != nil {
		return classify(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+t.tables.stats+` SET max_abs_next = 0`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `UPDATE cordon.tenants SET next_model = NULL, next_dims = NULL, reembed_state = 'none' WHERE name = $1`, t.name)
	return ownerError(err, t.name)
}

// ShadowReport compares the two models' dense top-k lists over a set of
// queries.
type ShadowReport struct {
	Queries int
	K       int
	// MeanOverlap is the mean over queries of |top-k(current) ∩
	// top-k(next)| / k; MinOverlap the smallest.
	MeanOverlap, MinOverlap float64
}

// Shadow ranks each query's dense side over every chunk of tenant with
// both models (current slot and second slot, chunks without a second
// vector skipped) and reports how far their top-k lists agree. It reads in
// one snapshot and returns only counts, never chunk contents.
func (s *Store) Shadow(ctx context.Context, tenant string, queries []string, k int) (ShadowReport, error) {
	rep := ShadowReport{K: k, MinOverlap: 1}
	if k < 1 {
		return rep, fmt.Errorf("%w: k %d must be >= 1", cordontype.ErrInvalid, k)
	}
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil {
		return rep, err
	}
	if !found {
		return rep, fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
	}
	if t.next == nil {
		return rep, fmt.Errorf("%w: tenant %q is not re-embedding: nothing to compare", ErrReembed, tenant)
	}
	var kept []string
	for _, q := range queries {
		if len(analysis.Tokenize(q)) > 0 {
			kept = append(kept, q)
		}
	}
	if len(kept) == 0 {
		return rep, fmt.Errorf("%w: no query with a token to compare", cordontype.ErrInvalid)
	}
	cur, err := s.opts.Models.Vectors(ctx, t.settings.Spec(), kept, embed.Query)
	if err != nil {
		return rep, err
	}
	nxt, err := s.opts.Models.Vectors(ctx, *t.next, kept, embed.Query)
	if err != nil {
		return rep, err
	}
	var sum float64
	err = s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var maxCur, maxNext int32
		if err := tx.QueryRow(ctx, `SELECT max_abs, max_abs_next FROM `+t.tables.stats).Scan(&maxCur, &maxNext); err != nil {
			return classify(err)
		}
		for i := range kept {
			a, err := shadowTop(ctx, tx, t, "embedding", "norm_sq", cur[i], maxCur, k)
			if err != nil {
				return err
			}
			b, err := shadowTop(ctx, tx, t, "embedding_next", "norm_sq_next", nxt[i], maxNext, k)
			if err != nil {
				return err
			}
			n := 0
			for _, id := range a {
				if slices.Contains(b, id) {
					n++
				}
			}
			o := float64(n) / float64(k)
			sum += o
			rep.MinOverlap = min(rep.MinOverlap, o)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.Queries = len(kept)
	rep.MeanOverlap = sum / float64(len(kept))
	return rep, nil
}

// shadowTop is the top-k chunk ids by cosine of q against one slot, whose
// largest |component| is maxAbs: exact dot products (exactDot, as the
// query path), ordered as the dense ranking.
func shadowTop(ctx context.Context, tx pgx.Tx, t tenantInfo, col, normCol string, q []int32, maxAbs int32, k int) ([]int64, error) {
	dot, qarg := exactDot("c."+col, q, maxAbs)
	rows, err := tx.Query(ctx, `
		SELECT id FROM (
			SELECT c.id, c.chunk_id, c.`+normCol+` AS n, `+dot+` AS dot
			FROM `+t.tables.chunks+` c WHERE c.`+col+` IS NOT NULL
		) d WHERE dot > 0 AND n > 0
		ORDER BY dot::float8 / sqrt(n::float8) DESC, chunk_id LIMIT $2`, qarg, k)
	if err != nil {
		return nil, classify(err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// SampleQueries returns up to n pseudo-queries for Shadow when the operator
// gives none: the first words of chunks spread evenly over the tenant.
func (s *Store) SampleQueries(ctx context.Context, tenant string, n, words int) ([]string, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrTenantNotFound, tenant)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT ON (b) text FROM (
			SELECT text, id, ntile($1) OVER (ORDER BY id) AS b FROM `+t.tables.chunks+`
		) x ORDER BY b, id`, n)
	if err != nil {
		return nil, classify(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err)
	}
	out := make([]string, 0, len(texts))
	for _, text := range texts {
		toks := analysis.Tokenize(text)
		if len(toks) > words {
			toks = toks[:words]
		}
		if len(toks) > 0 {
			out = append(out, strings.Join(toks, " "))
		}
	}
	return out, nil
}
