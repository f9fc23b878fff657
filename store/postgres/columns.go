package postgres

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/retrieval"
)

// Column blocks (colblock.go, migration 00014) are written, merged and
// read here. A write adds one block in its transaction: its chunks and the
// ids of the chunks it deleted (tombstones). After the write commits,
// blocks are merged size-tiered by their size (chunks plus tombstones),
// as postings segments are, in a transaction of their own under the merge
// lock: the merged block holds the blocks' chunks that none of them
// deletes and the tombstones that name none of their chunks, so a chunk is
// live exactly when some block lists it and none lists it as deleted. A
// merge deletes only the blocks it read, so a write that commits meanwhile
// (its block, its tombstones) is never lost. When the tenant's blocks hold
// more tombstones than a quarter of their chunks, a merge takes all of
// them. stats.cols_ok false (a tenant that held chunks before migration
// 00014) makes the first merge after a write build the blocks from the
// chunks table instead; a re-embedding cut-over, which replaces every
// vector, builds them again in its own transaction.

// colFullClass is the size class (powers of mergeFanout) from which a
// column block is never merged again but to drop tombstones: 8^5 = 32,768
// chunks.
const colFullClass = 5

// colRebuildChunks is how many chunks a rebuild writes a block.
const colRebuildChunks = 1 << 15

// colGoneMin is the fewest tombstones worth merging every block for (a
// variable for the tests).
var colGoneMin int64 = 1024

// setGone gives b the tombstones gone, sorted and each once.
func (b *colBlock) setGone(gone []int64) {
	g := slices.Clone(gone)
	slices.Sort(g)
	b.gone = slices.Compact(g)
}

// insertColBlock writes b, whose vectors (parallel to b.ids) have dims
// components, as the column block numbered -block. A block of no chunk and
// no tombstone is not written.
func insertColBlock(ctx context.Context, tx pgx.Tx, tb tables, block int64, b *colBlock, vectors [][]int32, dims int) error {
	if len(b.ids) == 0 && len(b.gone) == 0 {
		return nil
	}
	if !ascending(b.ids) || len(vectors) != len(b.ids) {
		return fmt.Errorf("column block: %d chunks out of id order or with %d vectors: this is a bug, please report it", len(b.ids), len(vectors))
	}
	raw, width := dimsOf(vectors, dims)
	return insertColRaw(ctx, tx, tb, block, b, raw, width)
}

// insertColRaw writes b with its dims as stored (width bytes a component).
func insertColRaw(ctx context.Context, tx pgx.Tx, tb tables, block int64, b *colBlock, dims []byte, width int) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+tb.segments+` (block, postings, cols, dims, cols_n, cols_width) VALUES ($1, $2, $3, $4, $5, $6)`,
		-block, int64(len(b.ids)+len(b.gone)), b.encode(), dims, int32(len(b.ids)), int16(width))
	return classify(err)
}

// colBuilds runs the column block builds of tenants whose blocks are not
// built (stats.cols_ok false): one at a time per tenant, each in the
// background, so that the write that found a tenant without blocks does
// not wait for its build. Close cancels them (a cancelled build commits
// nothing; a later write starts it again).
type colBuilds struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	closed  bool
}

// start runs build(t) in the background unless one of t's runs already.
func (b *colBuilds) start(t tenantInfo, build func(context.Context, tenantInfo) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.running[t.tables.schema] {
		return
	}
	if b.running == nil {
		b.running = map[string]bool{}
	}
	b.running[t.tables.schema] = true
	b.wg.Go(func() {
		defer func() {
			b.mu.Lock()
			delete(b.running, t.tables.schema)
			b.mu.Unlock()
		}()
		if err := build(b.ctx, t); err != nil && b.ctx.Err() == nil {
			slog.Warn("building column blocks failed; the next write retries", "tenant", t.name, "err", err)
		}
	})
}

// wait waits for the builds under way.
func (b *colBuilds) wait() { b.wg.Wait() }

// close cancels the builds under way and waits for them.
func (b *colBuilds) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
}

