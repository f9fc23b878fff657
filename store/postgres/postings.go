package postgres

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

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
func mergePick(sizes []int64) []int { return mergePickBelow(sizes, fullClass) }

// mergePickBelow is mergePick with full as the full size class.
func mergePickBelow(sizes []int64, full int) []int {
	classes := make([]int, len(sizes))
	count := map[int]int{}
	top := 0
	for i, n := range sizes {
		classes[i] = sizeClass(n)
		count[classes[i]]++
		top = max(top, classes[i])
	}
	for c := 0; c <= min(top, full-1); c++ {
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

// Rare terms share rows (migration 00012): a segment writes the terms with
// at most bucketMaxPostings postings in one row per bucket of a hash of the
// term (bucketKey), the others in a row each. Most of a segment's terms are
// rare (in a write of a few hundred chunks, 90% of its terms have at most
// four postings), so a segment has a few rows per chunk instead of about
// thirty, and every row saved is a heap tuple and two B-tree entries less.
// A reader of a term reads its term row and its bucket row in each segment
// and keeps the bucket's postings that name the term: at most
// bucketMaxPostings per segment of that term, among those of about
// 1/postingBuckets of the segment's rare terms.
const (
	bucketMaxPostings = 8
	postingBuckets    = 256
)

// bucketKeys are the bucket rows' term values: '#' and two hexadecimal
// digits, never a token (tokens are letters and numbers only).
var bucketKeys = func() (keys [postingBuckets]string) {
	for i := range keys {
		keys[i] = fmt.Sprintf("#%02x", i)
	}
	return keys
}()

// bucketKey is the key of the bucket row that holds term's postings when
// term is rare in a segment.
func bucketKey(term string) string { return bucketKeys[bucketOf(term)] }

// bucketOf is term's bucket: its FNV-1a hash's low byte.
func bucketOf(term string) int {
	h := uint32(2166136261)
	for i := 0; i < len(term); i++ {
		h ^= uint32(term[i])
		h *= 16777619
	}
	return int(h % postingBuckets)
}

// segmentRow is one postings row: a term row (runs nil) or a bucket row
// (key a bucket key, its postings ordered by term, each term's one run).
// block is the row's block when it is not the segment's being written
// (a collection rewrites rows of every block).
type segmentRow struct {
	key   string
	block int64
	list  *postingList
	runs  []termRun
}

// segmentRows lays lists out as a segment's rows, in key order: a term row
// for each term with more than bucketMaxPostings postings, a bucket row
// for each bucket of the others, its postings ordered by term, then chunk.
// Each list is sorted by chunk id first.
func segmentRows(lists postingLists) (rows []segmentRow, total int64) {
	// A bucket's terms with their lists, so that neither is looked up again.
	type termList struct {
		term string
		list *postingList
	}
	var buckets [postingBuckets][]termList
	var inBuckets int
	for t, p := range lists {
		if len(p.chunks) == 0 {
			continue
		}
		sortPostings(p)
		total += int64(len(p.chunks))
		if len(p.chunks) > bucketMaxPostings {
			rows = append(rows, segmentRow{key: t, list: p})
		} else {
			b := bucketOf(t)
			buckets[b] = append(buckets[b], termList{t, p})
			inBuckets++
		}
	}
	// Bucket keys ('#' first) sort before every token, and in bucket order.
	slices.SortFunc(rows, func(a, b segmentRow) int { return strings.Compare(a.key, b.key) })
	out := make([]segmentRow, 0, len(rows)+min(inBuckets, postingBuckets))
	for b, terms := range buckets {
		if len(terms) == 0 {
			continue
		}
		slices.SortFunc(terms, func(x, y termList) int { return strings.Compare(x.term, y.term) })
		n := 0
		for _, t := range terms {
			n += len(t.list.chunks)
		}
		row := segmentRow{key: bucketKeys[b], list: &postingList{chunks: make([]int64, 0, n), tfs: make([]int32, 0, n)}, runs: make([]termRun, 0, len(terms))}
		for _, t := range terms {
			row.list.chunks = append(row.list.chunks, t.list.chunks...)
			row.list.tfs = append(row.list.tfs, t.list.tfs...)
			row.runs = append(row.runs, termRun{term: []byte(t.term), n: len(t.list.chunks)})
		}
		out = append(out, row)
	}
	return append(out, rows...), total
}

// copySegment writes lists as the postings rows of block (segmentRows) and
// registers the segment.
func copySegment(ctx context.Context, tx pgx.Tx, tb tables, block int64, lists postingLists) error {
	rows, total := segmentRows(lists)
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, newPostingsRows(rows, block),
		`COPY `+tb.postings+` (term, block, n, data) FROM STDIN BINARY`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+tb.segments+` (block, postings) VALUES ($1, $2)`, block, total)
	return classify(err)
}

// mergeLockClass is the first key of the advisory lock that serialises a
// tenant's merges and collections (the second is hashtext(schema)).
const mergeLockClass = 0x436f7264 // "Cord"

// tryMergeLock takes the tenant's merge lock for tx's duration, if no
// other transaction holds it, and reports whether it did.
func tryMergeLock(ctx context.Context, tx pgx.Tx, tb tables) (bool, error) {
	var got bool
	err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, mergeLockClass, tb.schema).Scan(&got)
	return got, classify(err)
}

