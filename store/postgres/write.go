package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
)

// Put validates, chunks and stores doc in one transaction, replacing any
// document with the same id atomically. On any error nothing changes.
func (s *Store) Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error) {
	chunks, err := s.PutBatch(ctx, []cordontype.Document{doc})
	if err != nil {
		return nil, err
	}
	return chunks[0], nil
}

// PutBatch stores several documents of one tenant in one transaction: all of
// them or none. It is the bulk-ingest path (one COPY of all chunks and of
// all postings, one statistics update); batches written to one tenant at
// once are committed together (writegroup.go), and writes of one tenant
// from several processes run in parallel, serialising only their statistics
// updates. A doc id given twice keeps its last
// version. It returns each document's chunks in input order.
func (s *Store) PutBatch(ctx context.Context, docs []cordontype.Document) ([][]cordontype.Chunk, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	tenant := docs[0].Tenant
	for i := range docs {
		if err := docs[i].Validate(); err != nil {
			return nil, err
		}
		if docs[i].Tenant != tenant {
			return nil, fmt.Errorf("%w: a batch holds documents of one tenant (%q and %q)", cordontype.ErrInvalid, tenant, docs[i].Tenant)
		}
	}
	var t tenantInfo
	var batch []preparedDoc
	var merge bool
	var err error
	// A re-embedding step that commits between reading the tenant's models
	// and taking its write lock changes the models the batch must carry:
	// putTx notices (errModelsChanged) and the batch is embedded again.
	for attempt := 1; ; attempt++ {
		if t, err = s.tenantForWrite(ctx, tenant); err != nil {
			return nil, err
		}
		if batch, err = s.prepareDocs(ctx, t, docs); err != nil {
			return nil, err
		}
		merge, err = s.writeGrouped(ctx, t, lastOfEach(batch))
		if !errors.Is(err, errModelsChanged) || attempt == 3 {
			break
		}
	}
	if err != nil {
		if len(docs) == 1 {
			return nil, fmt.Errorf("put document %q: %w", docs[0].DocID, err)
		}
		return nil, fmt.Errorf("put %d documents: %w", len(docs), err)
	}
	if merge {
		s.merge(ctx, t)
	}
	out := make([][]cordontype.Chunk, len(batch))
	for i, d := range batch {
		out[i] = make([]cordontype.Chunk, len(d.chunks))
		for j := range d.chunks {
			out[i][j] = d.chunks[j].Chunk
		}
	}
	return out, nil
}

// prepareDocs chunks and tokenizes docs under t's settings and gives every
// chunk its vector of the tenant's model and, while re-embedding, of the
// next one: one embedding call per model for the whole batch.
func (s *Store) prepareDocs(ctx context.Context, t tenantInfo, docs []cordontype.Document) ([]preparedDoc, error) {
	batch := make([]preparedDoc, len(docs))
	var err error
	for i := range docs {
		d := &batch[i]
		d.doc = &docs[i]
		if d.chunks, err = index.Prepare(d.doc, t.settings); err != nil {
			return nil, err
		}
		if d.meta, err = metadataJSON(d.doc.Metadata); err != nil {
			return nil, err
		}
	}
	all := make([][]index.PreparedChunk, len(batch))
	for i := range batch {
		all[i] = batch[i].chunks
	}
	if err := index.Vectorize(ctx, s.opts.Models, t.settings.Spec(), all...); err != nil {
		return nil, err
	}
	if t.next != nil {
		if err := s.nextVectors(ctx, *t.next, batch); err != nil {
			return nil, fmt.Errorf("re-embedding to %s: %w", *t.next, err)
		}
	}
	return batch, nil
}

// nextVectors gives each chunk of batch its vector of spec, the second
// slot's model.
func (s *Store) nextVectors(ctx context.Context, spec embed.Spec, batch []preparedDoc) error {
	all := make([][]index.PreparedChunk, len(batch))
	for i := range batch {
		all[i] = make([]index.PreparedChunk, len(batch[i].chunks))
		for j, pc := range batch[i].chunks {
			all[i][j] = index.PreparedChunk{Chunk: pc.Chunk, Terms: pc.Terms, TF: pc.TF}
		}
	}
	if err := index.Vectorize(ctx, s.opts.Models, spec, all...); err != nil {
		return err
	}
	for i := range batch {
		batch[i].next = all[i]
	}
	return nil
}

