package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Packed postings (migration 00015): a postings row written from tenant
// schema version 12 on holds its postings in one bytea, data, instead of
// the arrays chunks, tfs and terms. PostgreSQL sends an array element by
// element through each element type's output function, which made the
// postings statement of a query ranked in SQL cost more than the rest of
// the query; a bytea is sent as it is stored. The layout, byte for byte:
//
//	format  1 byte, 1
//	n       uvarint, the number of postings (at least 1)
//	chunks  n varints (zigzag): each chunk id minus the previous one (the
//	        first minus 0)
//	tfs     n uvarints, each at least 1 and at most 2^31-1
//	runs    uvarint r: 0 for a term row, else the number of term runs of a
//	        bucket row, each a uvarint byte length, the term's bytes and a
//	        uvarint count of postings (at least 1); the counts sum to n
//
// and nothing after. Chunk ids are strictly ascending within a term row
// and within each run; a bucket row's terms are strictly ascending (byte
// order), each named by one run. Rows written before version 12 keep
// their arrays (data NULL) until a merge or a collection rewrites them;
// readers take either form.

// packedFormat is the first byte of packed postings.
const packedFormat = 1

// errPacked wraps every refusal of stored packed postings.
var errPacked = errors.New("malformed packed postings")

// termRun is one term's stretch of a bucket row's postings: the term and
// its number of postings.
type termRun struct {
	term []byte
	n    int
}

// appendPacked appends the packed form of a postings row: chunks and tfs
// parallel, runs nil for a term row, else the bucket row's term runs in
// order (their counts summing to len(chunks)).
func appendPacked(b []byte, chunks []int64, tfs []int32, runs []termRun) []byte {
	b = append(b, packedFormat)
	b = binary.AppendUvarint(b, uint64(len(chunks)))
	prev := int64(0)
	for _, c := range chunks {
		b = binary.AppendVarint(b, c-prev)
		prev = c
	}
	for _, tf := range tfs {
		b = binary.AppendUvarint(b, uint64(tf))
	}
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for _, r := range runs {
		b = binary.AppendUvarint(b, uint64(len(r.term)))
		b = append(b, r.term...)
		b = binary.AppendUvarint(b, uint64(r.n))
	}
	return b
}

// packedReader reads the fields of packed postings in order; the first
// error sticks.
type packedReader struct {
	buf []byte
	err error
}

