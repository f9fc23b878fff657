package postgres

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
)

// The cache reads a tenant's stored chunk rows back into prepared chunks
// instead of re-preparing its documents: the chunk fields and the vector
// are what the write stored, so neither chunking nor feature hashing runs
// again. Only the terms are recomputed, by tokenizing the stored chunk
// text (as index.Prepare does): the postings are stored by term, so a
// chunk's terms in first-occurrence order cannot be read back. Rows arrive
// in PostgreSQL's binary formats (pgvector's for the embedding) and are
// decoded on GOMAXPROCS workers, each counting terms with a vocabulary of
// its own (analysis.Vocabulary): the tenant's chunks share their terms'
// strings, and memindex.Builder builds the posting lists by term id.
//
// A profile of loading a generated 100k-chunk tenant by re-preparing
// (2026-12-02, BenchmarkColdLoad in lab/bench) spent 3.0 of its 6.3
// CPU-seconds in index.Prepare: tokenizing 1.2, feature hashing 0.9,
// chunk.Split 0.85.

// chunkRowsSQL selects the chunk rows forEachStoredDoc decodes, with where
// (on chunks c) appended: a document's chunks together, in chunk order,
// documents in doc_id order.
//
// The last three columns are the document's title when the tenant indexes
// field terms (index.Settings.Fields), which need it, else empty (no join),
// the chunk's section path (empty for none) and the chunk row's id
// (index.PreparedChunk.Ref).
func chunkRowsSQL(t tenantInfo, where string) string {
	title, join := `''::text`, ``
	if t.settings.Fields {
		title, join = `d.title`, ` JOIN `+t.tables.documents+` d ON d.doc_id = c.doc_id`
	}
	return `SELECT c.doc_id, c.chunk_id, c.section, c.text, c.start_char, c.end_char, c.length,
		c.classification, c.barriers, c.as_of_tick, c.embedding, ` + title + `, coalesce(c.section_path, ''), c.id
		FROM ` + t.tables.chunks + ` c` + join + where + ` ORDER BY c.doc_id, c.ord`
}

// chunkRowCols is the number of columns chunkRowsSQL selects.
const chunkRowCols = 14

// binaryRows are the query options that make every column of a
// chunkRowsSQL result arrive in binary format, the embedding included
// (pgx knows no codec for pgvector's type and would ask for text).
var binaryRows = pgx.QueryResultFormats{pgx.BinaryFormatCode}

// storedDoc is one document's chunk rows: their raw column values, copied
// out of the connection's buffer into one allocation.
type storedDoc struct {
	docID string
	raw   [][chunkRowCols][]byte
	pcs   []index.PreparedChunk
	// ids are the ids of each chunk's terms in vocab, the decoding
	// worker's vocabulary.
	ids   [][]int32
	vocab *analysis.Vocabulary
	// fields is the worker's scratch for field terms.
	fields *fieldScratch
	// termBytes is what the terms this document added to vocab add to an
	// index's dictionary (memindex.TermBytes): at least what the document
	// adds to a load's (a term may be new to more than one vocabulary).
	termBytes int64
	err       error
}

// fieldScratch is what a decoding worker counts and stems field texts
// with (analysis.AppendFieldTerms).
type fieldScratch struct {
	counter *analysis.Counter
	stemmer *analysis.Stemmer
}

func newFieldScratch() *fieldScratch {
	return &fieldScratch{counter: analysis.NewCounter(), stemmer: analysis.NewStemmer()}
}

// dropTexts clears d's chunk texts, once their terms are counted: a cached
// index keeps none (see fillTexts).
func (d *storedDoc) dropTexts() {
	for i := range d.pcs {
		d.pcs[i].Chunk.Text = ""
	}
}

// storedBatch is a few documents decoded by one worker.
type storedBatch struct {
	docs []storedDoc
	done chan struct{}
}

// storedBatchRows is about how many chunk rows a worker decodes at once.
const storedBatchRows = 256

