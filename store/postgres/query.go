package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/internal/topk"
	"github.com/cordon-rag/cordon/retrieval"
)

// This file is the whole query path, in the order one retrieve runs it.
// The retriever first asks which model the tenant embeds with and embeds
// the query (TenantModel, EmbedQuery). RankVersion then enters through
// read, which resolves the tenant once (registry row, tokenizer check and
// stats row in one statement, lookupTenant in tenants.go) and answers on
// the in-memory index (cache.go) when it is current, else in SQL in one
// read-only snapshot: rankTx reads the scope's totals, the query terms'
// postings rows and the column blocks in one batch (or, for a tenant
// without blocks, the postings, then one scan of the chunks table), scans
// the blocks (the dense side and the verdicts the lexical side needs),
// scores BM25 in Go, reads the candidates' texts, and ranks documents when
// asked. IDF, for query expansion, comes last.

// TenantModel implements [retrieval.QueryEmbedder]: tenant's embedding
// model as the read path last read it, or, for a tenant it has not read
// yet, from one lookup of its registry row; hashing for a tenant that is
// not registered. A query that races a re-embedding cut-over meets the new
// model in its snapshot, which answers *retrieval.ModelMismatchError and
// remembers it.
func (s *Store) TenantModel(ctx context.Context, tenant string) (embed.Spec, error) {
	if v, ok := s.models.Load(tenant); ok {
		return v.(embed.Spec), nil
	}
	spec := embed.Spec{Model: embed.Hash}
	err := s.onReader(ctx, func(c *pgxpool.Conn) error {
		t, found, err := lookupTenant(ctx, c, tenant, nil)
		if err != nil || !found {
			return err
		}
		spec = t.settings.Spec()
		s.models.Store(tenant, spec)
		return nil
	})
	if err != nil {
		return spec, fmt.Errorf("tenant %q: %w", tenant, err)
	}
	return spec, nil
}

// EmbedQuery implements [retrieval.QueryEmbedder] with the registry the
// store's writes embed with (Options.Models).
func (s *Store) EmbedQuery(ctx context.Context, spec embed.Spec, text string, tokens []string) (*retrieval.DenseQuery, error) {
	return retrieval.EmbedQuery(ctx, s.opts.Models, spec, text, tokens)
}

// Models is the registry the store embeds documents and queries with
// (Options.Models).
func (s *Store) Models() *embed.Registry { return s.opts.Models }

// Rank implements [retrieval.Store] (see RankVersion).
func (s *Store) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	rk, _, err := s.RankVersion(ctx, req)
	return rk, err
}

// RankVersion ranks req (SPEC section 5, steps 2-4) and returns the tenant's
// index version (stats.version) that answered, so an audit record can cite
// exactly which index it was. An unknown tenant has no chunks and version 0.
//
// With the in-memory path enabled, a query whose tenant is cached at its
// committed version (or newer) is answered in one statement (and one more
// for its hits' texts when the index keeps none: fillTexts); otherwise, and
// always without the cache, everything is read in one read-only
// REPEATABLE READ snapshot, refreshing the cache on the way.
func (s *Store) RankVersion(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, int64, error) {
	out := retrieval.Funnel(req, nil, nil)
	var memErr error
	var noTexts bool
	version, err := s.read(ctx, req.Principal.Tenant,
		func(x *memindex.Index) { out, memErr = x.Rank(req); noTexts = x.DropsTexts() },
		func(ctx context.Context, q queryer, t tenantInfo) (bool, error) {
			if memErr != nil || !noTexts {
				return true, nil // an error is reported below
			}
			return fillTexts(ctx, q, t, req, &out)
		},
		func(tx pgx.Tx, t tenantInfo, st statsRow) error {
			st.colsOK = st.colsOK && !s.opts.ChunkScan
			rk, err := rankTx(ctx, tx, t, st, req)
			if err == nil {
				out = rk
				out.Stemmed = t.settings.Stems()
			}
			return err
		})
	if err == nil {
		err = memErr
	}
	if err != nil {
		return retrieval.Rankings{}, 0, fmt.Errorf("rank tenant %q: %w", req.Principal.Tenant, err)
	}
	return out, version, nil
}

// read answers one query of tenant on one of the two query paths and
// returns the index version that answered: mem on the cached index when it
// is current, else sql, in one read-only REPEATABLE READ snapshot. Neither
// runs for an unknown tenant (version 0): the caller's zero answer stands.
// After mem, fill (when not nil) completes its answer from the tenant's
// tables, outside the cache's lock; when it reports false, the answer is
// not to be had from the index (see fillTexts), and the snapshot answers.
//
// With the cache, one statement outside any transaction first reads the
// tenant's registry and stats rows; a cached index at that version or newer
// (a later committed state) answers at once (cache.current). Otherwise the
// snapshot's own first statement reads both rows again, and the cache is
// brought to that version (cache.use), or SQL ranks.
func (s *Store) read(ctx context.Context, tenant string, mem func(*memindex.Index), fill fillFunc, sql func(pgx.Tx, tenantInfo, statsRow) error) (int64, error) {
	var version int64
	err := s.onReader(ctx, func(c *pgxpool.Conn) error {
		var err error
		version, err = s.readOn(ctx, c, tenant, mem, fill, sql)
		return err
	})
	return version, err
}

// readOn is read on connection c (to the primary or a replica).
func (s *Store) readOn(ctx context.Context, c *pgxpool.Conn, tenant string, mem func(*memindex.Index), fill fillFunc, sql func(pgx.Tx, tenantInfo, statsRow) error) (int64, error) {
	if s.cache != nil {
		var st statsRow
		t, found, err := lookupTenant(ctx, c, tenant, &st)
		if err == nil && !found {
			return 0, nil
		}
		if s.citus {
			st.incarnation.node = st.node
		}
		if err == nil {
			s.models.Store(tenant, t.settings.Spec())
			if version, ok := s.cache.current(t, st, mem); ok {
				if s.opts.fillHook != nil {
					s.opts.fillHook(tenant)
				}
				filled, err := fill.run(ctx, c, t)
				if err == nil && !filled && len(s.replicas) > 0 {
					// A standby behind the cached index lacks rows it
					// ranked: the primary has them.
					filled, err = s.fillOnPrimary(ctx, fill, t)
				}
				if err != nil || filled {
					return version, err
				}
				// A hit's row changed since the index's version: the
				// snapshot answers.
				s.cache.memAnswers.Add(-1)
			}
		}
		// An error is reported by the transactional path, which meets it
		// again.
	}
	var version int64
	_, err := snapshotOn(ctx, c, tenant, s.placementCheck(), func(tx pgx.Tx, t tenantInfo, st statsRow) error {
		version = st.version
		s.models.Store(tenant, t.settings.Spec())
		if s.cache != nil {
			ok, load, err := s.cache.use(ctx, tx, t, st, mem)
			if err != nil {
				return err
			}
			if ok {
				// The index is at the snapshot's version: its hits' rows
				// are in the snapshot.
				filled, err := fill.run(ctx, tx, t)
				if err != nil || filled {
					return err
				}
				s.cache.memAnswers.Add(-1)
				s.cache.sqlAnswers.Add(1)
				return sql(tx, t, st)
			}
			if load {
				// This query does not wait: SQL answers it, and the
				// tenant loads once it is answered, so that the load's
				// reads and building do not compete with it for the
				// cores.
				defer s.startLoad(tenant, t.schema)
			}
		}
		if s.opts.sqlHook != nil {
			s.opts.sqlHook(tenant)
		}
		return sql(tx, t, st)
	})
	return version, err
}