// buildColumns builds t's column blocks from its chunks table, under its
// write lock (exclusively: writes wait meanwhile), unless they were built
// since, and logs what it did.
func (s *Store) buildColumns(ctx context.Context, t tenantInfo) error {
	start := time.Now()
	var chunks int64
	built := false
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockWriteExclusive(ctx, tx, t.tables); err != nil {
			return err
		}
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT cols_ok, n_chunks FROM `+t.tables.stats).Scan(&ok, &chunks); err != nil {
			return classify(err)
		}
		if ok {
			return nil
		}
		built = true
		return rebuildColumns(ctx, tx, t.tables)
	})
	if err == nil && built {
		slog.Info("built column blocks", "tenant", t.name, "chunks", chunks, "seconds", time.Since(start).Seconds())
	}
	return err
}

// BuildColumns builds the column blocks of every tenant that has none
// yet (a tenant that held chunks before migration 00014), one tenant at a
// time, each in a transaction holding the tenant's write lock: writes to
// that tenant wait meanwhile. done is called after each tenant built. It
// returns how many tenants it built. Without it, a tenant's first write
// after the migration starts its build in the background.
func (s *Store) BuildColumns(ctx context.Context, done func(tenant string, chunks int64, took time.Duration)) (int, error) {
	built := 0
	err := s.eachTenant(ctx, func(t tenantInfo, st statsRow) error {
		if st.colsOK {
			return nil
		}
		start := time.Now()
		if err := s.buildColumns(ctx, t); err != nil {
			return fmt.Errorf("build column blocks of tenant %q: %w", t.name, err)
		}
		built++
		if done != nil {
			done(t.name, st.nChunks, time.Since(start))
		}
		return nil
	})
	return built, err
}

// eachTenant calls fn with the registry and stats rows of every tenant,
// in name order, until fn fails.
func (s *Store) eachTenant(ctx context.Context, fn func(tenantInfo, statsRow) error) error {
	rows, err := s.pool.Query(ctx, `SELECT name FROM cordon.tenants ORDER BY name`)
	if err != nil {
		return classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return classify(err)
	}
	for _, name := range names {
		var st statsRow
		t, found, err := lookupTenant(ctx, s.pool, name, &st)
		if err != nil {
			return err
		}
		if !found {
			continue // dropped meanwhile
		}
		if err := fn(t, st); err != nil {
			return err
		}
	}
	return nil
}

// storedBlock is a column block as read whole.
type storedBlock struct {
	block int64
	b     colBlock
}

// mergeColumns merges one set of column blocks, if any is due, in its own
// transaction (see above), or builds the blocks when stats.cols_ok is
// false. It reports whether it changed anything. The merge lock is tried
// and stats.cols_ok read in one round trip.
func (s *Store) mergeColumns(ctx context.Context, t tenantInfo) (bool, error) {
	tb := t.tables
	merged, build := false, false
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, mergeLockClass, tb.schema)
		b.Queue(`SELECT cols_ok FROM ` + tb.stats)
		br := tx.SendBatch(ctx, b)
		var got, ok bool
		err := br.QueryRow().Scan(&got)
		if err == nil {
			err = br.QueryRow().Scan(&ok)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return classify(err)
		}
		if build = !ok; build || !got {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT block, postings, cols_n FROM `+tb.segments+` WHERE cols IS NOT NULL ORDER BY block DESC`)
		if err != nil {
			return classify(err)
		}
		type seg struct {
			Block, Size int64
			N           int32
		}
		segs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[seg])
		if err != nil {
			return classify(err)
		}
		sizes := make([]int64, len(segs))
		var chunks, gone int64
		for i, sg := range segs {
			sizes[i] = sg.Size
			chunks += int64(sg.N)
			gone += sg.Size - int64(sg.N)
		}
		pick := mergePickBelow(sizes, colFullClass)
		if gone >= colGoneMin && 4*gone > chunks && len(segs) > 0 {
			pick = make([]int, len(segs))
			for i := range pick {
				pick[i] = i
			}
		}
		if pick == nil {
			return nil
		}
		blocks := make([]int64, len(pick))
		for i, j := range pick {
			blocks[i] = segs[j].Block
		}
		stored, raw, err := readColBlocks(ctx, tx, tb, blocks)
		if err != nil {
			return err
		}
		out, dims, width, err := mergeColBlocks(stored, raw)
		if err != nil {
			return err
		}
		block, err := nextBlock(ctx, tx, tb)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+tb.segments+` WHERE block = ANY($1) AND cols IS NOT NULL`, blocks); err != nil {
			return classify(err)
		}
		merged = true
		if len(out.ids) == 0 && len(out.gone) == 0 {
			return nil
		}
		return insertColRaw(ctx, tx, tb, block, out, dims, width)
	})
	if err == nil && build {
		s.builds.start(t, s.buildColumns)
	}
	return merged, err
}

