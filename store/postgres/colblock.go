package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// A column block (migration 00014) holds a set of chunks as columns: what
// the SQL query path reads of every chunk, without the chunk rows. It is a
// row of the segments table whose cols and dims are not NULL:
//
//   - cols, the chunks' columns and the block's tombstones, encoded by
//     colBlock.encode (all integers little-endian):
//
//     u8  format (2)
//     u32 n (chunks), g (tombstones), sets, docs
//     i64 gone[g]     strictly ascending: chunks deleted by the write that added the block
//     seven columns of n values each, in this order: ids (strictly
//     ascending), lengths, norms (squared norms of the vectors), ticks
//     (as_of_tick), classes (classification), set (barrier set, an index
//     into the sets below), doc (document, an index into the documents
//     below); each as
//       u8  width w (1, 2, 4 or 8)
//       i64 base
//       n times a w-byte unsigned offset: the value is base + offset
//       (modulo 2^64), and must fit the column's type (i32 lengths, i16
//       classes, u32 set and doc; i64 ids, norms and ticks)
//     sets times:  u32 count, then count times (u32 length, the barrier's bytes), sorted
//     docs times:  u32 length, the document id's bytes
//
//     The encoder writes each column with base its smallest value (0 for
//     no chunks) and w the narrowest width that holds its largest value
//     minus base. Blocks written before format 2 have format 1: the
//     columns as i64 ids, i64 gone, i32 lengths, i64 norms, i64 ticks, i16
//     classes, u32 set and u32 doc arrays, gone second; they are read
//     alike, and rewritten in format 2 by the next merge or rebuild.
//
//   - dims, the vectors dimension by dimension: for d from 0, the n chunks'
//     component d, each cols_width bytes (1, 2 or 4, signed), in the order
//     of ids; dimension d starts at byte d*n*cols_width.
//
// Nothing may follow the last field; a decoder refuses a block that breaks
// any of these rules.

// colFormat is the cols encoding's format byte; colFormatV1, the format
// of blocks written before it, is still read.
const (
	colFormat   = 2
	colFormatV1 = 1
)

// errColBlock wraps every refusal of a stored column block.
var errColBlock = errors.New("malformed column block")

// colBlock is one column block decoded (or being built). A block read for
// a query holds its dims on the query's dimensions only, in qdims (width
// bytes a component); merges read the dims whole beside it (rawDims).
type colBlock struct {
	ids      []int64
	gone     []int64
	lengths  []int32
	norms    []int64
	ticks    []int64
	classes  []int16
	set      []uint32
	doc      []uint32
	sets     [][]string
	docs     []string
	width    int
	qdims    [][]byte
	setIndex map[string]uint32 // while building
	docIndex map[string]uint32 // while building
}

// add appends one chunk, its id above every id added before (its vector
// goes to the caller's list, parallel to ids).
func (b *colBlock) add(id int64, length int32, norm, tick int64, class int16, barriers []string, docID string) {
	if b.setIndex == nil {
		b.setIndex, b.docIndex = map[string]uint32{}, map[string]uint32{}
	}
	key := strings.Join(barriers, "\x00")
	s, ok := b.setIndex[key]
	if !ok {
		s = uint32(len(b.sets))
		b.setIndex[key] = s
		b.sets = append(b.sets, slices.Clone(barriers))
	}
	d, ok := b.docIndex[docID]
	if !ok {
		d = uint32(len(b.docs))
		b.docIndex[docID] = d
		b.docs = append(b.docs, docID)
	}
	b.ids = append(b.ids, id)
	b.lengths = append(b.lengths, length)
	b.norms = append(b.norms, norm)
	b.ticks = append(b.ticks, tick)
	b.classes = append(b.classes, class)
	b.set = append(b.set, s)
	b.doc = append(b.doc, d)
}

// widthFor is the narrowest stored width that holds every component of
// absolute value at most maxAbs: 1, 2 or 4 bytes.
func widthFor(maxAbs int64) int {
	switch {
	case maxAbs <= math.MaxInt8:
		return 1
	case maxAbs <= math.MaxInt16:
		return 2
	}
	return 4
}

// putComponent stores v at dst in width bytes.
func putComponent(dst []byte, width int, v int32) {
	switch width {
	case 1:
		dst[0] = byte(int8(v))
	case 2:
		binary.LittleEndian.PutUint16(dst, uint16(int16(v)))
	default:
		binary.LittleEndian.PutUint32(dst, uint32(v))
	}
}

// component reads the component stored at src in width bytes.
func component(src []byte, width int) int32 {
	switch width {
	case 1:
		return int32(int8(src[0]))
	case 2:
		return int32(int16(binary.LittleEndian.Uint16(src)))
	}
	return int32(binary.LittleEndian.Uint32(src))
}

