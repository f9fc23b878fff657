package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Postings are stored in segments (migration 00006): a write adds one
// segment, a block number holding one row per distinct term of its batch,
// with the term's postings as parallel arrays (chunk ids, tfs). After the
// write commits, segments are merged size-tiered in a transaction of their
// own, so a tenant has few segments (at most mergeFanout-1 per size class)
// and a posting is rewritten about once per size class it climbs.

// mergeFanout is the merge factor: segments are merged when there are this
// many of one size class or smaller. Size classes are powers of mergeFanout
// postings.
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

// fullClass is the size class from which a segment is never merged again
// (8^7, about 2.1 million postings or 23,000 chunks): it bounds how often a
// posting is rewritten, and costs a big tenant one more row per common term
// per full segment (about 43 at a million chunks).
const fullClass = 7

// mergePick chooses segments (by posting count) to merge: for the smallest
// size class c below fullClass that has mergeFanout segments, those and
// every smaller one. It returns their indexes in ascending order, or none.
func mergePick(sizes []int64) []int {
	classes := make([]int, len(sizes))
	count := map[int]int{}
	top := 0
	for i, n := range sizes {
		classes[i] = sizeClass(n)
		count[classes[i]]++
		top = max(top, classes[i])
	}
	for c := 0; c <= min(top, fullClass-1); c++ {
		if count[c] < mergeFanout {
			continue
		}
		var pick []int
		for i, k := range classes {
			if k <= c {
				pick = append(pick, i)
			}
		}
		return pick
	}
	return nil
}

// postingList is one term's postings, parallel slices in chunk id order.
type postingList struct {
	chunks []int64
	tfs    []int32
}

func (p *postingList) add(chunk int64, tf int32) {
	p.chunks = append(p.chunks, chunk)
	p.tfs = append(p.tfs, tf)
}

// postingLists are postings by term.
type postingLists map[string]*postingList

// of returns term's list, creating it empty.
func (m postingLists) of(term string) *postingList {
	p := m[term]
	if p == nil {
		p = &postingList{}
		m[term] = p
	}
	return p
}

// nextBlock draws a block number from the tenant's sequence.
func nextBlock(ctx context.Context, db DBTX, tb tables) (int64, error) {
	var b int64
	err := db.QueryRow(ctx, `SELECT nextval($1::regclass)`, tb.blockSeq).Scan(&b)
	return b, classify(err)
}

// copySegment writes lists as the postings rows of block (one per term with
// postings) and registers the segment.
func copySegment(ctx context.Context, tx pgx.Tx, tb tables, block int64, lists postingLists) error {
	terms := make([]string, 0, len(lists))
	var total int64
	for t, p := range lists {
		if len(p.chunks) > 0 {
			terms = append(terms, t)
			sortPostings(p)
			total += int64(len(p.chunks))
		}
	}
	if len(terms) == 0 {
		return nil
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, newPostingsRows(terms, lists, block),
		`COPY `+tb.postings+` (term, block, n, chunks, tfs) FROM STDIN BINARY`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+tb.segments+` (block, postings) VALUES ($1, $2)`, block, total)
	return classify(err)
}

// mergeLockClass is the first key of the advisory lock that serialises a
// tenant's merges and collections (the second is hashtext(schema)).
const mergeLockClass = 0x436f7264 // "Cord"