// tenantForWrite looks a tenant up, creating it when the store auto-creates.
func (s *Store) tenantForWrite(ctx context.Context, tenant string) (tenantInfo, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil || found {
		return t, err
	}
	if s.opts.AutoCreate == nil {
		return t, fmt.Errorf("%w: %q (create it with 'cordon tenant create %s')", ErrTenantNotFound, tenant, tenant)
	}
	if _, err := createTenant(ctx, s.pool, tenant, *s.opts.AutoCreate); err != nil {
		return t, err
	}
	t, _, err = lookupTenant(ctx, s.pool, tenant, nil)
	return t, err
}

type preparedDoc struct {
	doc    *cordontype.Document
	meta   string
	chunks []index.PreparedChunk
	// next holds the chunks' vectors of the next model while the tenant
	// re-embeds (same index as chunks); nil otherwise.
	next []index.PreparedChunk
}

// lastOfEach keeps the last version of each doc id, in input order.
func lastOfEach(batch []preparedDoc) []preparedDoc {
	last := make(map[string]int, len(batch))
	for i, d := range batch {
		last[d.doc.DocID] = i
	}
	out := make([]preparedDoc, 0, len(last))
	for i, d := range batch {
		if last[d.doc.DocID] == i {
			out = append(out, d)
		}
	}
	return out
}

// Writes to one tenant run in parallel. A write takes, in this order:
//
//   - the tenant's write lock in shared mode (lockWriteSharedSQL):
//     re-embedding steps take it exclusively, so they never run beside a
//     write, and the tenant's models stay those the write checked;
//   - row locks on its documents, in doc id order: a put upserts the
//     documents' rows (a put never deletes a document row, it updates it, so
//     a waiter always finds the row it waited for), a delete locks the row;
//     two writes of one document are so serialised, and writes of several
//     documents lock them in one order and cannot deadlock;
//   - after its chunks and postings are written, the tenant's stats row
//     (applyStats), for the few statements that update the statistics, the
//     version and the change log.
//
// The stats row lock is held to the commit, so versions commit in order,
// and a snapshot that sees version v sees every write up to v and none
// after it; every write's removals and additions are counted under that
// lock from the rows the write itself deleted and wrote, so the statistics
// stay exact.

// writeLockClass is the first key of the tenant's write lock (the second is
// hashtext(schema)).
const writeLockClass = 0x57726974 // "Writ"

// lockWriteSharedSQL takes the tenant's write lock in shared mode, as every
// write does ($1 writeLockClass, $2 the schema).
const lockWriteSharedSQL = `SELECT pg_advisory_xact_lock_shared($1, hashtext($2))`

// lockWriteExclusive takes the tenant's write lock exclusively: it waits for
// the writes under way and keeps new ones out until the transaction ends.
func lockWriteExclusive(ctx context.Context, tx pgx.Tx, tb tables) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, writeLockClass, tb.schema)
	return classify(err)
}