// dimsOf lays vectors (one per chunk, each of dims components) out
// dimension by dimension at the narrowest width that holds them.
func dimsOf(vectors [][]int32, dims int) (out []byte, width int) {
	var top int64
	for _, v := range vectors {
		for _, x := range v {
			top = max(top, int64(x), -int64(x))
		}
	}
	width = widthFor(top)
	n := len(vectors)
	out = make([]byte, dims*n*width)
	for i, v := range vectors {
		for d, x := range v {
			putComponent(out[(d*n+i)*width:], width, x)
		}
	}
	return out, width
}

// encode renders b's cols value.
func (b *colBlock) encode() []byte {
	le := binary.LittleEndian
	out := b.appendHead(make([]byte, 0, 1+16+8*len(b.gone)+7*(1+8)+len(b.ids)*(8+4+8+8+2+4+4)+b.labelsSize()), colFormat)
	for _, x := range b.gone {
		out = le.AppendUint64(out, uint64(x))
	}
	out = appendColumn(out, b.ids)
	out = appendColumn(out, b.lengths)
	out = appendColumn(out, b.norms)
	out = appendColumn(out, b.ticks)
	out = appendColumn(out, b.classes)
	out = appendColumn(out, b.set)
	out = appendColumn(out, b.doc)
	return b.appendLabels(out)
}

// appendHead appends the format byte and the four counts that start a
// cols value of either format.
func (b *colBlock) appendHead(out []byte, format byte) []byte {
	le := binary.LittleEndian
	out = append(out, format)
	out = le.AppendUint32(out, uint32(len(b.ids)))
	out = le.AppendUint32(out, uint32(len(b.gone)))
	out = le.AppendUint32(out, uint32(len(b.sets)))
	return le.AppendUint32(out, uint32(len(b.docs)))
}

// appendLabels appends the barrier sets and document ids that end a cols
// value of either format.
func (b *colBlock) appendLabels(out []byte) []byte {
	le := binary.LittleEndian
	for _, s := range b.sets {
		out = le.AppendUint32(out, uint32(len(s)))
		for _, x := range s {
			out = le.AppendUint32(out, uint32(len(x)))
			out = append(out, x...)
		}
	}
	for _, d := range b.docs {
		out = le.AppendUint32(out, uint32(len(d)))
		out = append(out, d...)
	}
	return out
}

// labelsSize is the size of what appendLabels appends.
func (b *colBlock) labelsSize() int {
	size := 0
	for _, s := range b.sets {
		size += 4
		for _, x := range s {
			size += 4 + len(x)
		}
	}
	for _, d := range b.docs {
		size += 4 + len(d)
	}
	return size
}

// colInt are the types of a column block's integer columns.
type colInt interface {
	~int16 | ~int32 | ~int64 | ~uint32
}

// appendColumn appends one integer column of cols (format 2): its width,
// its base (the smallest value) and each value's offset from the base in
// that width, the narrowest that holds the largest offset.
func appendColumn[T colInt](out []byte, vs []T) []byte {
	var lo, hi int64
	for i, v := range vs {
		if i == 0 || int64(v) < lo {
			lo = int64(v)
		}
		if i == 0 || int64(v) > hi {
			hi = int64(v)
		}
	}
	span := uint64(hi) - uint64(lo)
	w := 8
	switch {
	case span <= math.MaxUint8:
		w = 1
	case span <= math.MaxUint16:
		w = 2
	case span <= math.MaxUint32:
		w = 4
	}
	le := binary.LittleEndian
	out = append(out, byte(w))
	out = le.AppendUint64(out, uint64(lo))
	for _, v := range vs {
		off := uint64(int64(v)) - uint64(lo)
		switch w {
		case 1:
			out = append(out, byte(off))
		case 2:
			out = le.AppendUint16(out, uint16(off))
		case 4:
			out = le.AppendUint32(out, uint32(off))
		default:
			out = le.AppendUint64(out, off)
		}
	}
	return out
}

// readColumn reads one integer column of n values (format 2), refusing a
// width other than 1, 2, 4 or 8 and a value outside [lo, hi].
func readColumn[T colInt](r *colReader, n int, lo, hi int64) []T {
	w := r.take(1)
	base := r.take(8)
	if r.err != nil {
		return nil
	}
	width := int(w[0])
	if width != 1 && width != 2 && width != 4 && width != 8 {
		r.err = fmt.Errorf("%w: a column of width %d", errColBlock, width)
		return nil
	}
	p := r.take(n * width)
	if p == nil {
		return nil
	}
	b := binary.LittleEndian.Uint64(base)
	out := slabTake[T](r.slab, n)
	if !offsetsInto(out, p, width, b, lo, hi) {
		r.err = fmt.Errorf("%w: a value out of its column's range", errColBlock)
		return nil
	}
	return out
}