// forEachStoredDoc decodes the rows of a chunkRowsSQL query (run with
// binaryRows) on GOMAXPROCS workers and calls fn for each document, in row
// order, on the calling goroutine. Its prepared chunks (d.pcs) are those
// index.Prepare (and, for a model, index.Vectorize) gave the write, but for
// their Terms unless named (a load numbers terms, d.ids in d.vocab, and
// needs no string per term of a chunk), and for their texts, which come
// packed (memindex.PackText) when pack is set. The vocabulary is written
// no more once forEachStoredDoc returns.
func forEachStoredDoc(rows pgx.Rows, t tenantInfo, named, pack bool, fn func(d *storedDoc) error) error {
	defer rows.Close()
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan *storedBatch, 4*workers)
	order := make(chan *storedBatch, 4*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vocab, fields := analysis.NewVocabulary(), newFieldScratch()
			for b := range jobs {
				for i := range b.docs {
					d := &b.docs[i]
					d.vocab, d.fields = vocab, fields
					d.err = decodeStoredDoc(d, t, named, pack)
				}
				close(b.done)
			}
		}()
	}
	// The reader alone touches rows until it closes order; it groups rows
	// by document into batches for the workers and records their order.
	var readErr error
	var stop atomic.Bool
	go func() {
		defer close(order)
		defer close(jobs)
		b := &storedBatch{done: make(chan struct{})}
		n := 0
		send := func() {
			jobs <- b
			order <- b
			b, n = &storedBatch{done: make(chan struct{})}, 0
		}
		for !stop.Load() && rows.Next() {
			raw := rows.RawValues()
			if err := checkChunkRow(rows, raw); err != nil {
				readErr = err
				return
			}
			if k := len(b.docs); k == 0 || b.docs[k-1].docID != string(raw[0]) {
				if n >= storedBatchRows {
					send()
				}
				b.docs = append(b.docs, storedDoc{docID: string(raw[0])})
			}
			d := &b.docs[len(b.docs)-1]
			d.raw = append(d.raw, copyRow(raw))
			n++
		}
		if len(b.docs) > 0 {
			send()
		}
	}()
	var err error
	for b := range order {
		<-b.done
		for i := range b.docs {
			if err != nil {
				break
			}
			d := &b.docs[i]
			if d.err != nil {
				err = fmt.Errorf("read stored document %q: %w", d.docID, d.err)
			} else {
				err = fn(d)
			}
		}
		if err != nil {
			stop.Store(true) // the reader stops at its next row
		}
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	return classify(rows.Err())
}

// checkChunkRow checks that a chunk row has chunkRowsSQL's columns, each
// in binary format and none null.
func checkChunkRow(rows pgx.Rows, raw [][]byte) error {
	fd := rows.FieldDescriptions()
	if len(raw) != chunkRowCols || len(fd) != chunkRowCols {
		return fmt.Errorf("%w: %d columns, want %d", errChunkRow, len(raw), chunkRowCols)
	}
	for i := range fd {
		if fd[i].Format != pgx.BinaryFormatCode || raw[i] == nil {
			return fmt.Errorf("%w: column %s null or not binary", errChunkRow, fd[i].Name)
		}
	}
	return nil
}

// copyRow copies a row's raw values (valid only until the next row) into
// one allocation.
func copyRow(raw [][]byte) [chunkRowCols][]byte {
	size := 0
	for _, v := range raw {
		size += len(v)
	}
	buf := make([]byte, 0, size)
	var out [chunkRowCols][]byte
	for i, v := range raw {
		buf = append(buf, v...)
		out[i] = buf[len(buf)-len(v) : len(buf) : len(buf)]
	}
	return out
}

// decodeStoredDoc decodes d's chunk rows into prepared chunks of tenant t
// (d.pcs), counting each chunk's terms with d.vocab (d.ids), names them
// (Terms) if named and packs their texts if pack.
func decodeStoredDoc(d *storedDoc, t tenantInfo, named, pack bool) error {
	d.pcs, d.ids = make([]index.PreparedChunk, len(d.raw)), make([][]int32, len(d.raw))
	known := len(d.vocab.Terms())
	for i := range d.raw {
		if err := decodeChunkRow(&d.pcs[i], &d.ids[i], &d.raw[i], t, d.vocab, d.fields, pack); err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		if named {
			d.pcs[i].Terms = d.vocab.Names(d.ids[i])
		}
	}
	for _, term := range d.vocab.Terms()[known:] {
		d.termBytes += memindex.TermBytes(len(term))
	}
	return nil
}