func (r *packedReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := uvarintAt(r.buf)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad %s", errPacked, what)
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// uvarintAt is binary.Uvarint with the common one-byte case first.
func uvarintAt(buf []byte) (uint64, int) {
	if len(buf) > 0 && buf[0] < 0x80 {
		return uint64(buf[0]), 1
	}
	return binary.Uvarint(buf)
}

// decodePacked appends the postings of one packed row to *chunks and
// *tfs and, for a bucket row, its term runs to *runs (the runs' terms
// alias data). It refuses anything appendPacked would not write.
func decodePacked(chunks *[]int64, tfs *[]int32, runs *[]termRun, data []byte) error {
	if len(data) == 0 || data[0] != packedFormat {
		return fmt.Errorf("%w: no format byte %d", errPacked, packedFormat)
	}
	r := packedReader{buf: data[1:]}
	n := r.uvarint("count")
	// Every posting takes at least two bytes: refuse a count the data
	// cannot hold before allocating for it.
	if r.err == nil && (n == 0 || n > uint64(len(r.buf))/2) {
		return fmt.Errorf("%w: %d postings in %d bytes", errPacked, n, len(data))
	}
	c0, t0, r0 := len(*chunks), len(*tfs), len(*runs)
	*chunks = slices.Grow(*chunks, int(n))[:c0+int(n)]
	*tfs = slices.Grow(*tfs, int(n))[:t0+int(n)]
	cs, ts := (*chunks)[c0:], (*tfs)[t0:]
	if err := decodePackedInto(cs, ts, runs, &r, n); err != nil {
		*chunks, *tfs, *runs = (*chunks)[:c0], (*tfs)[:t0], (*runs)[:r0]
		return err
	}
	return nil
}

// decodePackedInto decodes the postings after the count n into cs and ts
// (n long each) and the term runs into *runs.
func decodePackedInto(cs []int64, ts []int32, runs *[]termRun, r *packedReader, n uint64) error {
	// The two long loops read from a local slice by position: updating
	// r.buf through a pointer each value costs a write barrier while the
	// collector runs.
	buf, at := r.buf, 0
	prev := int64(0)
	for i := range cs {
		u, k := uvarintAt(buf[at:])
		if k <= 0 {
			return fmt.Errorf("%w: bad chunk id", errPacked)
		}
		at += k
		d := int64(u>>1) ^ -int64(u&1)
		if (d > 0 && prev > math.MaxInt64-d) || (d < 0 && prev < math.MinInt64-d) {
			return fmt.Errorf("%w: chunk id out of range", errPacked)
		}
		prev += d
		cs[i] = prev
	}
	for i := range ts {
		tf, k := uvarintAt(buf[at:])
		if k <= 0 {
			return fmt.Errorf("%w: bad tf", errPacked)
		}
		at += k
		if tf == 0 || tf > math.MaxInt32 {
			return fmt.Errorf("%w: tf %d", errPacked, tf)
		}
		ts[i] = int32(tf)
	}
	r.buf = buf[at:]
	nr := r.uvarint("run count")
	if r.err == nil && nr > n {
		return fmt.Errorf("%w: %d runs of %d postings", errPacked, nr, n)
	}
	r0 := len(*runs)
	var sum uint64
	for k := uint64(0); k < nr && r.err == nil; k++ {
		l := r.uvarint("term length")
		if r.err == nil && l > uint64(len(r.buf)) {
			return fmt.Errorf("%w: term of %d bytes in %d", errPacked, l, len(r.buf))
		}
		term := r.buf[:l:l]
		r.buf = r.buf[l:]
		c := r.uvarint("run length")
		if r.err == nil && (c == 0 || c > n-sum) {
			return fmt.Errorf("%w: run of %d postings", errPacked, c)
		}
		if k > 0 && bytes.Compare((*runs)[len(*runs)-1].term, term) >= 0 {
			return fmt.Errorf("%w: terms not strictly ascending", errPacked)
		}
		*runs = append(*runs, termRun{term: term, n: int(c)})
		sum += c
	}
	switch {
	case r.err != nil:
		return r.err
	case len(r.buf) != 0:
		return fmt.Errorf("%w: %d bytes after the last field", errPacked, len(r.buf))
	case nr > 0 && sum != n:
		return fmt.Errorf("%w: runs of %d postings in a row of %d", errPacked, sum, n)
	}
	// Ascending chunk ids within the row, or within each run.
	lo := 0
	for _, run := range (*runs)[r0:] {
		if !strictlyAscending(cs[lo : lo+run.n]) {
			return fmt.Errorf("%w: chunk ids not strictly ascending in a run", errPacked)
		}
		lo += run.n
	}
	if nr == 0 && !strictlyAscending(cs) {
		return fmt.Errorf("%w: chunk ids not strictly ascending", errPacked)
	}
	return nil
}

func strictlyAscending(ids []int64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// decodeRow appends the postings of one postings row, read in binary
// format as (chunks, tfs, terms, data), to *chunks and *tfs, and a bucket
// row's term runs to *runs: from data when it is not NULL, else from the
// arrays (names is scratch space for an array row's terms).
func decodeRow(chunks *[]int64, tfs *[]int32, runs *[]termRun, names *[][]byte, raw [][]byte) error {
	if raw[3] != nil {
		if raw[0] != nil || raw[1] != nil || raw[2] != nil {
			return fmt.Errorf("%w: a row with both arrays and packed postings", errPacked)
		}
		return decodePacked(chunks, tfs, runs, raw[3])
	}
	c0 := len(*chunks)
	if err := decodePostings(chunks, tfs, raw[0], raw[1]); err != nil || raw[2] == nil {
		return err
	}
	var err error
	if *names, err = appendTextArray((*names)[:0], raw[2]); err != nil {
		return err
	}
	if len(*names) != len(*chunks)-c0 {
		return fmt.Errorf("%w: %d chunks and %d terms", errArrayFormat, len(*chunks)-c0, len(*names))
	}
	for lo := 0; lo < len(*names); {
		hi := lo + 1
		for hi < len(*names) && bytes.Equal((*names)[hi], (*names)[lo]) {
			hi++
		}
		*runs = append(*runs, termRun{term: (*names)[lo], n: hi - lo})
		lo = hi
	}
	return nil
}

// rowReader decodes postings rows one after another into buffers it
// reuses.
type rowReader struct {
	chunks []int64
	tfs    []int32
	// runs is the row's term runs: a bucket row's, or one run of all its
	// postings under its key for a term row.
	runs   []termRun
	bucket bool
	names  [][]byte
}

// read decodes the current row of rows, whose columns from first on are
// postingsCols and whose first column is the row's key, and returns the
// row's raw values. What it decodes lasts until the next read or rows.Next
// (set chunks and tfs to nil first to keep them longer).
func (d *rowReader) read(rows pgx.Rows, first int) ([][]byte, error) {
	if err := binaryFields(rows, first); err != nil {
		return nil, err
	}
	raw := rows.RawValues()
	return raw, d.decode(raw, first)
}

// decode is read of a row's raw values, already checked to be in binary
// format.
func (d *rowReader) decode(raw [][]byte, first int) error {
	d.chunks, d.tfs, d.runs = d.chunks[:0], d.tfs[:0], d.runs[:0]
	if err := decodeRow(&d.chunks, &d.tfs, &d.runs, &d.names, raw[first:first+4]); err != nil {
		return err
	}
	d.bucket = len(d.runs) > 0
	if !d.bucket {
		d.runs = append(d.runs, termRun{term: raw[0], n: len(d.chunks)})
	}
	return nil
}

// postingsCols are the columns decodeRow takes, in its order.
const postingsCols = `chunks, tfs, terms, data`

// postingsColsOf is postingsCols qualified by the table alias a.
func postingsColsOf(a string) string {
	return a + `.chunks, ` + a + `.tfs, ` + a + `.terms, ` + a + `.data`
}

// binaryFields refuses a row whose fields from the first on are not in
// binary format (decodeRow reads the binary forms).
func binaryFields(rows pgx.Rows, first int) error {
	for _, fd := range rows.FieldDescriptions()[first:] {
		if fd.Format != pgx.BinaryFormatCode {
			return fmt.Errorf("%w: postings column %s not in binary format", errArrayFormat, fd.Name)
		}
	}
	return nil
}