// snapshotOn is inSnapshot on connection c. With moved not nil (on
// Citus), the snapshot is taken again, after calling moved, when a tenant
// move switched placements while it was read (see checkPlacement).
func snapshotOn(ctx context.Context, c *pgxpool.Conn, tenant string, moved func(tenantInfo), fn func(pgx.Tx, tenantInfo, statsRow) error) (found bool, err error) {
	var movedFrom tenantInfo
	for attempt := 1; ; attempt++ {
		err = inTxOn(ctx, c, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var st statsRow
			t, ok, err := lookupTenant(ctx, tx, tenant, &st)
			if err != nil {
				return err
			}
			if !ok {
				// The lookup's statement may have failed (no such schema),
				// which aborts the transaction: roll back, do not commit.
				return errNoTenant
			}
			found = true
			if moved == nil {
				return fn(tx, t, st)
			}
			st.incarnation.node = st.node
			if err := fn(tx, t, st); err != nil {
				return err
			}
			if err := checkPlacement(ctx, tx, t, st); err != nil {
				movedFrom = t
				return err
			}
			return nil
		})
		if errors.Is(err, errNoTenant) {
			return false, nil
		}
		if isTransientConflict(err) && attempt < maxPlacementAttempts {
			// A read-only snapshot that lost a deadlock (a tenant drop
			// taking its tables) or a serialization check is taken again.
			found = false
			continue
		}
		if !errors.Is(err, errPlacementMoved) || attempt == maxPlacementAttempts {
			return found, err
		}
		moved(movedFrom)
	}
}

// isTransientConflict reports whether err is a deadlock or serialization
// failure: PostgreSQL rolled the transaction back whole, and running it
// again is safe.
func isTransientConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// inSnapshot runs fn in one read-only REPEATABLE READ transaction, given
// tenant's registry and stats rows as the snapshot's first statement read
// them. found is false, and fn does not run, when the tenant is not
// registered.
func (s *Store) inSnapshot(ctx context.Context, tenant string, fn func(pgx.Tx, tenantInfo, statsRow) error) (found bool, err error) {
	err = s.onReader(ctx, func(c *pgxpool.Conn) error {
		var err error
		found, err = snapshotOn(ctx, c, tenant, s.placementCheck(), fn)
		return err
	})
	return found, err
}

// rankTx ranks req in SQL in tx's snapshot, whose stats row is st, in
// three statements after scopeTotals: the query terms' postings rows
// (readQueryPostings), one scan of the tenant's chunks that scores the
// dense side and reads the length and verdict of every chunk the postings
// name (scanChunks), and the chunks of the hits (fetchChunks). The lexical
// side is scored in Go (lexical), as the reference scores it.
func rankTx(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, req retrieval.RankRequest) (retrieval.Rankings, error) {
	var rk retrieval.Rankings
	req.Combined = req.Combined.ForTenant(t.settings.Stems(), t.settings.NormFields())
	n, sumLen, err := scopeTotals(ctx, tx, t, st, req.Principal)
	if err != nil {
		return rk, err
	}
	q, err := req.QueryVector(t.settings.Spec())
	if err != nil {
		return rk, err
	}
	var terms []string
	if len(req.Terms) > 0 && n > 0 {
		terms = req.Terms
	}
	filterArgs := []any{int16(req.Principal.Clearance), req.Principal.Barriers, req.NowTick, req.MaxStaleTicks}
	docs := req.Docs && n > 0 && len(req.Terms) > 0
	qp, sc, err := scanTx(ctx, tx, t, st, req, q, terms, filterArgs, docs)
	defer qp.release() // rk holds nothing of qp
	if err != nil {
		return rk, err
	}
	var lex []candidate
	var at [][][]int32
	if len(req.Terms) > 0 && n > 0 {
		var df []int64
		at, df = qp.positions(sc, t.settings.Statistics.Entitled())
		lex = lexical(req, qp, sc, at, df, n, sumLen, t.settings, &rk)
	}
	rk.Considered += int(sc.positive)
	rk.ExcludedByEntitlement += int(sc.hidden)
	rk.ExcludedByFreshness += int(sc.stale)
	hits, err := fetchChunks(ctx, tx, t, req, filterArgs, lex, sc.dense)
	if err != nil {
		return rk, err
	}
	// A side with no hits is an empty ranking, never nil.
	rk.Lexical, rk.Dense = hits[0], hits[1]
	switch {
	case docs:
		rk.Docs, err = docRankTx(ctx, tx, t, req, qp, sc, at, sumLen, filterArgs)
	case req.Docs && n > 0:
		rk.Docs = []retrieval.DocHit{} // no terms: no document holds one
	}
	return rk, err
}

// scanTx reads the postings of terms (none when terms is empty) and scans
// the tenant's chunks for the query vector q (nil: none): over the column
// blocks when the tenant has them (st.colsOK), postings and blocks read in
// one batch, else over the chunks table (scanChunks, with filterArgs).
func scanTx(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, req retrieval.RankRequest, q []int32, terms []string, filterArgs []any, docs bool) (queryPostings, chunkScan, error) {
	if st.colsOK {
		qd := newQueryDims(q)
		// The blocks are read by the scan only: their columns go back to
		// the pool once it is done.
		slab := getColSlab()
		defer slab.put()
		qp, ids, blocks, err := readPostingsAndColumns(ctx, tx, t.tables, terms, qd.dims, slab)
		if err != nil {
			return qp, chunkScan{}, err
		}
		return qp, scanColumns(t, req, qd, ids, docs, blocks), nil
	}
	var qp queryPostings
	if len(terms) > 0 {
		var err error
		if qp, err = readQueryPostings(ctx, tx, t.tables, terms); err != nil {
			return qp, chunkScan{}, err
		}
	}
	sc, err := scanChunks(ctx, tx, t, req, q, st.maxAbs, filterArgs, qp.chunks(), docs)
	return qp, sc, err
}