// mergeSegments merges one set of segments chosen by mergePick, if any, in
// its own transaction: the merged segments' rows are read, the postings of
// removed chunks dropped, one row per term written as a new segment and the
// old ones deleted, atomically, so readers see either. It does not take the
// tenant's write lock (writers only add segments); a merge already running
// on the tenant makes it return at once. It reports whether it merged.
func (s *Store) mergeSegments(ctx context.Context, tb tables) (bool, error) {
	merged := false
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, mergeLockClass, tb.schema).Scan(&got); err != nil {
			return classify(err)
		}
		if !got {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT block, postings FROM `+tb.segments+` ORDER BY block`)
		if err != nil {
			return classify(err)
		}
		type seg struct{ Block, Postings int64 }
		segs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[seg])
		if err != nil {
			return classify(err)
		}
		sizes := make([]int64, len(segs))
		for i, sg := range segs {
			sizes[i] = sg.Postings
		}
		pick := mergePick(sizes)
		if pick == nil {
			return nil
		}
		blocks := make([]int64, len(pick))
		for i, j := range pick {
			blocks[i] = segs[j].Block
		}
		var dead int64
		if err := tx.QueryRow(ctx, `SELECT dead_postings FROM `+tb.stats).Scan(&dead); err != nil {
			return classify(err)
		}
		lists, err := readSegments(ctx, tx, tb, blocks, dead)
		if err != nil {
			return err
		}
		block, err := nextBlock(ctx, tx, tb)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+tb.postings+` WHERE block = ANY($1)`, blocks); err != nil {
			return classify(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+tb.segments+` WHERE block = ANY($1)`, blocks); err != nil {
			return classify(err)
		}
		merged = true
		return copySegment(ctx, tx, tb, block, lists)
	})
	return merged, err
}

// readSegments reads the postings of blocks, in block order, keeping only
// those whose chunk still exists; with dead zero (the tenant's
// stats.dead_postings: no chunk was removed since the last collection) every
// posting is kept without asking.
func readSegments(ctx context.Context, tx pgx.Tx, tb tables, blocks []int64, dead int64) (postingLists, error) {
	rows, err := tx.Query(ctx, `SELECT term, chunks, tfs FROM `+tb.postings+` WHERE block = ANY($1) ORDER BY block`, blocks)
	if err != nil {
		return nil, classify(err)
	}
	lists := postingLists{}
	for rows.Next() {
		if fd := rows.FieldDescriptions(); fd[1].Format != pgx.BinaryFormatCode || fd[2].Format != pgx.BinaryFormatCode {
			rows.Close()
			return nil, fmt.Errorf("%w: postings arrays not in binary format", errArrayFormat)
		}
		raw := rows.RawValues()
		p := lists[string(raw[0])] // no allocation for a term seen before
		if p == nil {
			p = &postingList{}
			lists[string(raw[0])] = p
		}
		if p.chunks, err = appendInt8Array(p.chunks, raw[1]); err == nil {
			p.tfs, err = appendInt4Array(p.tfs, raw[2])
		}
		if err == nil && len(p.chunks) != len(p.tfs) {
			err = fmt.Errorf("%w: %d chunks and %d tfs", errArrayFormat, len(p.chunks), len(p.tfs))
		}
		if err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if dead == 0 {
		return lists, nil
	}
	var ids []int64
	for _, p := range lists {
		ids = append(ids, p.chunks...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err = tx.Query(ctx, `SELECT id FROM `+tb.chunks+` WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, classify(err)
	}
	liveIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify(err)
	}
	if len(liveIDs) == len(ids) {
		return lists, nil
	}
	live := make(map[int64]bool, len(liveIDs))
	for _, id := range liveIDs {
		live[id] = true
	}
	for _, p := range lists {
		k := 0
		for i, c := range p.chunks {
			if live[c] {
				p.chunks[k], p.tfs[k] = c, p.tfs[i]
				k++
			}
		}
		p.chunks, p.tfs = p.chunks[:k], p.tfs[:k]
	}
	return lists, nil
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
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(p.chunks[a], p.chunks[b]) })
	chunks := make([]int64, len(idx))
	tfs := make([]int32, len(idx))
	for i, j := range idx {
		chunks[i], tfs[i] = p.chunks[j], p.tfs[j]
	}
	p.chunks, p.tfs = chunks, tfs
}

// gcMinDead is the fewest dead postings (as counted in stats.dead_postings)
// worth a rewrite.
const gcMinDead = 4096

// maybeCollect rewrites the tenant's postings without those of removed
// chunks once dead (stats.dead_postings) exceeds a quarter of live (the live
// tokens, stats.sum_len), both as the writer just updated them.
// It runs in the writer's transaction, under the tenant's stats row lock.
func maybeCollect(ctx context.Context, tx pgx.Tx, tb tables, dead, live int64) error {
	if dead < gcMinDead || dead*4 <= live {
		return nil
	}
	return collectPostings(ctx, tx, tb)
}

// collectPostings drops every posting whose chunk no longer exists, and
// blocks left empty, and resets stats.dead_postings.
func collectPostings(ctx context.Context, tx pgx.Tx, tb tables) error {
	// Wait for a running merge, and keep merges out until this commits.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, mergeLockClass, tb.schema); err != nil {
		return classify(err)
	}
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
	if _, err := tx.Exec(ctx, `
		DELETE FROM `+tb.segments+` s WHERE NOT EXISTS (SELECT 1 FROM `+tb.postings+` p WHERE p.block = s.block)`); err != nil {
		return classify(err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE `+tb.segments+` s SET postings = t.total
		FROM (SELECT block, sum(n) AS total FROM `+tb.postings+` GROUP BY block) t
		WHERE t.block = s.block AND s.postings <> t.total`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `UPDATE `+tb.stats+` SET dead_postings = 0`)
	return classify(err)
}
