package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A column block (migration 00014) holds a set of chunks as columns: what
// the SQL query path reads of every chunk, without the chunk rows. It is a
// row of the segments table whose cols and dims are not NULL:
//
//   - cols, the chunks' columns and the block's tombstones, encoded by
//     colBlock.encode (all integers little-endian):
//
//     u8  format (1)
//     u32 n (chunks), g (tombstones), sets, docs
//     i64 ids[n]      strictly ascending
//     i64 gone[g]     strictly ascending: chunks deleted by the write that added the block
//     i32 lengths[n]
//     i64 norms[n]    squared norms of the vectors
//     i64 ticks[n]    as_of_tick
//     i16 classes[n]  classification
//     u32 set[n]      barrier set, an index into the sets below
//     u32 doc[n]      document, an index into the documents below
//     sets times:  u32 count, then count times (u32 length, the barrier's bytes), sorted
//     docs times:  u32 length, the document id's bytes
//
//   - dims, the vectors dimension by dimension: for d from 0, the n chunks'
//     component d, each cols_width bytes (1, 2 or 4, signed), in the order
//     of ids; dimension d starts at byte d*n*cols_width.
//
// Nothing may follow the last field; a decoder refuses a block that breaks
// any of these rules.

// colFormat is the cols encoding's format byte.
const colFormat = 1

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
// vs: 1, 2 or 4 bytes.
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
	n := len(b.ids)
	size := 1 + 16 + 8*len(b.gone) + n*(8+4+8+8+2+4+4)
	for _, s := range b.sets {
		size += 4
		for _, x := range s {
			size += 4 + len(x)
		}
	}
	for _, d := range b.docs {
		size += 4 + len(d)
	}
	out := make([]byte, 0, size)
	le := binary.LittleEndian
	out = append(out, colFormat)
	out = le.AppendUint32(out, uint32(n))
	out = le.AppendUint32(out, uint32(len(b.gone)))
	out = le.AppendUint32(out, uint32(len(b.sets)))
	out = le.AppendUint32(out, uint32(len(b.docs)))
	for _, x := range b.ids {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.gone {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.lengths {
		out = le.AppendUint32(out, uint32(x))
	}
	for _, x := range b.norms {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.ticks {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.classes {
		out = le.AppendUint16(out, uint16(x))
	}
	for _, x := range b.set {
		out = le.AppendUint32(out, x)
	}
	for _, x := range b.doc {
		out = le.AppendUint32(out, x)
	}
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

// colReader consumes an encoded block, remembering the first fault.
type colReader struct {
	buf []byte
	err error
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

// decodeCols decodes a cols value into b (its dims are left alone).
func decodeCols(buf []byte, b *colBlock) error {
	r := &colReader{buf: buf}
	if f := r.take(1); r.err == nil && f[0] != colFormat {
		return fmt.Errorf("%w: format %d", errColBlock, f[0])
	}
	n := r.count(8 + 4 + 8 + 8 + 2 + 4 + 4)
	g := r.count(8)
	ns := r.count(4)
	nd := r.count(4)
	if r.err != nil {
		return r.err
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

// ascending reports whether xs is strictly ascending.
func ascending(xs []int64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}