// scopeTotals is N and the length sum of p's statistics scope: the
// tenant's (from st), or the sum over the label sets p may see.
func scopeTotals(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, p cordontype.Principal) (n, sumLen int64, err error) {
	if !t.settings.Statistics.Entitled() {
		return st.nChunks, st.sumLen, nil
	}
	err = tx.QueryRow(ctx, `
		SELECT coalesce(sum(n_chunks), 0)::bigint, coalesce(sum(sum_len), 0)::bigint
		FROM `+t.tables.labelStats+` WHERE classification <= $1 AND barriers <@ $2::text[]`,
		int16(p.Clearance), p.Barriers).Scan(&n, &sumLen)
	return n, sumLen, classify(err)
}

// queryPostings are the stored postings of one query's terms, as the query
// path reads them: runs[i] holds those of terms[i], one run per postings
// row (a term row, or the postings of a bucket row that name the term),
// each run in chunk id order. Postings of chunks deleted since their
// segment was written are still there: a reader drops those whose chunk it
// does not find.
type queryPostings struct {
	runs [][]postingList
	buf  *postingsBuf // where runs and positions are, when not nil
}

// readQueryPostings reads the postings rows of terms (their term rows and
// bucket rows, each row once) in one statement and keeps, of a bucket row,
// the postings that name a query term. Nothing is joined in SQL: the rows
// come back as stored, packed (or, written before packing, as arrays), and
// are decoded here.
func readQueryPostings(ctx context.Context, tx pgx.Tx, tb tables, terms []string) (queryPostings, error) {
	sql, keys := postingsStatement(tb, terms)
	rows, err := tx.Query(ctx, sql, keys)
	if err != nil {
		return queryPostings{}, classify(err)
	}
	raws, err := copyPostingsRows(rows)
	if err != nil {
		return queryPostings{}, err
	}
	return decodeQueryPostings(raws, terms)
}

// postingsStatement is the statement that reads the postings rows of
// terms, and its argument: each term's key and its bucket's key.
func postingsStatement(tb tables, terms []string) (string, []string) {
	keys := make([]string, 0, 2*len(terms))
	for _, t := range terms {
		keys = append(keys, t, bucketKey(t))
	}
	return `SELECT term, ` + postingsCols + ` FROM ` + tb.postings + ` WHERE term = ANY($1::text[])`, keys
}

// copyPostingsRows copies each row of rows (the key, then postingsCols, in
// binary format) as it arrives, and closes rows.
func copyPostingsRows(rows pgx.Rows) ([][][]byte, error) {
	defer rows.Close()
	var out [][][]byte
	for rows.Next() {
		if err := binaryFields(rows, 1); err != nil {
			return nil, err
		}
		out = append(out, copyRaw(rows.RawValues()))
	}
	return out, classify(rows.Err())
}

// copyRaw copies a row's raw values (valid only until the next row) into
// one allocation, a NULL staying nil.
func copyRaw(raw [][]byte) [][]byte {
	size := 0
	for _, v := range raw {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, len(raw))
	for i, v := range raw {
		if v != nil {
			buf = append(buf, v...)
			out[i] = buf[len(buf)-len(v) : len(buf) : len(buf)]
		}
	}
	return out
}

// decodeQueryPostings decodes the postings rows raws of terms (as
// copyPostingsRows returns them) and keeps, of a bucket row, the postings
// that name a query term.
func decodeQueryPostings(raws [][][]byte, terms []string) (queryPostings, error) {
	qp := queryPostings{runs: make([][]postingList, len(terms))}
	ords := make(map[string][]int, len(terms))
	for i, t := range terms {
		ords[t] = append(ords[t], i)
	}
	// Packed rows say how many postings they hold: they are decoded into
	// one pooled buffer, a window of it each.
	total := 0
	for _, raw := range raws {
		total += packedCount(raw[4])
	}
	qp.buf = postingsBufs.Get().(*postingsBuf)
	qp.buf.reserve(total)
	off := 0
	var d rowReader
	for _, raw := range raws {
		d.chunks, d.tfs = nil, nil // kept in qp
		if n := packedCount(raw[4]); n > 0 && off+n <= len(qp.buf.chunks) {
			d.chunks, d.tfs = qp.buf.chunks[off:off:off+n], qp.buf.tfs[off:off:off+n]
			off += n
		}
		if err := d.decode(raw, 1); err != nil {
			return qp, err
		}
		if !d.bucket {
			// A term row: all of its postings are the term's.
			for _, i := range ords[string(raw[0])] {
				qp.runs[i] = append(qp.runs[i], postingList{chunks: d.chunks, tfs: d.tfs})
			}
			continue
		}
		// A bucket row, ordered by term, then chunk: each query term's
		// postings are one run of it.
		lo := 0
		for _, r := range d.runs {
			hi := lo + r.n
			for _, i := range ords[string(r.term)] {
				qp.runs[i] = append(qp.runs[i], postingList{chunks: d.chunks[lo:hi:hi], tfs: d.tfs[lo:hi:hi]})
			}
			lo = hi
		}
	}
	return qp, nil
}

// postingsBuf is a query's decoded postings and their positions in the
// chunk scan (queryPostings.positions), reused from query to query:
// decoding and placing a query's postings would otherwise allocate, and
// leave for the collector, about 16 bytes a posting (11.5 MB a query of
// the commonest terms at 100k chunks).
type postingsBuf struct {
	chunks []int64
	tfs    []int32
	pos    []int32
	used   int // of pos
}

var postingsBufs = sync.Pool{New: func() any { return new(postingsBuf) }}

// maxPooledPostings bounds the postings a pooled buffer keeps room for;
// a larger query's buffer is left to the collector.
const maxPooledPostings = 1 << 20

// reserve makes room for n postings; what the buffer held is gone.
func (b *postingsBuf) reserve(n int) {
	if n > cap(b.chunks) {
		b.chunks, b.tfs, b.pos = make([]int64, n), make([]int32, n), make([]int32, n)
	}
	b.chunks, b.tfs, b.pos, b.used = b.chunks[:n], b.tfs[:n], b.pos[:n], 0
}

// room returns room for n positions, from the buffer while it has
// some.
func (b *postingsBuf) room(n int) []int32 {
	if b == nil || b.used+n > len(b.pos) {
		return make([]int32, n)
	}
	p := b.pos[b.used : b.used+n : b.used+n]
	b.used += n
	return p
}

// release returns qp's buffer to the pool: nothing of qp, nor the
// positions placed from it, may be read after.
func (qp *queryPostings) release() {
	if qp.buf != nil && cap(qp.buf.chunks) <= maxPooledPostings {
		postingsBufs.Put(qp.buf)
	}
	qp.buf = nil
}

// packedCount is how many postings a packed postings value (data) says it
// holds, 0 when it is NULL or says nothing sensible (its decoding then
// refuses it).
func packedCount(data []byte) int {
	if len(data) < 2 || data[0] != packedFormat {
		return 0
	}
	n, k := uvarintAt(data[1:])
	if k <= 0 || n > uint64(len(data))/2 {
		return 0
	}
	return int(n)
}