// offsetsInto sets out[i] to base plus the i-th width-byte offset of p
// (modulo 2^64), one loop a width, and reports whether every value is in
// [lo, hi].
func offsetsInto[T colInt](out []T, p []byte, width int, base uint64, lo, hi int64) bool {
	le := binary.LittleEndian
	switch width {
	case 1:
		p = p[:len(out)]
		for i := range out {
			v := int64(base + uint64(p[i]))
			if v < lo || v > hi {
				return false
			}
			out[i] = T(v)
		}
	case 2:
		p = p[:2*len(out)]
		for i := range out {
			v := int64(base + uint64(le.Uint16(p[2*i:])))
			if v < lo || v > hi {
				return false
			}
			out[i] = T(v)
		}
	case 4:
		p = p[:4*len(out)]
		for i := range out {
			v := int64(base + uint64(le.Uint32(p[4*i:])))
			if v < lo || v > hi {
				return false
			}
			out[i] = T(v)
		}
	default:
		p = p[:8*len(out)]
		for i := range out {
			v := int64(base + le.Uint64(p[8*i:]))
			if v < lo || v > hi {
				return false
			}
			out[i] = T(v)
		}
	}
	return true
}

// colReader consumes an encoded block, remembering the first fault. Its
// integer columns are decoded into slab when it is not nil.
type colReader struct {
	buf  []byte
	err  error
	slab *colSlab
}

// colSlab is room for the integer columns of the blocks one query
// decodes, reused from query to query (colSlabs): at 100k chunks a query's
// blocks decode to about 3.8 MB of columns, otherwise left to the
// collector. slabTake and bytes hand out consecutive windows
// (slabWindow); a slab that runs out goes on in a new array, leaving the
// windows already taken where they are.
type colSlab struct {
	i64  []int64
	i32  []int32
	i16  []int16
	u32  []uint32
	b    []byte
	used [5]int
}

var colSlabs = sync.Pool{New: func() any { return new(colSlab) }}

// maxSlabBytes bounds the room a pooled slab keeps; a larger one is left
// to the collector.
const maxSlabBytes = 32 << 20

// getColSlab takes a slab from the pool, emptied.
func getColSlab() *colSlab {
	s := colSlabs.Get().(*colSlab)
	s.used = [5]int{}
	return s
}

// put returns s to the pool: nothing decoded into it may be read after.
func (s *colSlab) put() {
	if 8*cap(s.i64)+4*cap(s.i32)+2*cap(s.i16)+4*cap(s.u32)+cap(s.b) <= maxSlabBytes {
		colSlabs.Put(s)
	}
}

// slabWindow takes n values from *buf past *used, growing *buf (into a new
// array) when it has too few left.
func slabWindow[T any](buf *[]T, used *int, n int) []T {
	if *used+n > len(*buf) {
		*buf, *used = make([]T, max(n, 2*len(*buf))), 0
	}
	w := (*buf)[*used : *used+n : *used+n]
	*used += n
	return w
}

// slabTake is n values of a column, from s, or newly made when s is nil.
func slabTake[T colInt](s *colSlab, n int) []T {
	if s == nil {
		return make([]T, n)
	}
	var out any
	switch any(*new(T)).(type) {
	case int64:
		out = slabWindow(&s.i64, &s.used[0], n)
	case int32:
		out = slabWindow(&s.i32, &s.used[1], n)
	case int16:
		out = slabWindow(&s.i16, &s.used[2], n)
	case uint32:
		out = slabWindow(&s.u32, &s.used[3], n)
	}
	if w, ok := out.([]T); ok {
		return w
	}
	return make([]T, n)
}

// bytes is a copy of p, in s when s is not nil.
func (s *colSlab) bytes(p []byte) []byte {
	if s == nil {
		return bytes.Clone(p)
	}
	w := slabWindow(&s.b, &s.used[4], len(p))
	copy(w, p)
	return w
}

func (r *colReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf) {
		r.err = fmt.Errorf("%w: truncated", errColBlock)
		return nil
	}
	out := r.buf[:n:n]
	r.buf = r.buf[n:]
	return out
}