// waitMergeLock takes the tenant's merge lock for tx's duration, waiting
// for a merge that holds it.
func waitMergeLock(ctx context.Context, tx pgx.Tx, tb tables) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, mergeLockClass, tb.schema)
	return classify(err)
}

// mergeSegments merges one set of segments chosen by mergePick, if any, in
// its own transaction: the merged segments' rows are read, the postings of
// removed chunks dropped, one row per term written as a new segment and the
// old ones deleted, atomically, so readers see either. It does not take the
// tenant's write lock (writers only add segments); a merge already running
// on the tenant makes it return at once. It reports whether it merged.
func (s *Store) mergeSegments(ctx context.Context, tb tables) (bool, error) {
	merged := false
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if got, err := tryMergeLock(ctx, tx, tb); err != nil || !got {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT block, postings FROM `+tb.segments+` WHERE cols IS NULL ORDER BY block`)
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
	lists := postingLists{}
	err := eachPostingsRow(ctx, tx, `SELECT term, block, `+postingsCols+` FROM `+tb.postings+` WHERE block = ANY($1) ORDER BY block`,
		[]any{blocks}, func(d *rowReader, _ string, _ int64, _ bool) error {
			lo := 0
			for _, r := range d.runs {
				p := lists[string(r.term)] // no allocation for a term seen before
				if p == nil {
					p = &postingList{}
					lists[string(r.term)] = p
				}
				p.chunks = append(p.chunks, d.chunks[lo:lo+r.n]...)
				p.tfs = append(p.tfs, d.tfs[lo:lo+r.n]...)
				lo += r.n
			}
			return nil
		})
	if err != nil {
		return nil, err
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
	rows, err := tx.Query(ctx, `SELECT id FROM `+tb.chunks+` WHERE id = ANY($1)`, ids)
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
	live := newIDSet(liveIDs)
	for _, p := range lists {
		k := 0
		for i, c := range p.chunks {
			if live.has(c) {
				p.chunks[k], p.tfs[k] = c, p.tfs[i]
				k++
			}
		}
		p.chunks, p.tfs = p.chunks[:k], p.tfs[:k]
	}
	return lists, nil
}

// sortPostings orders a list by chunk id. A merge appends its segments'
// lists one after the other, each sorted, and chunk ids are drawn apart
// from block numbers, so a merged list is a few sorted runs in any order:
// they are merged pairwise, bottom up (O(n log runs)). A list of many runs
// is sorted outright.
func sortPostings(p *postingList) {
	var starts []int
	for i := 1; i < len(p.chunks); i++ {
		if p.chunks[i] < p.chunks[i-1] {
			if starts == nil {
				starts = append(starts, 0)
			}
			if starts = append(starts, i); len(starts) > maxMergedRuns {
				sortPostingsFully(p)
				return
			}
		}
	}
	if starts == nil {
		return
	}
	n := len(p.chunks)
	src := postingList{chunks: p.chunks, tfs: p.tfs}
	dst := postingList{chunks: make([]int64, n), tfs: make([]int32, n)}
	for len(starts) > 1 {
		next := starts[:0:0]
		for r := 0; r < len(starts); r += 2 {
			lo := starts[r]
			if r+1 == len(starts) { // an odd run out: copied as it is
				copy(dst.chunks[lo:], src.chunks[lo:])
				copy(dst.tfs[lo:], src.tfs[lo:])
				next = append(next, lo)
				continue
			}
			mid, hi := starts[r+1], n
			if r+2 < len(starts) {
				hi = starts[r+2]
			}
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if src.chunks[j] < src.chunks[i] {
					dst.chunks[k], dst.tfs[k] = src.chunks[j], src.tfs[j]
					j++
				} else {
					dst.chunks[k], dst.tfs[k] = src.chunks[i], src.tfs[i]
					i++
				}
				k++
			}
			k += copy(dst.chunks[k:], src.chunks[i:mid])
			copy(dst.tfs[k-(mid-i):], src.tfs[i:mid])
			copy(dst.chunks[k:], src.chunks[j:hi])
			copy(dst.tfs[k:], src.tfs[j:hi])
			next = append(next, lo)
		}
		starts = next
		src, dst = dst, src
	}
	p.chunks, p.tfs = src.chunks, src.tfs
}

// maxMergedRuns is the most sorted runs [sortPostings] merges; a list of
// more is sorted outright.
const maxMergedRuns = 64

// sortPostingsFully orders a list by chunk id, whatever its order.
func sortPostingsFully(p *postingList) {
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
// rows and blocks left empty, and resets stats.dead_postings. It rewrites,
// packed, each row it changes and each row still held as arrays (written
// before packed postings), in its own block. A first pass over the table
// lists those rows (by key: term and block); they are then read again,
// rewritten and replaced collectBatch at a time, so memory holds the keys
// and one batch of postings, not the table.
func collectPostings(ctx context.Context, tx pgx.Tx, tb tables) error {
	// Wait for a running merge, and keep merges out until this commits.
	if err := waitMergeLock(ctx, tx, tb); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT id FROM `+tb.chunks)
	if err != nil {
		return classify(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return classify(err)
	}
	live := newIDSet(ids)
	var terms []string
	var blocks []int64
	err = eachPostingsRow(ctx, tx, `SELECT term, block, `+postingsCols+` FROM `+tb.postings, nil, func(d *rowReader, term string, block int64, packed bool) error {
		if !packed || liveCount(d, live) < len(d.chunks) {
			terms, blocks = append(terms, term), append(blocks, block)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for lo := 0; lo < len(terms); lo += collectBatch {
		hi := min(lo+collectBatch, len(terms))
		if err := rewriteLive(ctx, tx, tb, live, terms[lo:hi], blocks[lo:hi]); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `
		DELETE FROM `+tb.segments+` s WHERE s.cols IS NULL AND NOT EXISTS (SELECT 1 FROM `+tb.postings+` p WHERE p.block = s.block)`); err != nil {
		return classify(err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE `+tb.segments+` s SET postings = t.total
		FROM (SELECT block, sum(n) AS total FROM `+tb.postings+` GROUP BY block) t
		WHERE t.block = s.block AND s.postings <> t.total`); err != nil {
		return classify(err)
	}
	_, err = tx.Exec(ctx, `UPDATE `+tb.stats+` SET dead_postings = 0`)
	return classify(err)
}

// collectBatch is how many postings rows a collection rewrites at a time.
// Tests lower it.
var collectBatch = 2048

// rewriteLive replaces the postings rows (terms[i], blocks[i]) by their
// postings of live chunks, packed, deleting those left with none.
func rewriteLive(ctx context.Context, tx pgx.Tx, tb tables, live idSet, terms []string, blocks []int64) error {
	var rewrite []segmentRow
	err := eachPostingsRow(ctx, tx, `
		SELECT p.term, p.block, `+postingsColsOf("p")+` FROM `+tb.postings+` p
		JOIN unnest($1::text[], $2::bigint[]) AS k(term, block) ON p.term = k.term AND p.block = k.block`,
		[]any{terms, blocks}, func(d *rowReader, term string, block int64, _ bool) error {
			kept := &postingList{chunks: make([]int64, 0, len(d.chunks)), tfs: make([]int32, 0, len(d.chunks))}
			var keptRuns []termRun
			lo := 0
			for _, r := range d.runs {
				n := 0
				for i := lo; i < lo+r.n; i++ {
					if live.has(d.chunks[i]) {
						kept.add(d.chunks[i], d.tfs[i])
						n++
					}
				}
				if n > 0 && d.bucket {
					keptRuns = append(keptRuns, termRun{term: slices.Clone(r.term), n: n})
				}
				lo += r.n
			}
			if len(kept.chunks) > 0 {
				rewrite = append(rewrite, segmentRow{key: term, block: block, list: kept, runs: keptRuns})
			}
			return nil
		})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		DELETE FROM `+tb.postings+` p USING unnest($1::text[], $2::bigint[]) AS k(term, block)
		WHERE p.term = k.term AND p.block = k.block`, terms, blocks); err != nil {
		return classify(err)
	}
	if len(rewrite) == 0 {
		return nil
	}
	_, err = tx.Conn().PgConn().CopyFrom(ctx, newPostingsRows(rewrite, 0), `COPY `+tb.postings+` (term, block, n, data) FROM STDIN BINARY`)
	return classify(err)
}

// eachPostingsRow runs sql, whose columns are a postings row's term and
// block and then postingsCols, and calls fn with each row decoded (packed
// says it was stored packed); an error from fn stops it and is returned.
func eachPostingsRow(ctx context.Context, tx pgx.Tx, sql string, args []any, fn func(d *rowReader, term string, block int64, packed bool) error) error {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return classify(err)
	}
	defer rows.Close()
	var d rowReader
	for rows.Next() {
		raw, err := d.read(rows, 2)
		if err == nil && len(raw[1]) != 8 {
			err = fmt.Errorf("%w: a block of %d bytes", errArrayFormat, len(raw[1]))
		}
		if err != nil {
			return err
		}
		if err := fn(&d, string(raw[0]), int64(binary.BigEndian.Uint64(raw[1])), raw[5] != nil); err != nil {
			return err
		}
	}
	return classify(rows.Err())
}

// liveCount is how many of d's postings name a chunk of live.
func liveCount(d *rowReader, live idSet) int {
	n := 0
	for _, c := range d.chunks {
		if live.has(c) {
			n++
		}
	}
	return n
}

// idSet is a set of chunk ids, a bitmap over the range they span (chunk
// ids are drawn from one sequence per tenant, so the range is at most the
// number of chunks the tenant ever had).
type idSet struct {
	lo   int64
	bits []uint64
}

func newIDSet(ids []int64) idSet {
	if len(ids) == 0 {
		return idSet{}
	}
	lo, hi := slices.Min(ids), slices.Max(ids)
	s := idSet{lo: lo, bits: make([]uint64, uint64(hi-lo)/64+1)}
	for _, id := range ids {
		d := uint64(id - lo)
		s.bits[d/64] |= 1 << (d % 64)
	}
	return s
}

func (s idSet) has(id int64) bool {
	d := uint64(id - s.lo)
	return id >= s.lo && d/64 < uint64(len(s.bits)) && s.bits[d/64]&(1<<(d%64)) != 0
}

// EachPosting calls fn with every stored posting of tenant (its term,
// chunk id and term frequency), in one snapshot, row by row: postings of
// chunks deleted since their segment was written included (a reader
// joins the chunks table to drop them). It is for tools that copy the
// index elsewhere; an error from fn stops it and is returned.
func (s *Store) EachPosting(ctx context.Context, tenant string, fn func(term string, chunk int64, tf int32) error) error {
	found, err := s.inSnapshot(ctx, tenant, func(tx pgx.Tx, t tenantInfo, _ statsRow) error {
		return eachPostingsRow(ctx, tx, `SELECT term, block, `+postingsCols+` FROM `+t.tables.postings, nil,
			func(d *rowReader, _ string, _ int64, _ bool) error {
				lo := 0
				for _, r := range d.runs {
					term := string(r.term)
					for i := lo; i < lo+r.n; i++ {
						if err := fn(term, d.chunks[i], d.tfs[i]); err != nil {
							return err
						}
					}
					lo += r.n
				}
				return nil
			})
	})
	switch {
	case err != nil:
		return fmt.Errorf("postings of tenant %q: %w", tenant, err)
	case !found:
		return fmt.Errorf("postings of tenant %q: %w", tenant, ErrTenantNotFound)
	}
	return nil
}

// PackPostings rewrites packed the postings rows every tenant still holds
// as arrays (written before migration 00015), dropping those of deleted
// chunks on the way (a collection), one tenant at a time, each in a
// transaction holding the tenant's write lock: writes to that tenant wait
// meanwhile. done is called after each tenant packed, with the number of
// array rows it held. It returns how many tenants it packed. Without it,
// array rows are read as they are until a merge or a collection rewrites
// them.
func (s *Store) PackPostings(ctx context.Context, done func(tenant string, rows int64, took time.Duration)) (int, error) {
	packed := 0
	err := s.eachTenant(ctx, func(t tenantInfo, _ statsRow) error {
		start := time.Now()
		var n int64
		err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if err := lockWriteExclusive(ctx, tx, t.tables); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.tables.postings+` WHERE data IS NULL`).Scan(&n); err != nil || n == 0 {
				return classify(err)
			}
			return collectPostings(ctx, tx, t.tables)
		})
		if err != nil {
			return fmt.Errorf("pack the postings of tenant %q: %w", t.name, err)
		}
		if n > 0 {
			packed++
			if done != nil {
				done(t.name, n, time.Since(start))
			}
		}
		return nil
	})
	return packed, err
}