// lockStats locks the tenant's stats row, which serialises the statistics
// updates of concurrent writes.
func lockStats(ctx context.Context, tx pgx.Tx, tb tables) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM `+tb.stats+` FOR UPDATE`)
	return classify(err)
}

// labelDelta is a change of one label set's chunk count and length sum.
type labelDelta struct {
	n, length int64
}

// labelKey names a label set: the classification and the sorted barriers
// joined by commas (a barrier label never holds one).
type labelKey struct {
	class    int16
	barriers string
}

// labelDeltas are the changes of a write by label set.
type labelDeltas map[labelKey]labelDelta

func (m labelDeltas) add(k labelKey, n, length int64) {
	d := m[k]
	d.n += n
	d.length += length
	m[k] = d
}

// removeChunksSQL deletes the chunks of the documents $1, whose rows the
// caller has locked, and counts them by label set (scanGone reads the
// result, and their ids, for the write's column block's tombstones). Their
// postings stay until their blocks are merged, and readers never see them.
func removeChunksSQL(tb tables) string {
	return `WITH gone AS (DELETE FROM ` + tb.chunks + ` WHERE doc_id = ANY($1) RETURNING id, classification, barriers, length)
		SELECT classification, array_to_string(barriers, ','), count(*), sum(length)::bigint, array_agg(id)
		FROM gone GROUP BY classification, barriers`
}

// scanGone reads removeChunksSQL's result into gone and returns how many
// chunks were removed, their length sum and their ids.
func scanGone(rows pgx.Rows, gone labelDeltas) (n, sumLen int64, ids []int64, err error) {
	defer rows.Close()
	for rows.Next() {
		var k labelKey
		var cn, cl int64
		var some []int64
		if err := rows.Scan(&k.class, &k.barriers, &cn, &cl, &some); err != nil {
			return 0, 0, nil, classify(err)
		}
		gone.add(k, -cn, -cl)
		n += cn
		sumLen += cl
		ids = append(ids, some...)
	}
	return n, sumLen, ids, classify(rows.Err())
}

// statsUpdate is what a write changes in the tenant's statistics.
type statsUpdate struct {
	labels             labelDeltas
	oldN, oldLen       int64
	newN, newLen       int64
	maxAbs, maxAbsNext int32
	docIDs             []string
	// writes is how many writes u holds; the version grows by as many.
	writes int64
}

// applyStats locks the stats row and applies u: the label sets' counters,
// N, the length sum, the vector bounds, the version and the change log, in
// one round trip (the lock is held from the first of these statements to
// the commit), then a postings collection when dead postings are due one.
func applyStats(ctx context.Context, tx pgx.Tx, tb tables, u statsUpdate) error {
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM ` + tb.stats + ` FOR UPDATE`)
	labels := queueLabels(b, tb, u.labels)
	b.Queue(`UPDATE `+tb.stats+` SET
		n_chunks = n_chunks - $1 + $2, sum_len = sum_len - $3 + $4,
		max_abs = greatest(max_abs, $5), max_abs_next = greatest(max_abs_next, $6), version = version + $7,
		dead_postings = dead_postings + $3
		RETURNING version, dead_postings, sum_len`,
		u.oldN, u.newN, u.oldLen, u.newLen, u.maxAbs, u.maxAbsNext, max(u.writes, 1))
	b.Queue(`INSERT INTO `+tb.changes+` (version, doc_id) SELECT s.version, u.doc_id FROM `+tb.stats+` s, unnest($1::text[]) AS u(doc_id)`, u.docIDs)
	br := tx.SendBatch(ctx, b)
	var version, dead, live int64
	err := execBatch(br, 1+labels)
	if err == nil {
		err = br.QueryRow().Scan(&version, &dead, &live)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return classify(err)
	}
	if err := maybeCollect(ctx, tx, tb, dead, live); err != nil {
		return err
	}
	return pruneChanges(ctx, tx, tb, version, max(u.writes, 1))
}

