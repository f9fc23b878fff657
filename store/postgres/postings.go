package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Postings are stored in blocks: one row holds one term's postings for many
// chunks (migration 00006). A write adds one block per distinct term of its
// batch and merges a term's blocks size-tiered, so a term has few blocks
// (at most mergeFanout-1 per size class) and a posting is rewritten about
// once per size class it climbs.

// mergeFanout is the merge factor: a term's blocks are merged when it has
// this many of the new block's size class or smaller. Size classes are
// powers of mergeFanout postings.
const mergeFanout = 8

// sizeClass is floor(log_mergeFanout(n)) for n >= 1.
func sizeClass(n int64) int {
	c := 0
	for n >= mergeFanout {
		n /= mergeFanout
		c++
	}
	return c
}

// mergeSelect decides which of a term's existing blocks (their posting
// counts) to merge with a new block of n postings: every block of the
// merged result's size class or smaller, repeatedly, as long as there are
// mergeFanout-1 of them besides the result. It returns their indexes in
// ascending order, or none.
func mergeSelect(existing []int64, n int64) []int {
	picked := make([]bool, len(existing))
	total := n
	var out []int
	for {
		class := sizeClass(total)
		var cand []int
		for i, m := range existing {
			if !picked[i] && sizeClass(m) <= class {
				cand = append(cand, i)
			}
		}
		if len(cand)+1 < mergeFanout {
			break
		}
		for _, i := range cand {
			picked[i] = true
			total += existing[i]
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// postingList is one term's postings, parallel slices in chunk id order.
type postingList struct {
	chunks []int64
	tfs    []int32
}

// writePostings stores the batch's postings (term -> list, chunk ids
// ascending) as blocks numbered block, merging each term's blocks as
// mergeSelect decides. It runs in the writer's transaction, under the
// tenant's write lock, after the batch's chunks were inserted.
func writePostings(ctx context.Context, tx pgx.Tx, tb tables, block int64, batch map[string]*postingList) error {
	if len(batch) == 0 {
		return nil
	}
	terms := make([]string, 0, len(batch))
	for t := range batch {
		terms = append(terms, t)
	}
	slices.Sort(terms)

	// The existing blocks of the batch's terms.
	type blk struct {
		block, n int64
	}
	existing := make(map[string][]blk)
	rows, err := tx.Query(ctx, `SELECT term, block, n FROM `+tb.postings+` WHERE term = ANY($1)`, terms)
	if err != nil {
		return classify(err)
	}
	for rows.Next() {
		var term string
		var b blk
		if err := rows.Scan(&term, &b.block, &b.n); err != nil {
			rows.Close()
			return err
		}
		existing[term] = append(existing[term], b)
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}

	var delTerms []string
	var delBlocks []int64
	for _, t := range terms {
		bs := existing[t]
		if len(bs) == 0 {
			continue
		}
		slices.SortFunc(bs, func(a, b blk) int { return cmpInt64(a.block, b.block) })
		ns := make([]int64, len(bs))
		for i, b := range bs {
			ns[i] = b.n
		}
		for _, i := range mergeSelect(ns, int64(len(batch[t].chunks))) {
			delTerms = append(delTerms, t)
			delBlocks = append(delBlocks, bs[i].block)
		}
	}

	// Merge: take the chosen blocks out and put their postings, in block
	// order, in front of the batch's (chunk ids grow and writes are
	// serialised, so this is usually sorted already; a block merged past an
	// older, bigger one is not, and sortPostings repairs that). Postings of
	// removed chunks are carried along: maybeCollect drops them.
	if len(delTerms) > 0 {
		rows, err := tx.Query(ctx, `
			DELETE FROM `+tb.postings+` p
			USING unnest($1::text[], $2::bigint[]) AS d(term, block)
			WHERE p.term = d.term AND p.block = d.block
			RETURNING p.term, p.block, p.chunks, p.tfs`, delTerms, delBlocks)
		if err != nil {
			return classify(err)
		}
		type gone struct {
			block  int64
			chunks []int64
			tfs    []int32
		}
		merged := make(map[string][]gone)
		for rows.Next() {
			var term string
			var g gone
			if err := rows.Scan(&term, &g.block, &g.chunks, &g.tfs); err != nil {
				rows.Close()
				return err
			}
			merged[term] = append(merged[term], g)
		}
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		for term, gs := range merged {
			slices.SortFunc(gs, func(a, b gone) int { return cmpInt64(a.block, b.block) })
			p := batch[term]
			var chunks []int64
			var tfs []int32
			for _, g := range gs {
				chunks = append(chunks, g.chunks...)
				tfs = append(tfs, g.tfs...)
			}
			p.chunks = append(chunks, p.chunks...)
			p.tfs = append(tfs, p.tfs...)
		}
	}

	out := make([][]any, 0, len(terms))
	for _, t := range terms {
		p := batch[t]
		sortPostings(p)
		out = append(out, []any{t, block, int32(len(p.chunks)), p.chunks, p.tfs})
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "postings"}, []string{"term", "block", "n", "chunks", "tfs"}, pgx.CopyFromRows(out))
	return classify(err)
}

// sortPostings orders a list by chunk id (merged blocks arrive in any order).
func sortPostings(p *postingList) {
	if slices.IsSorted(p.chunks) {
		return
	}
	idx := make([]int, len(p.chunks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmpInt64(p.chunks[a], p.chunks[b]) })
	chunks := make([]int64, len(idx))
	tfs := make([]int32, len(idx))
	for i, j := range idx {
		chunks[i], tfs[i] = p.chunks[j], p.tfs[j]
	}
	p.chunks, p.tfs = chunks, tfs
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// gcMinDead is the fewest dead postings (as counted in stats.dead_postings)
// worth a rewrite.
const gcMinDead = 4096

// maybeCollect rewrites the tenant's postings without those of removed
// chunks once stats.dead_postings exceeds a quarter of the live tokens.
// It runs in the writer's transaction, under the tenant's write lock.
func maybeCollect(ctx context.Context, tx pgx.Tx, tb tables) error {
	var dead, live int64
	if err := tx.QueryRow(ctx, `SELECT dead_postings, sum_len FROM `+tb.stats).Scan(&dead, &live); err != nil {
		return classify(err)
	}
	if dead < gcMinDead || dead*4 <= live {
		return nil
	}
	return collectPostings(ctx, tx, tb)
}

// collectPostings drops every posting whose chunk no longer exists, and
// blocks left empty, and resets stats.dead_postings.
func collectPostings(ctx context.Context, tx pgx.Tx, tb tables) error {
	if _, err := tx.Exec(ctx, `
		UPDATE `+tb.postings+` p SET n = f.n, chunks = f.chunks, tfs = f.tfs
		FROM (
			SELECT q.term, q.block, count(*)::int AS n,
			       array_agg(u.chunk ORDER BY u.ord) AS chunks, array_agg(u.tf ORDER BY u.ord) AS tfs
			FROM `+tb.postings+` q CROSS JOIN LATERAL unnest(q.chunks, q.tfs) WITH ORDINALITY AS u(chunk, tf, ord)
			WHERE EXISTS (SELECT 1 FROM `+tb.chunks+` c WHERE c.id = u.chunk)
			GROUP BY q.term, q.block) f
		WHERE p.term = f.term AND p.block = f.block AND p.n <> f.n`); err != nil {
		return classify(err)
	}
	if _, err := tx.Exec(ctx, `
		DELETE FROM `+tb.postings+` p
		WHERE NOT EXISTS (SELECT 1 FROM unnest(p.chunks) AS u(chunk) JOIN `+tb.chunks+` c ON c.id = u.chunk)`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `UPDATE `+tb.stats+` SET dead_postings = 0`)
	return classify(err)
}