// decodeChunkRow decodes one chunkRowsSQL row into pc and the ids of its
// terms in vocab, its text packed (memindex.PackText) if pack.
func decodeChunkRow(pc *index.PreparedChunk, ids *[]int32, raw *[chunkRowCols][]byte, t tenantInfo, vocab *analysis.Vocabulary, fields *fieldScratch, pack bool) error {
	c := &pc.Chunk
	// The text is read in place (raw is d's own copy of the row, written no
	// more, and vocab keeps copies of its tokens), then kept packed or as
	// a string of its own.
	text := unsafe.String(unsafe.SliceData(raw[3]), len(raw[3]))
	if pack {
		c.Text = memindex.PackText(text)
	} else {
		c.Text = strings.Clone(text)
	}
	c.DocID, c.ChunkID, c.Section = string(raw[0]), string(raw[1]), string(raw[2])
	if len(raw[12]) > 0 {
		pc.Path = string(raw[12])
	}
	if len(raw[13]) != 8 {
		return fmt.Errorf("%w: id of %d bytes", errChunkRow, len(raw[13]))
	}
	pc.Ref = int64(binary.BigEndian.Uint64(raw[13]))
	c.Tenant = t.name
	ints := [3]*int{&c.StartChar, &c.EndChar, &c.Length}
	for j, p := range ints {
		v, err := int4(raw[4+j])
		if err != nil {
			return err
		}
		*p = int(v)
	}
	if len(raw[7]) != 2 {
		return fmt.Errorf("%w: classification of %d bytes", errChunkRow, len(raw[7]))
	}
	c.Classification = cordontype.Classification(int16(binary.BigEndian.Uint16(raw[7])))
	var labels [][]byte
	labels, err := appendTextArray(labels, raw[8])
	if err != nil {
		return err
	}
	c.Barriers = make([]string, len(labels)) // never nil, as ValidateBarriers gives
	for j, l := range labels {
		c.Barriers[j] = string(l)
	}
	if len(raw[9]) != 8 {
		return fmt.Errorf("%w: as_of_tick of %d bytes", errChunkRow, len(raw[9]))
	}
	c.AsOfTick = int64(binary.BigEndian.Uint64(raw[9]))
	if pc.Vector, err = decodeVector(raw[10], t.settings.Dims); err != nil {
		return err
	}
	pc.NormSq = hashembed.NormSq(pc.Vector)
	*ids, pc.TF = vocab.CountIDs(text)
	if t.settings.Stems() {
		*ids, pc.TF = vocab.AppendStemIDs(*ids, pc.TF)
	}
	if t.settings.Fields {
		var stemmer *analysis.Stemmer
		if t.settings.Stems() {
			stemmer = fields.stemmer
		}
		*ids, pc.TF = t.settings.AppendFieldIDs(vocab, *ids, pc.TF, string(raw[11]), pc.Path, c.Section, fields.counter, stemmer)
	}
	return nil
}

func int4(b []byte) (int32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("%w: an integer of %d bytes", errChunkRow, len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// decodeVector decodes pgvector's binary form (int16 dimensions, int16
// unused, then big-endian float32s) of a stored count vector: every
// component an integer of magnitude at most index.MaxCount.
func decodeVector(b []byte, dims int) ([]int32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: a vector of %d bytes", errChunkRow, len(b))
	}
	n := int(binary.BigEndian.Uint16(b))
	if n != dims || len(b) != 4+4*n {
		return nil, fmt.Errorf("%w: a vector of %d dimensions in %d bytes, want %d dimensions", errChunkRow, n, len(b), dims)
	}
	v := make([]int32, n)
	for i := range v {
		f := math.Float32frombits(binary.BigEndian.Uint32(b[4+4*i:]))
		if f > index.MaxCount || f < -index.MaxCount || f != float32(int32(f)) {
			return nil, fmt.Errorf("%w: vector component %d is %v, not an integer within ±2^24", errChunkRow, i, f)
		}
		v[i] = int32(f)
	}
	return v, nil
}