// readColBlocks reads the column blocks numbered blocks whole: decoded,
// and their dims as stored, with each one's width.
func readColBlocks(ctx context.Context, tx pgx.Tx, tb tables, blocks []int64) ([]storedBlock, []rawDims, error) {
	rows, err := tx.Query(ctx, `SELECT block, cols, dims, cols_n, cols_width FROM `+tb.segments+` WHERE block = ANY($1) AND cols IS NOT NULL`, blocks)
	if err != nil {
		return nil, nil, classify(err)
	}
	defer rows.Close()
	var out []storedBlock
	var raws []rawDims
	for rows.Next() {
		var sb storedBlock
		var cols, dims []byte
		var n int32
		var width int16
		if err := rows.Scan(&sb.block, &cols, &dims, &n, &width); err != nil {
			return nil, nil, classify(err)
		}
		if err := decodeCols(cols, &sb.b); err != nil {
			return nil, nil, fmt.Errorf("column block %d: %w", sb.block, err)
		}
		if int(n) != len(sb.b.ids) {
			return nil, nil, fmt.Errorf("column block %d: %w: cols_n %d, %d ids", sb.block, errColBlock, n, len(sb.b.ids))
		}
		out = append(out, sb)
		raws = append(raws, rawDims{data: dims, width: int(width)})
	}
	return out, raws, classify(rows.Err())
}

// rawDims is a block's dims as stored.
type rawDims struct {
	data  []byte
	width int
}

// mergeColBlocks folds blocks into one: their chunks that none of them
// deletes, in id order, and the tombstones that name none of their chunks.
// Its dims keep the widest of the blocks' widths.
func mergeColBlocks(blocks []storedBlock, raws []rawDims) (*colBlock, []byte, int, error) {
	var ids, gone []int64
	dims := -1
	width := 1
	for i, sb := range blocks {
		ids = append(ids, sb.b.ids...)
		gone = append(gone, sb.b.gone...)
		n, r := len(sb.b.ids), raws[i]
		if r.width != 1 && r.width != 2 && r.width != 4 {
			return nil, nil, 0, fmt.Errorf("column block %d: %w: width %d", sb.block, errColBlock, r.width)
		}
		if n == 0 {
			continue
		}
		if len(r.data)%(n*r.width) != 0 || dims >= 0 && len(r.data) != dims*n*r.width {
			return nil, nil, 0, fmt.Errorf("column block %d: %w: %d bytes of dims for %d chunks", sb.block, errColBlock, len(r.data), n)
		}
		dims = len(r.data) / (n * r.width)
		width = max(width, r.width)
	}
	slices.Sort(ids)
	slices.Sort(gone)
	gone = slices.Compact(gone)
	// Each chunk is in one block: a repeated id is a broken block.
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		return nil, nil, 0, fmt.Errorf("%w: a chunk in two blocks", errColBlock)
	}
	type at struct {
		id   int64
		b, i int32
	}
	var kept []at
	for bi, sb := range blocks {
		for i, id := range sb.b.ids {
			if _, found := slices.BinarySearch(gone, id); !found {
				kept = append(kept, at{id: id, b: int32(bi), i: int32(i)})
			}
		}
	}
	slices.SortFunc(kept, func(x, y at) int { return cmp.Compare(x.id, y.id) })
	out := &colBlock{}
	for _, g := range gone {
		if _, found := slices.BinarySearch(ids, g); !found {
			out.gone = append(out.gone, g)
		}
	}
	for _, k := range kept {
		b := &blocks[k.b].b
		out.add(k.id, b.lengths[k.i], b.norms[k.i], b.ticks[k.i], b.classes[k.i], b.sets[b.set[k.i]], b.docs[b.doc[k.i]])
	}
	n := len(kept)
	if n == 0 {
		return out, []byte{}, 1, nil
	}
	data := make([]byte, dims*n*width)
	for d := range dims {
		for j, k := range kept {
			r, m := raws[k.b], len(blocks[k.b].b.ids)
			v := component(r.data[(d*m+int(k.i))*r.width:], r.width)
			putComponent(data[(d*n+j)*width:], width, v)
		}
	}
	return out, data, width, nil
}