// execBatch reads the results of the next n statements of br, which
// return no rows the caller needs.
func execBatch(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// queueLabels queues the statement that adds d to the label sets'
// counters (under the stats row lock, so no other write changes them
// meanwhile): existing sets are updated, new ones inserted. Sets that reach
// zero stay; they sum to nothing. It returns how many statements it queued
// (none when d changes nothing).
func queueLabels(b *pgx.Batch, tb tables, d labelDeltas) int {
	var classes []int16
	var barriers []string
	var ns, ls []int64
	for k, v := range d {
		if v.n == 0 && v.length == 0 {
			continue
		}
		classes, barriers = append(classes, k.class), append(barriers, k.barriers)
		ns, ls = append(ns, v.n), append(ls, v.length)
	}
	if len(classes) == 0 {
		return 0
	}
	b.Queue(`
		WITH u AS (
			SELECT c, string_to_array(b, ',') AS b, n, l FROM unnest($1::smallint[], $2::text[], $3::bigint[], $4::bigint[]) AS u(c, b, n, l)
		), upd AS (
			UPDATE `+tb.labelStats+` s SET n_chunks = s.n_chunks + u.n, sum_len = s.sum_len + u.l
			FROM u WHERE s.classification = u.c AND s.barriers = u.b
			RETURNING s.classification, s.barriers
		)
		INSERT INTO `+tb.labelStats+` (classification, barriers, n_chunks, sum_len)
		SELECT u.c, u.b, u.n, u.l FROM u
		WHERE NOT EXISTS (SELECT 1 FROM upd WHERE upd.classification = u.c AND upd.barriers = u.b)`,
		classes, barriers, ns, ls)
	return 1
}

// write is a batch ready to store: its rows built, chunk ids and the
// postings block number drawn from the tenant's sequences, all before any
// lock is taken, so the locks cover only the writes.
type write struct {
	// docs holds the documents' columns, in doc id order (the order their
	// rows are locked in).
	docs      docColumns
	chunkRows [][]any
	postings  postingLists
	block     int64
	// cols holds the new chunks as the write's column block (its
	// tombstones are added under the locks), vectors their vectors.
	cols    colBlock
	vectors [][]int32
	// labels counts the new chunks by label set.
	labels       labelDeltas
	newN, newLen int64
	maxAbs       int32
	maxAbsNext   int32
	// writes is how many batches the write holds (a group's): the
	// tenant's version grows by as many.
	writes int64
}

// docColumns are documents as parallel columns for one upsert statement;
// barriers are joined by commas.
type docColumns struct {
	ids      []string
	classes  []int16
	barriers []string
	ticks    []int64
	titles   []string
	metas    []string
	texts    []string
	hashes   [][]byte
}

// prepareWrite builds a batch's rows. Chunk ids come from the chunks
// table's identity sequence (COPY writes given identity values); ids and
// block numbers drawn for a write that then fails are simply never used.
func (s *Store) prepareWrite(ctx context.Context, tb tables, batch []preparedDoc) (*write, error) {
	n := len(batch)
	w := &write{postings: postingLists{}, labels: labelDeltas{}, docs: docColumns{
		ids: make([]string, n), classes: make([]int16, n), barriers: make([]string, n), ticks: make([]int64, n),
		titles: make([]string, n), metas: make([]string, n), texts: make([]string, n), hashes: make([][]byte, n)}}
	total := 0
	for _, d := range batch {
		total += len(d.chunks)
	}
	rows, err := s.pool.Query(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)`, tb.chunks, total)
	if err != nil {
		return nil, classify(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify(err)
	}
	if w.block, err = nextBlock(ctx, s.pool, tb); err != nil {
		return nil, err
	}
	// Documents go in doc id order (the order their rows are locked in);
	// chunk ids are drawn in input order.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(batch[a].doc.DocID, batch[b].doc.DocID) })
	for i, j := range order {
		doc := batch[j].doc
		hash := blake2b.Sum256([]byte(doc.Text))
		w.docs.ids[i], w.docs.classes[i], w.docs.barriers[i], w.docs.ticks[i] = doc.DocID, int16(doc.Classification), strings.Join(doc.Barriers, ","), doc.AsOfTick
		w.docs.titles[i], w.docs.metas[i], w.docs.texts[i], w.docs.hashes[i] = doc.Title, batch[j].meta, doc.Text, hash[:]
	}
	k := 0
	for _, d := range batch {
		label := labelKey{class: int16(d.doc.Classification), barriers: strings.Join(d.doc.Barriers, ",")}
		for j := range d.chunks {
			pc := &d.chunks[j]
			c := &pc.Chunk
			id := ids[k]
			k++
			m := maxAbsOf(pc.Vector)
			w.maxAbs = max(w.maxAbs, m)
			w.newN++
			w.newLen += int64(c.Length)
			w.labels.add(label, 1, int64(c.Length))
			var nextVec any
			var nextNorm *int64
			var nextMax *int32
			if d.next != nil {
				nx := &d.next[j]
				mn := maxAbsOf(nx.Vector)
				w.maxAbsNext = max(w.maxAbsNext, mn)
				nextVec, nextNorm, nextMax = pgvector.NewVector(index.Float32s(nx.Vector)), &nx.NormSq, &mn
			}
			var path *string // NULL for none
			if pc.Path != "" {
				path = &pc.Path
			}
			w.chunkRows = append(w.chunkRows, []any{id, c.ChunkID, c.DocID, int32(j), c.Section, c.Text, int32(c.StartChar), int32(c.EndChar), int32(c.Length),
				int16(c.Classification), c.Barriers, c.AsOfTick, pgvector.NewVector(index.Float32s(pc.Vector)), pc.NormSq, m,
				nextVec, nextNorm, nextMax, path})
			for x, term := range pc.Terms {
				w.postings.of(term).add(id, pc.TF[x])
			}
			w.cols.add(id, int32(c.Length), pc.NormSq, c.AsOfTick, int16(c.Classification), c.Barriers, c.DocID)
			w.vectors = append(w.vectors, pc.Vector)
		}
	}
	return w, nil
}

// putTx stores w: in one round trip it takes the tenant's write lock
// (shared), checks the tenant's models, locks the documents by upserting
// their rows and deletes their old chunks; then it copies the chunks and the
// postings segment and, last, updates the statistics under the stats row
// lock.
func putTx(ctx context.Context, tx pgx.Tx, t tenantInfo, w *write) error {
	tb := t.tables
	b := &pgx.Batch{}
	b.Queue(lockWriteSharedSQL, writeLockClass, tb.schema)
	b.Queue(modelsSQL, t.name)
	// ORDER BY: rows are locked in doc id order (the arrays are sorted
	// too), so concurrent writes of shared documents cannot deadlock.
	b.Queue(`
		INSERT INTO `+tb.documents+` AS d (doc_id, classification, barriers, as_of_tick, title, metadata, text, content_hash)
		SELECT u.doc_id, u.classification, string_to_array(u.barriers, ','), u.as_of_tick, u.title, u.metadata::jsonb, u.text, u.content_hash
		FROM unnest($1::text[], $2::smallint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::bytea[])
			AS u(doc_id, classification, barriers, as_of_tick, title, metadata, text, content_hash)
		ORDER BY u.doc_id
		ON CONFLICT (doc_id) DO UPDATE SET classification = excluded.classification, barriers = excluded.barriers,
			as_of_tick = excluded.as_of_tick, title = excluded.title, metadata = excluded.metadata, text = excluded.text,
			content_hash = excluded.content_hash`,
		w.docs.ids, w.docs.classes, w.docs.barriers, w.docs.ticks, w.docs.titles, w.docs.metas, w.docs.texts, w.docs.hashes)
	b.Queue(removeChunksSQL(tb), w.docs.ids)
	labels := maps.Clone(w.labels)
	br := tx.SendBatch(ctx, b)
	var oldN, oldLen int64
	var goneIDs []int64
	_, err := br.Exec()
	if err == nil {
		err = scanModels(br.QueryRow(), t)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			oldN, oldLen, goneIDs, err = scanGone(rows, labels)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return classify(err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "chunks"},
		[]string{"id", "chunk_id", "doc_id", "ord", "section", "text", "start_char", "end_char", "length",
			"classification", "barriers", "as_of_tick", "embedding", "norm_sq", "max_abs",
			"embedding_next", "norm_sq_next", "max_abs_next", "section_path"},
		pgx.CopyFromRows(w.chunkRows)); err != nil {
		return classify(err)
	}
	if err := copySegment(ctx, tx, tb, w.block, w.postings); err != nil {
		return err
	}
	w.cols.setGone(goneIDs)
	if err := insertColBlock(ctx, tx, tb, w.block, &w.cols, w.vectors, t.settings.Dims); err != nil {
		return err
	}
	return applyStats(ctx, tx, tb, statsUpdate{labels: labels, oldN: oldN, oldLen: oldLen, newN: w.newN, newLen: w.newLen,
		maxAbs: w.maxAbs, maxAbsNext: w.maxAbsNext, docIDs: w.docs.ids, writes: w.writes})
}

// modelsSQL reads the tenant's embedding models (scanModels checks them).
const modelsSQL = `SELECT embed_model, dims, reembed_state, next_model, next_dims FROM cordon.tenants WHERE name = $1`

// scanModels fails with errModelsChanged unless the tenant's models, as
// modelsSQL read them, are still those of t. The caller holds the tenant's
// write lock (shared), which every re-embedding step that changes them takes
// exclusively, so they cannot change before the caller commits.
func scanModels(row pgx.Row, t tenantInfo) error {
	var model, state string
	var dims int
	var next *string
	var nextDims *int
	if err := row.Scan(&model, &dims, &state, &next, &nextDims); err != nil {
		return err
	}
	cur := t.settings.Spec()
	same := model == cur.Model && dims == cur.Dims && state == t.reembed && (next == nil) == (t.next == nil)
	if same && t.next != nil {
		same = *next == t.next.Model && *nextDims == t.next.Dims
	}
	if !same {
		return errModelsChanged
	}
	return nil
}

// changeLogKeep is how many versions of the change log writers keep; a
// cache further behind reloads the tenant.
const changeLogKeep = 100_000

// pruneChanges drops change log entries older than changeLogKeep versions,
// each time the version (grown by writes to version) passes a multiple of
// a thousand.
func pruneChanges(ctx context.Context, tx pgx.Tx, tb tables, version, writes int64) error {
	if version/1000 == (version-writes)/1000 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM `+tb.changes+` WHERE version <= $1`, version-changeLogKeep)
	return classify(err)
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
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil || !found {
		return false, err
	}
	var existed bool
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		tb := t.tables
		// A put updates a document's row in place, so the row lock, once
		// granted, holds the document's current row (or finds it gone).
		// Nothing is deleted unless the row was locked: a put that
		// committed the document after the lock found none would
		// otherwise lose its row and, by the cascade, its chunks to
		// statements that did not count them.
		b := &pgx.Batch{}
		b.Queue(lockWriteSharedSQL, writeLockClass, tb.schema)
		b.Queue(`SELECT count(*) FROM (SELECT 1 FROM `+tb.documents+` WHERE doc_id = $1 FOR UPDATE) d`, docID)
		var locked int64
		br := tx.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&locked)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return classify(err)
		}
		if existed = locked > 0; !existed {
			return nil
		}
		b = &pgx.Batch{}
		b.Queue(removeChunksSQL(tb), []string{docID})
		b.Queue(`DELETE FROM `+tb.documents+` WHERE doc_id = $1`, docID)
		br = tx.SendBatch(ctx, b)
		gone := labelDeltas{}
		var n, sumLen int64
		var goneIDs []int64
		rows, err := br.Query()
		if err == nil {
			n, sumLen, goneIDs, err = scanGone(rows, gone)
		}
		if err == nil {
			_, err = br.Exec()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return classify(err)
		}
		if len(goneIDs) > 0 {
			block, err := nextBlock(ctx, tx, tb)
			if err != nil {
				return err
			}
			cols := &colBlock{}
			cols.setGone(goneIDs)
			if err := insertColBlock(ctx, tx, tb, block, cols, nil, t.settings.Dims); err != nil {
				return err
			}
		}
		return applyStats(ctx, tx, tb, statsUpdate{labels: gone, oldN: n, oldLen: sumLen, docIDs: []string{docID}})
	})
	if err != nil {
		return false, fmt.Errorf("delete document %q: %w", docID, err)
	}
	if existed {
		s.merge(ctx, t)
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

// maxMergesPerWrite bounds the merges one write runs after it commits; a
// cascade left over continues at the next write.
const maxMergesPerWrite = 3

// merge runs the merges a committed write made due, of postings
// segments and of column blocks. The write is durable whatever happens
// here: a failed merge is logged and retried by the next write.
func (s *Store) merge(ctx context.Context, t tenantInfo) {
	s.mergeDue(ctx, t, "postings", func() (bool, error) { return s.mergeSegments(ctx, t.tables) })
	s.mergeDue(ctx, t, "column blocks", func() (bool, error) { return s.mergeColumns(ctx, t) })
}

// mergeDue runs merges of one kind until none is due, at most
// maxMergesPerWrite.
func (s *Store) mergeDue(ctx context.Context, t tenantInfo, kind string, merge func() (bool, error)) {
	for range maxMergesPerWrite {
		merged, err := merge()
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn(kind+" merge failed; the next write retries it", "tenant", t.name, "err", err)
			}
			return
		}
		if !merged {
			return
		}
	}
}

// metadataJSON renders document metadata for the jsonb column.
func metadataJSON(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("%w: metadata: %w", cordontype.ErrInvalid, err)
	}
	return string(b), nil
}
