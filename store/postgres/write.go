package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

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
// them or none. It is the bulk-ingest path (one lock, one COPY of all chunks
// and postings, one statistics update). A doc id given twice keeps its last
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
		var w *write
		w, err = s.prepareWrite(ctx, t.tables, lastOfEach(batch))
		if err == nil {
			err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
				return putTx(ctx, tx, t, w)
			})
		}
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
	s.merge(ctx, t)
	out := make([][]cordontype.Chunk, len(batch))
	for i, d := range batch {
		out[i] = make([]cordontype.Chunk, len(d.chunks))
		for j := range d.chunks {
			out[i][j] = d.chunks[j].Chunk
		}
	}
	return out, nil
}

// errModelsChanged is returned by putTx when the tenant's embedding models
// are no longer the ones the batch was embedded with.
var errModelsChanged = errors.New("the tenant's embedding models changed during the write: embed again")

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
	if spec := t.settings.Spec(); !spec.IsHash() {
		all := make([][]index.PreparedChunk, len(batch))
		for i := range batch {
			all[i] = batch[i].chunks
		}
		if err := index.Vectorize(ctx, s.opts.Models, spec, all...); err != nil {
			return nil, err
		}
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

// lockStats takes the tenant's write lock (its stats row).
func lockStats(ctx context.Context, tx pgx.Tx, tb tables) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM `+tb.stats+` FOR UPDATE`)
	return classify(err)
}

// removeDocs deletes documents (their chunks cascade; their postings stay
// until their blocks are merged, and readers never see them) and returns how
// many existed, and how many chunks and tokens they had.
func removeDocs(ctx context.Context, tx pgx.Tx, tb tables, docIDs []string) (existed, n, sumLen int64, err error) {
	// The removed chunks leave their label sets' counters in the same
	// statement (zero rows stay; they sum to nothing).
	err = tx.QueryRow(ctx, `
		WITH gone AS (
			SELECT classification, barriers, count(*) AS n, sum(length)::bigint AS l
			FROM `+tb.chunks+` WHERE doc_id = ANY($1) GROUP BY classification, barriers
		), upd AS (
			UPDATE `+tb.labelStats+` s SET n_chunks = s.n_chunks - g.n, sum_len = s.sum_len - g.l
			FROM gone g WHERE s.classification = g.classification AND s.barriers = g.barriers
		)
		SELECT coalesce(sum(n), 0)::bigint, coalesce(sum(l), 0)::bigint FROM gone`, docIDs).Scan(&n, &sumLen)
	if err != nil {
		return 0, 0, 0, classify(err)
	}
	tag, err := tx.Exec(ctx, `DELETE FROM `+tb.documents+` WHERE doc_id = ANY($1)`, docIDs)
	if err != nil {
		return 0, 0, 0, classify(err)
	}
	return tag.RowsAffected(), n, sumLen, nil
}

// write is a batch ready to store: its rows built, chunk ids and the
// postings block number drawn from the tenant's sequences, all before the
// tenant's write lock is taken, so the lock covers only the writes.
type write struct {
	docIDs       []string
	docRows      [][]any
	chunkRows    [][]any
	postings     postingLists
	block        int64
	newN, newLen int64
	// docN and docLen are each document's chunk count and length sum
	// (same index as docIDs).
	docN, docLen []int64
	maxAbs       int32
	maxAbsNext   int32
}

// prepareWrite builds a batch's rows. Chunk ids come from the chunks
// table's identity sequence (COPY writes given identity values); ids and
// block numbers drawn for a write that then fails are simply never used.
func (s *Store) prepareWrite(ctx context.Context, tb tables, batch []preparedDoc) (*write, error) {
	w := &write{docIDs: make([]string, len(batch)), docRows: make([][]any, len(batch)), postings: postingLists{},
		docN: make([]int64, len(batch)), docLen: make([]int64, len(batch))}
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
	k := 0
	for i, d := range batch {
		w.docIDs[i] = d.doc.DocID
		hash := blake2b.Sum256([]byte(d.doc.Text))
		w.docRows[i] = []any{d.doc.DocID, int16(d.doc.Classification), d.doc.Barriers, d.doc.AsOfTick, d.doc.Title, d.meta, d.doc.Text, hash[:]}
		for j := range d.chunks {
			pc := &d.chunks[j]
			c := &pc.Chunk
			id := ids[k]
			k++
			m := maxAbsOf(pc.Vector)
			w.maxAbs = max(w.maxAbs, m)
			w.newN++
			w.newLen += int64(c.Length)
			w.docN[i]++
			w.docLen[i] += int64(c.Length)
			var nextVec any
			var nextNorm *int64
			var nextMax *int32
			if d.next != nil {
				nx := &d.next[j]
				mn := maxAbsOf(nx.Vector)
				w.maxAbsNext = max(w.maxAbsNext, mn)
				nextVec, nextNorm, nextMax = pgvector.NewVector(index.Float32s(nx.Vector)), &nx.NormSq, &mn
			}
			w.chunkRows = append(w.chunkRows, []any{id, c.ChunkID, c.DocID, int32(j), c.Section, c.Text, int32(c.StartChar), int32(c.EndChar), int32(c.Length),
				int16(c.Classification), c.Barriers, c.AsOfTick, pgvector.NewVector(index.Float32s(pc.Vector)), pc.NormSq, m,
				nextVec, nextNorm, nextMax})
			for x, term := range pc.Terms {
				w.postings.of(term).add(id, pc.TF[x])
			}
		}
	}
	return w, nil
}

func putTx(ctx context.Context, tx pgx.Tx, t tenantInfo, w *write) error {
	tb := t.tables
	if err := lockStats(ctx, tx, tb); err != nil {
		return err
	}
	if err := checkModels(ctx, tx, t); err != nil {
		return err
	}
	_, oldN, oldLen, err := removeDocs(ctx, tx, tb, w.docIDs)
	if err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "documents"},
		[]string{"doc_id", "classification", "barriers", "as_of_tick", "title", "metadata", "text", "content_hash"},
		pgx.CopyFromRows(w.docRows)); err != nil {
		return classify(err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{tb.schema, "chunks"},
		[]string{"id", "chunk_id", "doc_id", "ord", "section", "text", "start_char", "end_char", "length",
			"classification", "barriers", "as_of_tick", "embedding", "norm_sq", "max_abs",
			"embedding_next", "norm_sq_next", "max_abs_next"},
		pgx.CopyFromRows(w.chunkRows)); err != nil {
		return classify(err)
	}
	if err := copySegment(ctx, tx, tb, w.block, w.postings); err != nil {
		return err
	}
	// Every chunk carries its document's labels: count the new chunks into
	// their label sets by document.
	if _, err := tx.Exec(ctx, `
		INSERT INTO `+tb.labelStats+` AS s (classification, barriers, n_chunks, sum_len)
		SELECT d.classification, d.barriers, sum(u.n)::bigint, sum(u.l)::bigint
		FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(doc_id, n, l)
		JOIN `+tb.documents+` d ON d.doc_id = u.doc_id
		WHERE u.n > 0
		GROUP BY d.classification, d.barriers
		ON CONFLICT (classification, barriers) DO UPDATE
		SET n_chunks = s.n_chunks + excluded.n_chunks, sum_len = s.sum_len + excluded.sum_len`,
		w.docIDs, w.docN, w.docLen); err != nil {
		return classify(err)
	}
	var version, dead, live int64
	if err := tx.QueryRow(ctx, `UPDATE `+tb.stats+` SET
		n_chunks = n_chunks - $1 + $2, sum_len = sum_len - $3 + $4,
		max_abs = greatest(max_abs, $5), max_abs_next = greatest(max_abs_next, $6), version = version + 1,
		dead_postings = dead_postings + $3
		RETURNING version, dead_postings, sum_len`,
		oldN, w.newN, oldLen, w.newLen, w.maxAbs, w.maxAbsNext).Scan(&version, &dead, &live); err != nil {
		return classify(err)
	}
	if err := maybeCollect(ctx, tx, tb, dead, live); err != nil {
		return err
	}
	return logChanges(ctx, tx, tb, version, w.docIDs)
}

// checkModels fails with errModelsChanged unless the tenant's models are
// still those of t. The caller holds the tenant's write lock, which every
// re-embedding step that changes them takes too.
func checkModels(ctx context.Context, tx pgx.Tx, t tenantInfo) error {
	var model, state string
	var dims int
	var next *string
	var nextDims *int
	if err := tx.QueryRow(ctx, `SELECT embed_model, dims, reembed_state, next_model, next_dims FROM cordon.tenants WHERE name = $1`,
		t.name).Scan(&model, &dims, &state, &next, &nextDims); err != nil {
		return classify(err)
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

// logChanges records that docIDs changed at version, and prunes the log.
func logChanges(ctx context.Context, tx pgx.Tx, tb tables, version int64, docIDs []string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO `+tb.changes+` (version, doc_id) SELECT $1, unnest($2::text[])`, version, docIDs); err != nil {
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
	t, found, err := lookupTenant(ctx, s.pool, tenant, nil)
	if err != nil || !found {
		return false, err
	}
	var existed bool
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockStats(ctx, tx, t.tables); err != nil {
			return err
		}
		count, n, sumLen, err := removeDocs(ctx, tx, t.tables, []string{docID})
		existed = count > 0
		if err != nil || !existed {
			return err
		}
		var version, dead, live int64
		if err := tx.QueryRow(ctx, `UPDATE `+t.tables.stats+` SET n_chunks = n_chunks - $1, sum_len = sum_len - $2, version = version + 1,
			dead_postings = dead_postings + $2
			RETURNING version, dead_postings, sum_len`, n, sumLen).Scan(&version, &dead, &live); err != nil {
			return classify(err)
		}
		if err := maybeCollect(ctx, tx, t.tables, dead, live); err != nil {
			return err
		}
		return logChanges(ctx, tx, t.tables, version, []string{docID})
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

// maxMergesPerWrite bounds the merges one write runs after it commits; a
// cascade left over continues at the next write.
const maxMergesPerWrite = 3

// merge runs the merges a committed write made due. The write is durable
// whatever happens here: a failed merge is logged and retried by the next
// write.
func (s *Store) merge(ctx context.Context, t tenantInfo) {
	for range maxMergesPerWrite {
		merged, err := s.mergeSegments(ctx, t.tables)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("postings merge failed; the next write retries it", "tenant", t.name, "err", err)
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