// chunks is the chunk ids of all the postings, ascending, each once.
// Chunk ids are drawn from one sequence per tenant, so they usually span
// a range not much wider than their count: then a bitmap over the range
// orders them in linear time; else they are sorted.
func (qp queryPostings) chunks() []int64 {
	var n int
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, runs := range qp.runs {
		for _, r := range runs {
			if len(r.chunks) > 0 {
				n += len(r.chunks)
				lo, hi = min(lo, r.chunks[0]), max(hi, r.chunks[len(r.chunks)-1])
			}
		}
	}
	if n == 0 {
		return nil
	}
	if span := uint64(hi - lo); span/64 <= uint64(n) {
		set := make([]uint64, span/64+1)
		for _, runs := range qp.runs {
			for _, r := range runs {
				for _, id := range r.chunks {
					d := uint64(id - lo)
					set[d/64] |= 1 << (d % 64)
				}
			}
		}
		distinct := 0
		for _, word := range set {
			distinct += bits.OnesCount64(word)
		}
		ids := make([]int64, 0, distinct)
		for w, word := range set {
			for word != 0 {
				ids = append(ids, lo+int64(w*64+bits.TrailingZeros64(word)))
				word &= word - 1
			}
		}
		return ids
	}
	ids := make([]int64, 0, n)
	for _, runs := range qp.runs {
		for _, r := range runs {
			ids = append(ids, r.chunks...)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// The pre-filter, evaluated in SQL for every candidate. $2 is the clearance,
// $3 the principal's barriers, $4 now_tick, $5 max_stale_ticks (NULL: none).
// It mirrors retrieval.Visible and retrieval.Stale; the differential tests
// hold the two to the same answers.
const (
	visibleSQL = `(c.classification <= $2 AND c.barriers <@ $3::text[])`
	staleSQL   = `($5::bigint IS NOT NULL AND $4::bigint - c.as_of_tick > $5::bigint)`
)

// Verdicts of the pre-filter (SPEC section 5, steps 2-3) as scanChunks
// reports them, in the order the funnel counts them.
const (
	verdictKeep   = 0  // visible and fresh
	verdictHidden = 1  // outside the principal's entitlement
	verdictStale  = 2  // visible, but older than the freshness contract allows
	verdictGone   = -1 // no such chunk: deleted since its postings were written
)

// verdictSQL is the verdict of chunk c, with visibleSQL's and staleSQL's
// parameters.
const verdictSQL = `(CASE WHEN NOT ` + visibleSQL + ` THEN 1 WHEN ` + staleSQL + ` THEN 2 ELSE 0 END)::int`

// candidate is a chunk (by its internal id) and its score, before its
// row is read.
type candidate struct {
	id    int64
	score float64
}

// chunkScan is what scanChunks reads: the dense side's funnel counts and
// top candidates, and the length and verdict of each chunk asked for (ids,
// ascending; lengths and verdicts parallel, verdictGone for a chunk that
// does not exist).
type chunkScan struct {
	positive, hidden, stale int64 // chunks with a positive dot product, and of those the excluded
	dense                   []candidate
	ids                     []int64
	lengths, verdicts       []int32
	// With the document ranking: the document of each chunk asked for
	// (parallel to ids), and, when the scan read the whole tenant, the
	// length of every document one of them belongs to (nil otherwise).
	docIDs     []string
	docLengths map[string]int64
	// From the column blocks (scanColumns), the documents by number
	// instead: the number of each chunk asked for (parallel to ids, -1
	// for a chunk that is gone), each document's id and length by number,
	// and the number of documents in the scope (docN). docNames is nil
	// otherwise.
	docNum   []int32
	docNames []string
	docLens  []int64
	docN     int64
}

// float32Exact is 2^24: float32 holds every integer up to it exactly, so a
// float32 inner product whose partial sums stay below it is exact.
const float32Exact = 1 << 24

// exactDot is the SQL expression of the exact dot product of the vector
// column col with q (the statement's $1, passed as arg), for a column whose
// largest |component| is maxAbs. pgvector accumulates the inner product in
// float32: every |partial sum| is at most sum |q_i| * |d_i| <= l1(q) *
// maxAbs, and below 2^24 each one is an exact integer whatever the
// summation order, so the result is exact. Otherwise the expression sums
// exact bigint products instead.
func exactDot(col string, q []int32, maxAbs int32) (expr string, arg any) {
	var l1 int64
	for _, x := range q {
		l1 += int64(max(x, -x))
	}
	if l1*int64(maxAbs) < float32Exact {
		return `(-(` + col + ` <#> $1::vector))::bigint`, pgvector.NewVector(index.Float32s(q))
	}
	q64 := make([]int64, len(q))
	for i, x := range q {
		q64[i] = int64(x)
	}
	return `(SELECT sum(u.a::bigint * u.b) FROM unnest(` + col + `::real[], $1::bigint[]) AS u(a, b))`, q64
}

// scanChunks reads, in one statement, the length and verdict of the chunks
// ids (ascending, distinct) and, when q is not zero, the dense side: the
// funnel counts of the chunks whose dot product with q is positive, and
// the top_n visible, fresh ones by cosine, then chunk id (SPEC section 5).
// With docs (the document ranking), it also reads the document of each of
// ids and, when it scans the whole tenant anyway (q not zero), the length
// of each of those documents: the sum of all its chunks' lengths.
//
// The dot products are exact (exactDot). The cosine is ordered in SQL as
// dot::float8 / (sqrt(qn) * sqrt(norm_sq::float8)): correctly rounded IEEE
// 754 double operations (conversion, square root, product, quotient) in
// the order hashembed.Cosine performs them, so SQL orders and ties by the
// very values Go reports (chunk_id is COLLATE "C": byte order, as Go
// compares strings).
func scanChunks(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, q []int32, maxAbs int32, filterArgs []any, ids []int64, docs bool) (chunkScan, error) {
	var sc chunkScan
	qn := hashembed.NormSq(q)
	// Columns 8 and 9, with docs: the asked chunks' documents (kind 0),
	// and the documents' ids and lengths (kind 2).
	docCols, noDocCols, docCol := ``, ``, ``
	if docs {
		docCols, noDocCols, docCol = `, array_agg(doc_id) FILTER (WHERE asked), NULL::bigint[]`, `, NULL::text[], NULL::bigint[]`, `, c.doc_id`
	}
	var sql string
	var args []any
	if qn == 0 {
		if len(ids) == 0 {
			return sc, nil
		}
		sql = `
			SELECT 0, 0::bigint, 0::bigint, 0::bigint, array_agg(id), array_agg(length), array_agg(verdict)` + docCols + `
			FROM (SELECT c.id, c.length, ` + verdictSQL + ` AS verdict, true AS asked` + docCol + `
			      FROM ` + t.tables.chunks + ` c WHERE c.id = ANY($1::bigint[])) d`
		args = append([]any{ids}, filterArgs...)
	} else {
		dot, qarg := exactDot("c.embedding", q, maxAbs)
		// d is one pass over the tenant: each dot product is computed once.
		// The arrays are aggregated from the same rows in the same order,
		// so they are parallel (no ORDER BY: scanChunks places them).
		sql = `
			WITH d AS MATERIALIZED (
				SELECT c.id, c.chunk_id, c.length, c.norm_sq, (` + dot + `)::bigint AS dot, ` + verdictSQL + ` AS verdict,
				       c.id = ANY($8::bigint[]) AS asked` + docCol + `
				FROM ` + t.tables.chunks + ` c
			)
			SELECT 0 AS kind, count(*) FILTER (WHERE dot > 0), count(*) FILTER (WHERE dot > 0 AND verdict = 1),
			       count(*) FILTER (WHERE dot > 0 AND verdict = 2),
			       array_agg(id) FILTER (WHERE asked), array_agg(length) FILTER (WHERE asked),
			       array_agg(verdict) FILTER (WHERE asked)` + docCols + `
			FROM d
			UNION ALL
			(SELECT 1, id, dot, norm_sq, NULL, NULL, NULL` + noDocCols + ` FROM d WHERE dot > 0 AND verdict = 0
			 ORDER BY dot::float8 / ($6::float8 * sqrt(norm_sq::float8)) DESC, chunk_id
			 LIMIT $7)`
		if docs {
			sql += `
			UNION ALL
			SELECT 2, 0, 0, 0, NULL, NULL, NULL, array_agg(doc_id), array_agg(len)
			FROM (SELECT doc_id, sum(length)::bigint AS len FROM d GROUP BY doc_id HAVING bool_or(asked)) l`
		}
		args = append(append([]any{qarg}, filterArgs...), math.Sqrt(float64(qn)), req.TopN, ids)
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return sc, classify(err)
	}
	defer rows.Close()
	sc.ids, sc.lengths, sc.verdicts = ids, make([]int32, len(ids)), make([]int32, len(ids))
	for i := range sc.verdicts {
		sc.verdicts[i] = verdictGone
	}
	if docs {
		sc.docIDs = make([]string, len(ids))
	}
	dest := []any{new(int), new(int64), new(int64), new(int64), nil, nil, nil}
	if docs {
		dest = append(dest, nil, nil)
	}
	var got []int64
	var lengths, verdicts []int32
	var names [][]byte
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return sc, err
		}
		kind, a, b, c := *dest[0].(*int), *dest[1].(*int64), *dest[2].(*int64), *dest[3].(*int64)
		raw := rows.RawValues()
		switch kind {
		case 1:
			sc.dense = append(sc.dense, candidate{id: a, score: hashembed.Cosine(b, qn, c)})
			continue
		case 2:
			if sc.docLengths, err = docLengthsOf(raw[7], raw[8]); err != nil {
				return sc, err
			}
			continue
		}
		sc.positive, sc.hidden, sc.stale = a, b, c
		for _, f := range rows.FieldDescriptions()[4:] {
			if f.Format != pgx.BinaryFormatCode {
				return sc, fmt.Errorf("%w: chunk arrays not in binary format", errArrayFormat)
			}
		}
		rawIDs, rawLengths, rawVerdicts := raw[4], raw[5], raw[6]
		if rawIDs == nil {
			continue // none of ids exists
		}
		if got, err = appendInt8Array(got[:0], rawIDs); err != nil {
			return sc, err
		}
		if lengths, err = appendInt4Array(lengths[:0], rawLengths); err != nil {
			return sc, err
		}
		if verdicts, err = appendInt4Array(verdicts[:0], rawVerdicts); err != nil {
			return sc, err
		}
		if len(lengths) != len(got) || len(verdicts) != len(got) {
			return sc, fmt.Errorf("%w: %d ids, %d lengths, %d verdicts", errArrayFormat, len(got), len(lengths), len(verdicts))
		}
		if docs {
			if names, err = appendTextArray(names[:0], raw[7]); err != nil {
				return sc, err
			}
			if len(names) != len(got) {
				return sc, fmt.Errorf("%w: %d ids, %d documents", errArrayFormat, len(got), len(names))
			}
		}
		for i, id := range got {
			p, found := slices.BinarySearch(ids, id)
			if !found {
				return sc, fmt.Errorf("chunk scan: chunk %d was not asked for", id)
			}
			sc.lengths[p], sc.verdicts[p] = lengths[i], verdicts[i]
			if docs {
				sc.docIDs[p] = string(names[i])
			}
		}
	}
	return sc, classify(rows.Err())
}

// docLengthsOf decodes the document ids and lengths of scanChunks's kind 2
// row (two parallel binary arrays, NULL for no document).
func docLengthsOf(rawIDs, rawLengths []byte) (map[string]int64, error) {
	out := map[string]int64{}
	if rawIDs == nil {
		return out, nil
	}
	names, err := appendTextArray(nil, rawIDs)
	if err != nil {
		return nil, err
	}
	lengths, err := appendInt8Array(nil, rawLengths)
	if err != nil {
		return nil, err
	}
	if len(lengths) != len(names) {
		return nil, fmt.Errorf("%w: %d documents, %d lengths", errArrayFormat, len(names), len(lengths))
	}
	for i, n := range names {
		out[string(n)] = lengths[i]
	}
	return out, nil
}

// positions looks each posting of qp up in sc: at[i][j][k] is the
// position in sc.ids of the chunk of posting k of run j of term i, or -1
// for a chunk that is gone. df[i] counts term i's postings of chunks that
// exist and, when the statistics scope is entitled, are visible
// (freshness does not narrow it).
func (qp queryPostings) positions(sc chunkScan, entitled bool) (at [][][]int32, df []int64) {
	at = make([][][]int32, len(qp.runs))
	df = make([]int64, len(qp.runs))
	rank := newIDRank(sc.ids)
	// Each run on its own, on every core; df summed per term after.
	type run struct {
		i, j int
		df   int64
	}
	var runs []run
	for i := range qp.runs {
		at[i] = make([][]int32, len(qp.runs[i]))
		for j := range qp.runs[i] {
			runs = append(runs, run{i: i, j: j})
		}
	}
	// The positions' room is taken before the runs go to the cores.
	poss := make([][]int32, len(runs))
	for x, rn := range runs {
		poss[x] = qp.buf.room(len(qp.runs[rn.i][rn.j].chunks))
	}
	parallel(len(runs), func(x int) {
		rn := &runs[x]
		r := qp.runs[rn.i][rn.j]
		pos := poss[x]
		lo := 0
		for k, id := range r.chunks {
			// sc.ids holds every posting's chunk (qp.chunks()).
			var p int
			var found bool
			if rank.words != nil {
				lo, found = rank.of(id)
			} else {
				// A run is ascending: search on from the last one.
				p, found = slices.BinarySearch(sc.ids[lo:], id)
				lo += p
			}
			if !found || sc.verdicts[lo] == verdictGone {
				pos[k] = -1
				continue
			}
			pos[k] = int32(lo)
			if !entitled || sc.verdicts[lo] != verdictHidden {
				rn.df++
			}
		}
		at[rn.i][rn.j] = pos
	})
	for _, rn := range runs {
		df[rn.i] += rn.df
	}
	return at, df
}

// lexical scores the query's postings (qp, placed in the chunk scan by
// qp.positions: at) with the scope's statistics (n, sumLen; df over
// visible postings when the scope is entitled), counts the
// funnel and records each term's idf in rk, exactly as the reference
// (index/memindex) does: a chunk's score sums float64(w * bm25.Term(...))
// in query term order from 0 (SPEC section 4). Postings of chunks that are
// gone (deleted) count nowhere. It returns the top_n visible,
// fresh chunks by score with every chunk tied with the last; fetchChunks
// orders ties by chunk id.
func lexical(req retrieval.RankRequest, qp queryPostings, sc chunkScan, at [][][]int32, df []int64, n, sumLen int64, settings index.Settings, rk *retrieval.Rankings) []candidate {
	w := bm25.NewIDFs(req.IDF, len(df))
	for i, d := range df {
		w.Set(i, n, d)
	}
	rk.IDF = w.IDF
	avgdl := bm25.AvgDL(sumLen, n)
	score := make([]float64, len(sc.ids))
	// The chunks in parts of ascending ids, each part on its own: a part
	// takes from every run, in query term order, the postings of its
	// chunks, so each chunk's score sums its terms in the same order as
	// one pass would.
	type part struct {
		kept                      topKeeper
		considered, hidden, stale int
	}
	parts := make([]part, min(len(sc.ids)/lexicalPart+1, lexicalParts()))
	parallel(len(parts), func(x int) {
		pt := &parts[x]
		plo, phi := x*len(sc.ids)/len(parts), (x+1)*len(sc.ids)/len(parts)
		if plo == phi {
			return
		}
		idLo, idHi := sc.ids[plo], sc.ids[phi-1]
		// each calls f(p, tf) for every posting of term i in the part.
		each := func(i int, f func(p int32, tf int32)) {
			for j, r := range qp.runs[i] {
				klo, khi := r.idRange(idLo, idHi)
				for k := klo; k < khi; k++ {
					if p := at[i][j][k]; p >= 0 {
						f(p, r.tfs[k])
					}
				}
			}
		}
		if c := req.Combined; c != nil {
			combinedPart(c, each, score, plo, phi, sc.lengths, w.Lex, avgdl, settings)
		} else {
			for i, runs := range qp.runs {
				weight, idf := req.Weight(i), w.Lex[i]
				for j, r := range runs {
					klo, khi := r.idRange(idLo, idHi)
					for k := klo; k < khi; k++ {
						if p := at[i][j][k]; p >= 0 {
							score[p] += float64(weight * bm25.Term(idf, int64(r.tfs[k]), int64(sc.lengths[p]), avgdl, settings.BM25))
						}
					}
				}
			}
		}
		for p := plo; p < phi; p++ {
			s := score[p]
			if !(s > 0) { // a gone chunk's score stays 0
				continue
			}
			pt.considered++
			switch sc.verdicts[p] {
			case verdictHidden:
				pt.hidden++
			case verdictStale:
				pt.stale++
			default:
				pt.kept.add(candidate{id: sc.ids[p], score: s}, req.TopN)
			}
		}
	})
	var kept []candidate
	for _, pt := range parts {
		rk.Considered += pt.considered
		rk.ExcludedByEntitlement += pt.hidden
		rk.ExcludedByFreshness += pt.stale
		kept = append(kept, pt.kept.kept...)
	}
	return topWithTies(kept, req.TopN)
}

// idRange is the range [klo, khi) of l's postings whose chunk ids are in
// [idLo, idHi].
func (l *postingList) idRange(idLo, idHi int64) (klo, khi int) {
	klo, _ = slices.BinarySearch(l.chunks, idLo)
	khi, found := slices.BinarySearch(l.chunks, idHi)
	if found {
		khi++
	}
	return klo, khi
}

// combinedPart adds to score[plo:phi] each chunk's score under c (SPEC
// section 4, "Combined terms"), group by group: each group's text and field
// sums are accumulated member by member in member order, then the group's
// contribution is added to every chunk of the part whose pseudo-frequency
// is above 0. each(i, f) visits term i's postings in the part.
func combinedPart(c *retrieval.Combined, each func(int, func(int32, int32)), score []float64, plo, phi int, lengths []int32, lex []float64, avgdl float64, settings index.Settings) {
	text, field := make([]float64, phi-plo), make([]float64, phi-plo)
	for gi := range c.Groups {
		g := &c.Groups[gi]
		for _, m := range g.Members {
			sum := text
			if m.Field {
				sum = field
			}
			each(m.Term, func(p int32, tf int32) {
				sum[int(p)-plo] += float64(m.Coef * float64(tf))
			})
		}
		idf := lex[g.IDF]
		for k := range text {
			if text[k] == 0 && field[k] == 0 {
				continue
			}
			p := plo + k
			norm := bm25.LengthNorm(int64(lengths[p]), avgdl, settings.BM25)
			if ptf := c.Combine(text[k], field[k], norm); ptf > 0 {
				score[p] += float64(g.Weight * bm25.TermNormF(idf, ptf, norm, settings.BM25))
			}
			text[k], field[k] = 0, 0
		}
	}
}

// lexicalPart is about how many chunks one part of lexical scores at
// least (a smaller query is scored in one part), and lexicalParts how many
// parts it makes at most (variables for the tests).
var (
	lexicalPart  = 16384
	lexicalParts = func() int { return runtime.GOMAXPROCS(0) }
)

// topKeeper keeps candidates bound for topWithTies(kept, k). When kept is
// full (and holds at least 8k), add first drops in place what topWithTies
// would drop, so that kept stays a few k long however many candidates
// pass through it, and each drop passes over about 8/7 as many candidates
// as were appended since the last. What it drops scores below the k best
// of kept, hence below the k best of any superset: topWithTies of the
// whole is unchanged. After a drop, the k-th best score of kept is a
// floor: a candidate scoring below it is below the k best of the whole,
// and is not appended at all.
type topKeeper struct {
	kept  []candidate
	floor float64
	cut   bool // floor is set
}

func (t *topKeeper) add(x candidate, k int) {
	if k <= 0 || t.cut && x.score < t.floor {
		return // topWithTies of k <= 0 is empty
	}
	if len(t.kept) == cap(t.kept) && len(t.kept) >= 8*k {
		t.kept = topWithTies(t.kept, k)
		t.floor, t.cut = t.kept[0].score, true
		for _, y := range t.kept {
			t.floor = min(t.floor, y.score)
		}
		if x.score < t.floor {
			return
		}
	}
	t.kept = append(t.kept, x)
}

// topWithTies returns the k best of c by score, and every other one whose
// score equals the k-th best's, in no particular order.
func topWithTies(c []candidate, k int) []candidate {
	if k <= 0 {
		return nil
	}
	if len(c) <= k {
		return c
	}
	// The k best scores in a min-heap: its root is the k-th best.
	h := make([]float64, 0, k)
	for _, x := range c {
		switch {
		case len(h) < k:
			h = append(h, x.score)
			for i := len(h) - 1; i > 0 && h[i] < h[(i-1)/2]; i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
		case x.score > h[0]:
			h[0] = x.score
			for i := 0; ; {
				m, l, r := i, 2*i+1, 2*i+2
				if l < k && h[l] < h[m] {
					m = l
				}
				if r < k && h[r] < h[m] {
					m = r
				}
				if m == i {
					break
				}
				h[i], h[m] = h[m], h[i]
				i = m
			}
		}
	}
	out := c[:0]
	for _, x := range c {
		if x.score >= h[0] {
			out = append(out, x)
		}
	}
	return out
}

// fetchChunks reads the chunks of each side's candidates (by internal id)
// in one statement, re-checking visibility and freshness in the WHERE
// clause: a row the principal may not see cannot come back. It returns
// each side's hits ordered by score, then chunk id (SPEC section 5), cut
// to top_n, never nil.
func fetchChunks(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, filterArgs []any, sides ...[]candidate) ([][]retrieval.Hit, error) {
	out := make([][]retrieval.Hit, len(sides))
	var ids []int64
	for i, side := range sides {
		out[i] = []retrieval.Hit{}
		for _, c := range side {
			ids = append(ids, c.id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT c.id, `+chunkColumns+` FROM `+t.tables.chunks+` c
		WHERE c.id = ANY($1::bigint[]) AND `+visibleSQL+` AND NOT `+staleSQL,
		append([]any{ids}, filterArgs...)...)
	if err != nil {
		return nil, classify(err)
	}
	chunks, err := collectChunksByID(rows, req.Principal.Tenant, len(ids))
	if err != nil {
		return nil, err
	}
	for i, side := range sides {
		hits := make([]retrieval.Hit, len(side))
		for j, c := range side {
			chunk, ok := chunks[c.id]
			if !ok {
				return nil, errors.New("a ranked chunk vanished within one snapshot: this is a bug, please report it with a replay script")
			}
			hits[j] = retrieval.Hit{Chunk: chunk, Score: c.score, Ref: c.id}
		}
		retrieval.SortHits(hits)
		out[i] = hits[:min(len(hits), req.TopN)]
	}
	return out, nil
}

// docRankTx is the document ranking of req (SPEC section 5, "Document
// evidence") in SQL, in tx's snapshot, from what the lexical side read:
// the query terms' postings (qp), placed in the chunk scan (at), whose
// chunks' documents and verdicts sc holds, summed per document in Go
// (retrieval.DocCounter); N counted over the documents table (a
// document's labels are its chunks'), and the lengths of the documents
// that may be ranked from the scan (or, when it did not read the whole
// tenant, one statement). sumLen is the chunk scope's length sum, which is
// the document scope's.
func docRankTx(ctx context.Context, tx pgx.Tx, t tenantInfo, req retrieval.RankRequest, qp queryPostings, sc chunkScan, at [][][]int32, sumLen int64, filterArgs []any) ([]retrieval.DocHit, error) {
	entitled := t.settings.Statistics.Entitled()
	if sc.docNames != nil {
		return docRankColumns(&req, qp, sc, at, sumLen, entitled, t.settings.BM25), nil
	}
	counter := retrieval.NewDocCounter(len(req.Terms))
	eachDocPosting(qp, sc, at, entitled, func(i int, p int32, tf int64, v int32) {
		counter.Add(i, sc.docIDs[p], tf, v == verdictKeep)
	})
	ids := counter.IDs()
	sc2 := retrieval.DocScope{SumLen: sumLen}
	countSQL := `SELECT count(*)::bigint FROM ` + t.tables.documents + ` c`
	var countArgs []any
	if entitled {
		countSQL += ` WHERE c.classification <= $1 AND c.barriers <@ $2::text[]`
		countArgs = filterArgs[:2]
	}
	if err := tx.QueryRow(ctx, countSQL, countArgs...).Scan(&sc2.N); err != nil {
		return nil, classify(err)
	}
	length := sc.docLengths
	if length == nil {
		length = make(map[string]int64, len(ids))
		rows, err := tx.Query(ctx, `
			SELECT doc_id, sum(length)::bigint FROM `+t.tables.chunks+`
			WHERE doc_id = ANY($1::text[]) GROUP BY doc_id`, ids)
		if err != nil {
			return nil, classify(err)
		}
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return nil, err
			}
			length[id] = n
		}
		if err := rows.Err(); err != nil {
			return nil, classify(err)
		}
	}
	docs, df := counter.Evidence(func(docID string) int64 { return length[docID] })
	sc2.DF = df
	return retrieval.RankDocs(&req, docs, sc2, t.settings.BM25), nil
}

// IDF implements [retrieval.Store]: each term's idf under p's statistics
// scope, read as RankVersion reads (the in-memory index when current, else
// SQL in one read-only snapshot); all zero for an unknown tenant.
func (s *Store) IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	out := make([]float64, len(terms))
	_, err := s.read(ctx, p.Tenant,
		func(x *memindex.Index) { out = x.IDF(p, terms) }, nil,
		func(tx pgx.Tx, t tenantInfo, st statsRow) error {
			st.colsOK = st.colsOK && !s.opts.ChunkScan
			idf, err := idfTx(ctx, tx, t, st, p, terms)
			if err == nil {
				out = idf
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("idf tenant %q: %w", p.Tenant, err)
	}
	return out, nil
}

// idfTx is each term's idf under p's statistics scope in tx's snapshot,
// whose stats row is st, with the scope's N and df counted exactly as rankTx
// counts them (df over the postings of current chunks, only visible ones
// under the entitled scope).
func idfTx(ctx context.Context, tx pgx.Tx, t tenantInfo, st statsRow, p cordontype.Principal, terms []string) ([]float64, error) {
	idf := make([]float64, len(terms))
	n, _, err := scopeTotals(ctx, tx, t, st, p)
	if err != nil || n == 0 || len(terms) == 0 {
		return idf, err
	}
	// No freshness contract: the verdicts only tell hidden from visible.
	filterArgs := []any{int16(p.Clearance), p.Barriers, int64(0), (*int64)(nil)}
	qp, sc, err := scanTx(ctx, tx, t, st, retrieval.RankRequest{Principal: p}, nil, terms, filterArgs, false)
	defer qp.release()
	if err != nil {
		return nil, err
	}
	_, df := qp.positions(sc, t.settings.Statistics.Entitled())
	for i := range idf {
		idf[i] = bm25.IDF(n, df[i])
	}
	return idf, nil
}

// eachDocPosting calls fn with every posting of qp (placed in sc by at)
// that counts for the document ranking: term i, the chunk's position in
// sc, the tf and the chunk's verdict; not those of chunks that are gone,
// nor, under the entitled scope, of hidden ones.
func eachDocPosting(qp queryPostings, sc chunkScan, at [][][]int32, entitled bool, fn func(i int, pos int32, tf int64, verdict int32)) {
	for i, runs := range qp.runs {
		for j, r := range runs {
			for k, pos := range at[i][j] {
				if pos < 0 {
					continue // the chunk is gone
				}
				v := sc.verdicts[pos]
				if entitled && v == verdictHidden {
					continue // outside the scope's statistics
				}
				fn(i, pos, int64(r.tfs[k]), v)
			}
		}
	}
}

// docRankColumns is docRankTx from a chunk scan of the column blocks,
// which numbers the documents and counts the scope's: the ranking
// retrieval.RankDocs gives over the same evidence, to the bit, with no
// statement and no evidence record per document. It reads a term's
// postings in one pass into dense arrays indexed by document number,
// counting the term's document frequency and summing its tf per ranked
// document as an integer, then adds, per document, what RankDocs adds for
// that term: term by term, or group by group under req.Combined with each
// group's members in member order, so that every document's float sums
// are RankDocs's. A document's chunks share its labels and tick, hence
// one verdict: any of its postings tells whether it is ranked.
func docRankColumns(req *retrieval.RankRequest, qp queryPostings, sc chunkScan, at [][][]int32, sumLen int64, entitled bool, p bm25.Params) []retrieval.DocHit {
	terms := len(req.Terms)
	if sc.docN == 0 || terms == 0 {
		return []retrieval.DocHit{}
	}
	nd := len(sc.docNames)
	verdicts, docNum := sc.verdicts, sc.docNum
	ranked := make([]bool, nd)
	mark := make([]int32, nd) // 1 + the last term counted in df
	acc := make([]int64, nd)
	score := make([]float64, nd)
	w := bm25.NewIDFs(req.IDF, terms)
	counted := make([]bool, terms)
	avgdl := bm25.AvgDL(sumLen, sc.docN)
	var touched []int32
	// pass sums term i's tf in each ranked document into acc, listing in
	// touched the documents it reaches, and sets its idf the first time.
	pass := func(i int) {
		touched = touched[:0]
		var df int64
		for j, r := range qp.runs[i] {
			for k, pos := range at[i][j] {
				if pos < 0 {
					continue // the chunk is gone
				}
				v := verdicts[pos]
				if (entitled && v == verdictHidden) || r.tfs[k] == 0 {
					continue // outside the scope's statistics, or no occurrence
				}
				num := docNum[pos]
				if mark[num] != int32(i)+1 {
					mark[num] = int32(i) + 1
					df++
				}
				if v != verdictKeep {
					continue
				}
				ranked[num] = true
				if acc[num] == 0 {
					touched = append(touched, num)
				}
				acc[num] += int64(r.tfs[k])
			}
		}
		if !counted[i] {
			counted[i] = true
			w.Set(i, sc.docN, df)
		}
	}
	if c := req.Combined; c != nil {
		text, field := make([]float64, nd), make([]float64, nd)
		inGroup := make([]int32, nd) // 1 + the last group that reached the document
		var group []int32
		for gi := range c.Groups {
			g := &c.Groups[gi]
			group = group[:0]
			for _, m := range g.Members {
				pass(m.Term)
				into := text
				if m.Field {
					into = field
				}
				for _, num := range touched {
					into[num] += float64(m.Coef * float64(acc[num]))
					acc[num] = 0
					if inGroup[num] != int32(gi)+1 {
						inGroup[num] = int32(gi) + 1
						group = append(group, num)
					}
				}
			}
			if !counted[g.IDF] {
				pass(g.IDF) // a group's idf is a member's, but need not be
				for _, num := range touched {
					acc[num] = 0
				}
			}
			idf := w.Lex[g.IDF]
			for _, num := range group {
				norm := bm25.LengthNorm(sc.docLens[num], avgdl, p)
				if ptf := c.Combine(text[num], field[num], norm); ptf > 0 {
					score[num] += float64(g.Weight * bm25.TermNormF(idf, ptf, norm, p))
				}
				text[num], field[num] = 0, 0
			}
		}
	} else {
		for i := range terms {
			pass(i)
			for _, num := range touched {
				score[num] += float64(req.Weight(i) * bm25.Term(w.Lex[i], acc[num], sc.docLens[num], avgdl, p))
				acc[num] = 0
			}
		}
	}
	// Only documents scoring at least the top_n-th best score can be
	// among the top_n: the others are not made hits at all.
	floor := topFloor(score, req.TopN)
	var out []retrieval.DocHit
	for num, s := range score {
		if s > 0 && s >= floor && ranked[num] {
			out = append(out, retrieval.DocHit{DocID: sc.docNames[num], Score: s})
		}
	}
	if out == nil {
		out = []retrieval.DocHit{}
	}
	return retrieval.TopDocs(out, req.TopN)
}

// topFloor is the k-th largest of the positive values of xs, or 0 when
// there are fewer than k (k <= 0: +Inf, nothing is kept).
func topFloor(xs []float64, k int) float64 {
	if k <= 0 {
		return math.Inf(1)
	}
	h := make([]float64, 0, k)
	for _, x := range xs {
		if x > 0 {
			h = topk.Offer(h, k, x)
		}
	}
	if len(h) < k {
		return 0
	}
	return h[0]
}

// idRank finds ids in a sorted set of ids in constant time, when they span
// a range not much wider than their count: a bitmap over the range and the
// count of ids before each word of it.
type idRank struct {
	lo     int64
	words  []uint64
	before []int32
}

// newIDRank indexes ids (ascending, distinct); its words are nil when ids
// span too wide a range.
func newIDRank(ids []int64) idRank {
	if len(ids) == 0 {
		return idRank{}
	}
	lo, span := ids[0], uint64(ids[len(ids)-1]-ids[0])
	if span/64 > uint64(len(ids)) {
		return idRank{}
	}
	r := idRank{lo: lo, words: make([]uint64, span/64+1), before: make([]int32, span/64+1)}
	for _, id := range ids {
		d := uint64(id - lo)
		r.words[d/64] |= 1 << (d % 64)
	}
	n := int32(0)
	for w, word := range r.words {
		r.before[w] = n
		n += int32(bits.OnesCount64(word))
	}
	return r
}

// of is id's position in the indexed ids, and whether it is one of them.
func (r idRank) of(id int64) (int, bool) {
	if id < r.lo {
		return 0, false
	}
	d := uint64(id - r.lo)
	w := d / 64
	if w >= uint64(len(r.words)) {
		return 0, false
	}
	bit := uint64(1) << (d % 64)
	return int(r.before[w]) + bits.OnesCount64(r.words[w]&(bit-1)), r.words[w]&bit != 0
}