func (r *colReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// count reads a u32 count of items of at least size bytes each, refusing
// one the rest of the buffer cannot hold.
func (r *colReader) count(size int) int {
	c := r.u32()
	if r.err == nil && uint64(c)*uint64(size) > uint64(len(r.buf)) {
		r.err = fmt.Errorf("%w: %d items of %d bytes in %d", errColBlock, c, size, len(r.buf))
		return 0
	}
	return int(c)
}

func (r *colReader) str() string {
	n := r.count(1)
	return string(r.take(n))
}

// decodeCols decodes a cols value (format 2, or 1) into b (its dims are
// left alone).
func decodeCols(buf []byte, b *colBlock) error {
	return decodeColsIn(buf, b, nil)
}

// decodeColsIn is decodeCols with b's integer columns in slab (when not
// nil).
func decodeColsIn(buf []byte, b *colBlock, slab *colSlab) error {
	r := &colReader{buf: buf, slab: slab}
	f := r.take(1)
	if r.err == nil && f[0] != colFormat && f[0] != colFormatV1 {
		return fmt.Errorf("%w: format %d", errColBlock, f[0])
	}
	if r.err != nil {
		return r.err
	}
	var n, g, ns, nd int
	if f[0] == colFormatV1 {
		n = r.count(8 + 4 + 8 + 8 + 2 + 4 + 4)
		g, ns, nd = r.count(8), r.count(4), r.count(4)
		decodeColumnsV1(r, b, n, g, ns, nd)
	} else {
		n = r.count(7) // a byte a value at least
		g, ns, nd = r.count(8), r.count(4), r.count(4)
		decodeColumns(r, b, n, g, ns, nd)
	}
	if r.err != nil {
		return r.err
	}
	b.sets = make([][]string, ns)
	for i := range b.sets {
		c := r.count(4)
		s := make([]string, c)
		for j := range s {
			s[j] = r.str()
		}
		b.sets[i] = s
	}
	// The document ids are substrings of one string: one allocation for
	// all of them.
	blob := string(r.buf)
	b.docs = make([]string, nd)
	for i := range b.docs {
		n := r.count(1)
		at := len(blob) - len(r.buf)
		if r.take(n) == nil {
			break
		}
		b.docs[i] = blob[at : at+n]
	}
	if r.err != nil {
		return r.err
	}
	if len(r.buf) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", errColBlock, len(r.buf))
	}
	if !ascending(b.ids) || !ascending(b.gone) {
		return fmt.Errorf("%w: ids not strictly ascending", errColBlock)
	}
	return nil
}

// decodeColumns reads format 2's tombstones and columns of n chunks.
func decodeColumns(r *colReader, b *colBlock, n, g, ns, nd int) {
	if r.err != nil {
		return
	}
	if p := r.take(8 * g); p != nil {
		b.gone = make([]int64, g)
		for i := range b.gone {
			b.gone[i] = int64(binary.LittleEndian.Uint64(p[8*i:]))
		}
	}
	b.ids = readColumn[int64](r, n, math.MinInt64, math.MaxInt64)
	b.lengths = readColumn[int32](r, n, math.MinInt32, math.MaxInt32)
	b.norms = readColumn[int64](r, n, math.MinInt64, math.MaxInt64)
	b.ticks = readColumn[int64](r, n, math.MinInt64, math.MaxInt64)
	b.classes = readColumn[int16](r, n, math.MinInt16, math.MaxInt16)
	b.set = readColumn[uint32](r, n, 0, int64(ns)-1)
	b.doc = readColumn[uint32](r, n, 0, int64(nd)-1)
}

// decodeColumnsV1 reads format 1's ids, tombstones and columns of n
// chunks.
func decodeColumnsV1(r *colReader, b *colBlock, n, g, ns, nd int) {
	if r.err != nil {
		return
	}
	le := binary.LittleEndian
	ints64 := func(n int) []int64 {
		p := r.take(8 * n)
		if p == nil {
			return nil
		}
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(p[8*i:]))
		}
		return out
	}
	b.ids = ints64(n)
	b.gone = ints64(g)
	if p := r.take(4 * n); p != nil {
		b.lengths = make([]int32, n)
		for i := range b.lengths {
			b.lengths[i] = int32(le.Uint32(p[4*i:]))
		}
	}
	b.norms = ints64(n)
	b.ticks = ints64(n)
	if p := r.take(2 * n); p != nil {
		b.classes = make([]int16, n)
		for i := range b.classes {
			b.classes[i] = int16(le.Uint16(p[2*i:]))
		}
	}
	u32s := func(n, limit int) []uint32 {
		p := r.take(4 * n)
		if p == nil {
			return nil
		}
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(p[4*i:])
			if int64(out[i]) >= int64(limit) && r.err == nil {
				r.err = fmt.Errorf("%w: index %d of %d", errColBlock, out[i], limit)
			}
		}
		return out
	}
	b.set = u32s(n, ns)
	b.doc = u32s(n, nd)
}

// ascending reports whether xs is strictly ascending.
func ascending(xs []int64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}
