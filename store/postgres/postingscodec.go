package postgres

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// Postings rows are written and read in PostgreSQL's binary formats by the
// code in this file rather than value by value through pgx's generic array
// codec: a bulk ingest moves about 40 postings rows per chunk (its own
// segment and the merges), and pgx encodes and decodes each array element
// through an interface call and allocations, which made array coding the
// largest share of the store's CPU in merges.

// Element type OIDs of the postings arrays (pg_type.oid of int8, int4 and
// text).
const (
	oidInt8  = 20
	oidInt4  = 23
	oidText  = 25
	oidBytea = 17
)

// copyHeader starts a binary COPY stream: the signature, no flags, no
// header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// postingsRows is an io.Reader of a binary COPY stream of postings rows
// (term, block, n, data), in rows' order, encoded a few rows
// at a time as COPY reads.
type postingsRows struct {
	rows  []segmentRow
	block int64
	next  int    // index of the next row to encode
	buf   []byte // encoded bytes; buf[off:] not yet read
	off   int
	done  bool // the trailer has been encoded
}

// postingsRowsChunk is how many bytes the reader encodes ahead.
const postingsRowsChunk = 64 << 10

func newPostingsRows(rows []segmentRow, block int64) *postingsRows {
	return &postingsRows{rows: rows, block: block, buf: append(make([]byte, 0, postingsRowsChunk+4096), copyHeader...)}
}

func (r *postingsRows) Read(p []byte) (int, error) {
	if r.off == len(r.buf) {
		r.buf, r.off = r.buf[:0], 0
		for len(r.buf) < postingsRowsChunk && !r.done {
			if r.next == len(r.rows) {
				r.buf = binary.BigEndian.AppendUint16(r.buf, 0xffff) // trailer: field count -1
				r.done = true
				break
			}
			r.buf = appendPostingsRow(r.buf, r.rows[r.next], r.block)
			r.next++
		}
		if len(r.buf) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// appendPostingsRow appends one COPY tuple (term, block, n, data) of the
// postings table, its postings packed (appendPacked), in row.block if
// set, else in block.
func appendPostingsRow(b []byte, row segmentRow, block int64) []byte {
	p := row.list
	b = binary.BigEndian.AppendUint16(b, 4)
	b = binary.BigEndian.AppendUint32(b, uint32(len(row.key)))
	b = append(b, row.key...)
	if row.block != 0 {
		block = row.block
	}
	b = binary.BigEndian.AppendUint32(b, 8)
	b = binary.BigEndian.AppendUint64(b, uint64(block))
	b = binary.BigEndian.AppendUint32(b, 4)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.chunks)))
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendPacked(b, p.chunks, p.tfs, row.runs)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// arrayElems checks the binary header of a one-dimensional array without
// nulls of elem, each element width bytes (0: any), and returns its element
// count and the element data.
func arrayElems(src []byte, elem uint32, width int) (int, []byte, error) {
	if len(src) < 12 {
		return 0, nil, errArrayFormat
	}
	dims := binary.BigEndian.Uint32(src)
	if binary.BigEndian.Uint32(src[8:]) != elem {
		return 0, nil, fmt.Errorf("%w: element type %d, want %d", errArrayFormat, binary.BigEndian.Uint32(src[8:]), elem)
	}
	if dims == 0 {
		return 0, nil, nil
	}
	if dims != 1 || len(src) < 20 {
		return 0, nil, fmt.Errorf("%w: %d dimensions", errArrayFormat, dims)
	}
	n := binary.BigEndian.Uint32(src[12:])
	data := src[20:]
	if width == 0 {
		if uint64(len(data)) < uint64(n)*4 || n > math.MaxInt32 {
			return 0, nil, fmt.Errorf("%w: %d bytes for %d elements", errArrayFormat, len(data), n)
		}
		return int(n), data, nil
	}
	if uint64(len(data)) != uint64(n)*uint64(4+width) || n > math.MaxInt32 {
		return 0, nil, fmt.Errorf("%w: %d bytes for %d elements", errArrayFormat, len(data), n)
	}
	return int(n), data, nil
}

// appendInt8Array appends the elements of a binary int8[] to dst.
func appendInt8Array(dst []int64, src []byte) ([]int64, error) {
	n, data, err := arrayElems(src, oidInt8, 8)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, n)
	for i := range n {
		e := data[i*12:]
		if binary.BigEndian.Uint32(e) != 8 {
			return dst, fmt.Errorf("%w: a null or mis-sized element", errArrayFormat)
		}
		dst = append(dst, int64(binary.BigEndian.Uint64(e[4:])))
	}
	return dst, nil
}

// appendInt4Array appends the elements of a binary int4[] to dst.
func appendInt4Array(dst []int32, src []byte) ([]int32, error) {
	n, data, err := arrayElems(src, oidInt4, 4)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, n)
	for i := range n {
		e := data[i*8:]
		if binary.BigEndian.Uint32(e) != 4 {
			return dst, fmt.Errorf("%w: a null or mis-sized element", errArrayFormat)
		}
		dst = append(dst, int32(binary.BigEndian.Uint32(e[4:])))
	}
	return dst, nil
}

// appendTextArray appends the elements of a binary text[] to dst, each a
// slice of src (no copy: valid as long as src is).
func appendTextArray(dst [][]byte, src []byte) ([][]byte, error) {
	return appendVarlenaArray(dst, src, oidText)
}

// appendVarlenaArray is appendTextArray for a one-dimensional array of
// elements of type elem (text or bytea), no NULLs.
func appendVarlenaArray(dst [][]byte, src []byte, elem uint32) ([][]byte, error) {
	n, data, err := arrayElems(src, elem, 0)
	if err != nil {
		return dst, err
	}
	for range n {
		if len(data) < 4 {
			return dst, fmt.Errorf("%w: a text array ends early", errArrayFormat)
		}
		size := binary.BigEndian.Uint32(data)
		if size == 0xffffffff || uint64(size) > uint64(len(data)-4) {
			return dst, fmt.Errorf("%w: a null or mis-sized element", errArrayFormat)
		}
		dst = append(dst, data[4:4+size:4+size])
		data = data[4+size:]
	}
	if len(data) != 0 {
		return dst, fmt.Errorf("%w: %d bytes after a text array's elements", errArrayFormat, len(data))
	}
	return dst, nil
}

// decodePostings appends the binary int8[] chunks and int4[] tfs of one
// postings row to *chunks and *tfs, which must end up the same length.
func decodePostings(chunks *[]int64, tfs *[]int32, rawChunks, rawTfs []byte) error {
	var err error
	if *chunks, err = appendInt8Array(*chunks, rawChunks); err != nil {
		return err
	}
	if *tfs, err = appendInt4Array(*tfs, rawTfs); err != nil {
		return err
	}
	if len(*chunks) != len(*tfs) {
		return fmt.Errorf("%w: %d chunks and %d tfs", errArrayFormat, len(*chunks), len(*tfs))
	}
	return nil
}
