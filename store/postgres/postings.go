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
// tenant's write lock, after the batch's chunks were inserted and replaced
// ones deleted, so "live" below is exactly the committed state to be.
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

	// Merge: take the chosen blocks out and fold their live postings into
	// the batch's lists.
	if len(delTerms) > 0 {
		rows, err := tx.Query(ctx, `
			WITH gone AS (
				DELETE FROM `+tb.postings+` p
				USING unnest($1::text[], $2::bigint[]) AS d(term, block)
				WHERE p.term = d.term AND p.block = d.block
				RETURNING p.term, p.chunks, p.tfs)
			SELECT g.term, u.chunk, u.tf
			FROM gone g CROSS JOIN LATERAL unnest(g.chunks, g.tfs) AS u(chunk, tf)
			WHERE EXISTS (SELECT 1 FROM `+tb.chunks+` c WHERE c.id = u.chunk)`, delTerms, delBlocks)
		if err != nil {
			return classify(err)
		}
		for rows.Next() {
			var term string
			var chunk int64
			var tf int32
			if err := rows.Scan(&term, &chunk, &tf); err != nil {
				rows.Close()
				return err
			}
			p := batch[term]
			p.chunks = append(p.chunks, chunk)
			p.tfs = append(p.tfs, tf)
		}
		if err := rows.Err(); err != nil {
			return classify(err)
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