// rebuildColumns replaces the tenant's column blocks with blocks built
// from its chunks table and sets stats.cols_ok. The caller holds the
// tenant's write lock exclusively; the merge lock is taken here, so no
// merge runs beside it.
func rebuildColumns(ctx context.Context, tx pgx.Tx, tb tables) error {
	if err := waitMergeLock(ctx, tx, tb); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+tb.segments+` WHERE cols IS NOT NULL`); err != nil {
		return classify(err)
	}
	// Documents whole, so that every chunk of a document is in one block
	// (scanColumns relies on it); each block in id order. A cursor keeps
	// memory to a block's rows and a fetch's.
	if _, err := tx.Exec(ctx, `DECLARE cordon_cols NO SCROLL CURSOR FOR
		SELECT id, length, norm_sq, as_of_tick, classification, barriers, doc_id, embedding FROM `+tb.chunks+` ORDER BY doc_id, id`); err != nil {
		return classify(err)
	}
	type row struct {
		id, norm, tick int64
		length         int32
		class          int16
		barriers       []string
		doc            string
		vec            []int32
	}
	var pending []row
	dims := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		slices.SortFunc(pending, func(x, y row) int { return cmp.Compare(x.id, y.id) })
		b := &colBlock{}
		vecs := make([][]int32, len(pending))
		for i, r := range pending {
			b.add(r.id, r.length, r.norm, r.tick, r.class, r.barriers, r.doc)
			vecs[i] = r.vec
		}
		pending = pending[:0]
		block, err := nextBlock(ctx, tx, tb)
		if err != nil {
			return err
		}
		return insertColBlock(ctx, tx, tb, block, b, vecs, dims)
	}
	for {
		rows, err := tx.Query(ctx, `FETCH 4096 FROM cordon_cols`)
		if err != nil {
			return classify(err)
		}
		var fetched []row
		for rows.Next() {
			var r row
			var emb pgvector.Vector
			if err := rows.Scan(&r.id, &r.length, &r.norm, &r.tick, &r.class, &r.barriers, &r.doc, &emb); err != nil {
				rows.Close()
				return classify(err)
			}
			v := emb.Slice()
			dims = len(v)
			r.vec = make([]int32, len(v))
			for i, x := range v {
				r.vec[i] = int32(x)
			}
			fetched = append(fetched, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		if len(fetched) == 0 {
			break
		}
		for _, r := range fetched {
			if len(pending) >= colRebuildChunks && pending[len(pending)-1].doc != r.doc {
				if err := flush(); err != nil {
					return err
				}
			}
			pending = append(pending, r)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CLOSE cordon_cols`); err != nil {
		return classify(err)
	}
	_, err := tx.Exec(ctx, `UPDATE `+tb.stats+` SET cols_ok = true`)
	return classify(err)
}

// queryDims is a query vector's nonzero dimensions and their weights
// (none when the vector is zero), and its squared norm.
type queryDims struct {
	dims []int32
	w    []int64
	norm int64
}

func newQueryDims(q []int32) queryDims {
	qd := queryDims{norm: hashembed.NormSq(q)}
	if qd.norm > 0 {
		for d, x := range q {
			if x != 0 {
				qd.dims, qd.w = append(qd.dims, int32(d)), append(qd.w, int64(x))
			}
		}
	}
	return qd
}

// scanColumns is scanChunks over the column blocks: the same chunkScan,
// computed in Go from blocks, every column block of the tenant with the
// slices of its dims on the query's nonzero dimensions qd
// (readPostingsAndColumns). The dense side is every candidate tied with
// the top_n-th (fetchChunks orders and cuts), where scanChunks returns
// exactly top_n; with docs, the documents come numbered
// (chunkScan.docNames), with their lengths and the scope's count. Blocks
// are scanned on every core.
func scanColumns(t tenantInfo, req retrieval.RankRequest, qd queryDims, ids []int64, docs bool, blocks []colBlock) chunkScan {
	var sc chunkScan
	var gone []int64
	totalDocs := 0
	for i := range blocks {
		gone = append(gone, blocks[i].gone...)
		totalDocs += len(blocks[i].docs)
	}
	slices.Sort(gone)
	sc.ids, sc.lengths, sc.verdicts = ids, make([]int32, len(ids)), make([]int32, len(ids))
	for i := range sc.verdicts {
		sc.verdicts[i] = verdictGone
	}
	// Every chunk of a document is in one block (see VerifyColumns): a
	// block's documents are numbered from its base, and each one's length
	// and labels are known by the block's end.
	bases := make([]int32, len(blocks))
	if docs {
		sc.docNum = make([]int32, len(ids))
		for i := range sc.docNum {
			sc.docNum[i] = -1
		}
		sc.docNames = make([]string, 0, totalDocs)
		for i := range blocks {
			bases[i] = int32(len(sc.docNames))
			sc.docNames = append(sc.docNames, blocks[i].docs...)
		}
		sc.docLens = make([]int64, totalDocs)
	}
	ss := &colScan{req: &req, qn: qd.norm, qw: qd.w, ids: ids, gone: gone, docs: docs, sc: &sc}
	// Each block in parts of about colPart chunks, every part on its own.
	type part struct {
		block  int
		lo, hi int
		out    colScanOut
	}
	var parts []part
	for bi := range blocks {
		n := len(blocks[bi].ids)
		k := max(1, (n+colPart-1)/colPart)
		for j := range k {
			parts = append(parts, part{block: bi, lo: j * n / k, hi: (j + 1) * n / k})
		}
	}
	parallel(len(parts), func(i int) {
		pt := &parts[i]
		ss.part(&blocks[pt.block], bases[pt.block], pt.lo, pt.hi, &pt.out)
	})
	var kept []candidate
	if len(qd.w) > 0 {
		n := 0
		for i := range parts {
			n += len(parts[i].out.kept.kept)
		}
		kept = make([]candidate, 0, n)
	}
	entitled := t.settings.Statistics.Entitled()
	for i := 0; i < len(parts); {
		// The block's parts: sum their counts and documents.
		bi := parts[i].block
		var seen []uint8
		for ; i < len(parts) && parts[i].block == bi; i++ {
			o := &parts[i].out
			sc.positive += o.positive
			sc.hidden += o.hidden
			sc.stale += o.stale
			kept = append(kept, o.kept.kept...)
			if !docs {
				continue
			}
			if seen == nil {
				seen = o.seen
			} else {
				for d, v := range o.seen {
					seen[d] = max(seen[d], v)
				}
			}
			for d, l := range o.docLen {
				sc.docLens[bases[bi]+int32(d)] += l
			}
		}
		for _, v := range seen {
			if v == 2 || v == 1 && !entitled {
				sc.docN++
			}
		}
	}
	sc.dense = topWithTies(kept, req.TopN)
	return sc
}

// readPostingsAndColumns reads, in one batch, the postings rows of terms
// (none when terms is empty; readQueryPostings) and every column block of
// the tenant with the slices of its dims on the dimensions qdims. It
// returns the query's postings, the chunk ids they name (queryPostings.chunks)
// and the blocks, their columns in slab (when not nil).
//
// The postings rows are copied as they arrive and decoded on a goroutine
// of their own while the column blocks arrive and are decoded here, so the
// two decodings, and PostgreSQL's reading of the blocks, overlap.
//
// The blocks' cols and their dims slices are read by two statements: read
// by one statement, the two cost PostgreSQL more than twice their sum
// (15.7 against 4.7 + 1.4 ms at 100k chunks, docs/benchmarks.md). Each
// block's cols is decoded as it arrives, while PostgreSQL computes the
// second statement.
func readPostingsAndColumns(ctx context.Context, tx pgx.Tx, tb tables, terms []string, qdims []int32, slab *colSlab) (queryPostings, []int64, []colBlock, error) {
	var qp queryPostings
	batch := &pgx.Batch{}
	if len(terms) > 0 {
		sql, keys := postingsStatement(tb, terms)
		batch.Queue(sql, keys)
	}
	batch.Queue(`SELECT s.block, s.cols, s.cols_n, s.cols_width FROM ` + tb.segments + ` s WHERE s.cols IS NOT NULL ORDER BY s.block`)
	batch.Queue(`
		SELECT s.block, ARRAY(SELECT substring(s.dims FROM u.d * s.cols_n * s.cols_width + 1 FOR s.cols_n * s.cols_width)
		                      FROM unnest($1::int4[]) WITH ORDINALITY AS u(d, o) ORDER BY u.o)
		FROM `+tb.segments+` s WHERE s.cols IS NOT NULL ORDER BY s.block`, qdims)
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	var ids []int64
	var done chan error
	if len(terms) > 0 {
		rows, err := br.Query()
		if err != nil {
			return qp, nil, nil, classify(err)
		}
		raws, err := copyPostingsRows(rows)
		if err != nil {
			return qp, nil, nil, err
		}
		done = make(chan error, 1)
		go func() {
			var err error
			if qp, err = decodeQueryPostings(raws, terms); err == nil {
				ids = qp.chunks()
			}
			done <- err
		}()
	}
	blocks, err := readColumnResults(br, qdims, slab)
	if err == nil {
		err = classify(br.Close())
	}
	if done != nil {
		// The goroutine is waited for on every path: qp and ids are its.
		if perr := <-done; err == nil {
			err = perr
		}
	}
	if err != nil {
		return queryPostings{}, nil, nil, err
	}
	return qp, ids, blocks, nil
}

// readColumnResults reads the results of readPostingsAndColumns's two
// column statements from br: every block's cols, decoded, then its dims
// slices on qdims.
func readColumnResults(br pgx.BatchResults, qdims []int32, slab *colSlab) ([]colBlock, error) {
	var blocks []colBlock
	var numbers []int64
	rows, err := br.Query()
	if err != nil {
		return nil, classify(err)
	}
	for rows.Next() {
		if fd := rows.FieldDescriptions(); fd[1].Format != pgx.BinaryFormatCode {
			rows.Close()
			return nil, fmt.Errorf("%w: column blocks not in binary format", errArrayFormat)
		}
		var block int64
		var n int32
		var width int16
		if err := rows.Scan(&block, nil, &n, &width); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		var b colBlock
		if err := decodeColsIn(rows.RawValues()[1], &b, slab); err != nil {
			rows.Close()
			return nil, err
		}
		if int(n) != len(b.ids) || width != 1 && width != 2 && width != 4 {
			rows.Close()
			return nil, fmt.Errorf("%w: cols_n %d for %d ids, width %d", errColBlock, n, len(b.ids), width)
		}
		b.width = int(width)
		blocks, numbers = append(blocks, b), append(numbers, block)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if rows, err = br.Query(); err != nil {
		return nil, classify(err)
	}
	i := 0
	for ; rows.Next(); i++ {
		if fd := rows.FieldDescriptions(); fd[1].Format != pgx.BinaryFormatCode {
			rows.Close()
			return nil, fmt.Errorf("%w: column blocks not in binary format", errArrayFormat)
		}
		var block int64
		if err := rows.Scan(&block, nil); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		if i >= len(blocks) || numbers[i] != block {
			rows.Close()
			return nil, fmt.Errorf("%w: dimension slices of block %d out of step with the blocks", errColBlock, block)
		}
		b := &blocks[i]
		parts, err := appendVarlenaArray(nil, rows.RawValues()[1], oidBytea)
		if err == nil && len(parts) != len(qdims) {
			err = fmt.Errorf("%w: %d dimension slices for %d dimensions", errColBlock, len(parts), len(qdims))
		}
		if err != nil {
			rows.Close()
			return nil, err
		}
		for k, p := range parts {
			if len(p) != len(b.ids)*b.width {
				rows.Close()
				return nil, fmt.Errorf("%w: a dimension slice of %d bytes for %d chunks", errColBlock, len(p), len(b.ids))
			}
			parts[k] = slab.bytes(p) // raw values last until the next row
		}
		b.qdims = parts
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	if i != len(blocks) {
		return nil, fmt.Errorf("%w: dimension slices of %d blocks for %d", errColBlock, i, len(blocks))
	}
	return blocks, nil
}

// parallel runs fn(0..n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, fn func(int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// colPart is about how many chunks of a block one goroutine scans.
const colPart = 16384

// colScan is one query's scan of the column blocks; part scans a range of
// one block's chunks into its own colScanOut and into the slots of sc
// that belong to those chunks, so parts scan at once.
type colScan struct {
	req       *retrieval.RankRequest
	qn        int64
	qw        []int64
	ids, gone []int64
	docs      bool
	sc        *chunkScan
}

// colScanOut is one part's funnel counts and dense candidates and, with
// documents, per document of its block: the length of its live chunks in
// the part and whether it saw one (0 none, 1 only ones the principal may
// not see, 2 a visible one).
type colScanOut struct {
	positive, hidden, stale int64
	kept                    topKeeper
	docLen                  []int64
	seen                    []uint8
}

// part scans chunks lo..hi-1 of b, whose documents are numbered from
// base.
func (ss *colScan) part(b *colBlock, base int32, lo, hi int, out *colScanOut) {
	sc, ids, gone, p := ss.sc, ss.ids, ss.gone, ss.req.Principal
	// The barrier half of the entitlement, once per barrier set.
	setOK := make([]bool, len(b.sets))
	for i, s := range b.sets {
		setOK[i] = retrieval.Subset(s, p.Barriers)
	}
	var acc []int64
	if len(ss.qw) > 0 {
		acc = make([]int64, hi-lo)
		w := b.width
		for k, col := range b.qdims {
			qw := ss.qw[k]
			if w == 1 {
				for i, x := range col[lo:hi] {
					acc[i] += qw * int64(int8(x))
				}
				continue
			}
			for i := lo; i < hi; i++ {
				acc[i-lo] += qw * int64(component(col[i*w:], w))
			}
		}
	}
	if ss.docs {
		out.docLen, out.seen = make([]int64, len(b.docs)), make([]uint8, len(b.docs))
	}
	if lo == hi {
		return
	}
	g, _ := slices.BinarySearch(gone, b.ids[lo]) // the first tombstone not below the chunk
	a, _ := slices.BinarySearch(ids, b.ids[lo])  // the first asked id not below the chunk
	clearance, maxStale, now := int16(p.Clearance), ss.req.MaxStaleTicks, ss.req.NowTick
	for i := lo; i < hi; i++ {
		id := b.ids[i]
		for g < len(gone) && gone[g] < id {
			g++
		}
		if g < len(gone) && gone[g] == id {
			continue
		}
		verdict := int32(verdictKeep)
		switch {
		case b.classes[i] > clearance || !setOK[b.set[i]]:
			verdict = verdictHidden
		case maxStale != nil && now-b.ticks[i] > *maxStale:
			verdict = verdictStale
		}
		if ss.docs {
			d := b.doc[i]
			out.docLen[d] += int64(b.lengths[i])
			if verdict == verdictHidden {
				out.seen[d] = max(out.seen[d], 1)
			} else {
				out.seen[d] = 2
			}
		}
		if acc != nil && acc[i-lo] > 0 {
			out.positive++
			switch verdict {
			case verdictHidden:
				out.hidden++
			case verdictStale:
				out.stale++
			default:
				out.kept.add(candidate{id: id, score: hashembed.Cosine(acc[i-lo], ss.qn, b.norms[i])}, ss.req.TopN)
			}
		}
		for a < len(ids) && ids[a] < id {
			a++
		}
		if a < len(ids) && ids[a] == id {
			sc.lengths[a], sc.verdicts[a] = b.lengths[i], verdict
			if ss.docs {
				sc.docNum[a] = base + int32(b.doc[i])
			}
		}
	}
}

// VerifyColumns checks, in one read-only snapshot, that tenant's column
// blocks hold exactly its chunks: every chunk live in the blocks once, with
// the length, norm, labels, tick, document and vector of its row, no
// other, and all live chunks of a document in one block. It answers nil for a tenant whose blocks are not built yet
// (stats.cols_ok false) and for one that is not registered.
func (s *Store) VerifyColumns(ctx context.Context, tenant string) error {
	_, err := s.inSnapshot(ctx, tenant, func(tx pgx.Tx, t tenantInfo, st statsRow) error {
		if !st.colsOK {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT block FROM `+t.tables.segments+` WHERE cols IS NOT NULL`)
		if err != nil {
			return classify(err)
		}
		blocks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return classify(err)
		}
		stored, raws, err := readColBlocks(ctx, tx, t.tables, blocks)
		if err != nil {
			return err
		}
		// Every live chunk of a document is in one block.
		var gone []int64
		for _, sb := range stored {
			gone = append(gone, sb.b.gone...)
		}
		slices.Sort(gone)
		home := map[string]int64{}
		for _, sb := range stored {
			for i, id := range sb.b.ids {
				if _, dead := slices.BinarySearch(gone, id); dead {
					continue
				}
				doc := sb.b.docs[sb.b.doc[i]]
				if h, ok := home[doc]; ok && h != sb.block {
					return fmt.Errorf("tenant %q: document %q has live chunks in column blocks %d and %d", tenant, doc, h, sb.block)
				}
				home[doc] = sb.block
			}
		}
		// One merge of every block is the live set, in id order.
		live, dims, width, err := mergeColBlocks(stored, raws)
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT id, length, norm_sq, as_of_tick, classification, barriers, doc_id, embedding FROM `+t.tables.chunks+` ORDER BY id`)
		if err != nil {
			return classify(err)
		}
		defer rows.Close()
		n, i := len(live.ids), 0
		for rows.Next() {
			var id, norm, tick int64
			var length int32
			var class int16
			var barriers []string
			var doc string
			var emb pgvector.Vector
			if err := rows.Scan(&id, &length, &norm, &tick, &class, &barriers, &doc, &emb); err != nil {
				return classify(err)
			}
			if i == n || live.ids[i] != id {
				return fmt.Errorf("tenant %q: chunk %d is not in the column blocks", tenant, id)
			}
			if live.lengths[i] != length || live.norms[i] != norm || live.ticks[i] != tick || live.classes[i] != class ||
				!slices.Equal(live.sets[live.set[i]], barriers) || live.docs[live.doc[i]] != doc {
				return fmt.Errorf("tenant %q: chunk %d: its column block holds other values than its row", tenant, id)
			}
			v := emb.Slice()
			if len(v)*n*width != len(dims) {
				return fmt.Errorf("tenant %q: column blocks hold %d bytes of dims for %d chunks of %d dimensions", tenant, len(dims), n, len(v))
			}
			for d, x := range v {
				if got := component(dims[(d*n+i)*width:], width); float32(got) != x {
					return fmt.Errorf("tenant %q: chunk %d: dimension %d is %d in its column block, %v in its row", tenant, id, d, got, x)
				}
			}
			i++
		}
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		if i != n {
			return fmt.Errorf("tenant %q: the column blocks hold %d live chunks, the table %d", tenant, n, i)
		}
		return nil
	})
	return err
}
