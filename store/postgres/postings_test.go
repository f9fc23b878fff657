package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cordon-rag/cordon/analysis"
)

func TestSizeClass(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{{1, 0}, {7, 0}, {8, 1}, {63, 1}, {64, 2}, {511, 2}, {512, 3}} {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestMergePick(t *testing.T) {
	if got := mergePick([]int64{1, 1, 1, 1, 1, 1, 1}); got != nil {
		t.Errorf("7 segments of class 0: merged %v, want none", got)
	}
	if got := mergePick([]int64{1, 1, 1, 1, 1, 1, 1, 1}); len(got) != 8 {
		t.Errorf("8 segments of class 0: merged %v, want all 8", got)
	}
	// A big segment is left alone while small ones merge.
	if got := mergePick([]int64{4096, 1, 1, 1, 1, 1, 1, 1, 1}); len(got) != 8 || got[0] != 1 {
		t.Errorf("merged %v, want the eight small segments only", got)
	}
	// Full segments are never merged again.
	full := int64(1) << (3 * fullClass)
	if got := mergePick([]int64{full, full, full, full, full, full, full, full + 1}); got != nil {
		t.Errorf("merged full segments %v", got)
	}
	// Fewer than 8 of every class: nothing to do.
	if got := mergePick([]int64{8, 8, 8, 8, 1, 1, 1, 2, 1000}); got != nil {
		t.Errorf("merged %v, want none", got)
	}
	// Eight of class 1: merged with the smaller ones, not the bigger.
	if got := mergePick([]int64{8, 9, 10, 11, 12, 13, 14, 15, 1, 2, 1000}); len(got) != 10 || got[9] != 9 {
		t.Errorf("merged %v, want the eight of class 1 and the two of class 0", got)
	}
}

// TestMergePickBoundsSegments simulates many writes, each followed by one
// merge (as Store.merge does, up to maxMergesPerWrite), and checks the
// invariants the read and write paths rely on: few segments, and each
// posting rewritten a logarithmic number of times.
func TestMergePickBoundsSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var segs []int64
	var written, total int64
	maxSegs := 0
	for range 20000 {
		n := int64(1 + r.IntN(40))
		total += n
		segs = append(segs, n)
		for range maxMergesPerWrite {
			pick := mergePick(segs)
			if pick == nil {
				break
			}
			var merged int64
			var keep []int64
			j := 0
			for i, b := range segs {
				if j < len(pick) && pick[j] == i {
					merged += b
					j++
					continue
				}
				keep = append(keep, b)
			}
			written += merged
			segs = append(keep, merged)
		}
		maxSegs = max(maxSegs, len(segs))
		var sum int64
		for _, b := range segs {
			sum += b
		}
		if sum != total {
			t.Fatalf("segments hold %d postings, want %d", sum, total)
		}
	}
	// About 400k postings: at most 7 segments in each of 7 size classes.
	if maxSegs > 7*7+1 {
		t.Errorf("%d segments at once", maxSegs)
	}
	amp := float64(written) / float64(total)
	if amp > 8 {
		t.Errorf("write amplification %.1f: each posting rewritten too often", amp)
	}
	t.Logf("%d postings, at most %d segments, write amplification %.2f", total, maxSegs, amp)
}

// TestPostingsArrayCodec checks the binary array decoders, which read the
// rows written before packed postings, against a hand-written int8[] and
// int4[] and the errors on malformed input; the integration tests run
// them through PostgreSQL.
func TestPostingsArrayCodec(t *testing.T) {
	p := &postingList{chunks: []int64{1, 1 << 40, -3}, tfs: []int32{7, 1, 1 << 30}}
	chunksField := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 1,
		0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 0,
		0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd,
	}
	tfsField := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 3, 0, 0, 0, 1,
		0, 0, 0, 4, 0, 0, 0, 7,
		0, 0, 0, 4, 0, 0, 0, 1,
		0, 0, 0, 4, 0x40, 0, 0, 0,
	}
	if c, f, _ := arrayFields(p, nil); !bytes.Equal(c, chunksField) || !bytes.Equal(f, tfsField) {
		t.Fatalf("test encoder wrote\n%v\n%v", c, f)
	}
	chunks, err := appendInt8Array([]int64{42}, chunksField)
	if err != nil || !slices.Equal(chunks, []int64{42, 1, 1 << 40, -3}) {
		t.Fatalf("int8[] decoded to %v (err %v)", chunks, err)
	}
	tfs, err := appendInt4Array(nil, tfsField)
	if err != nil || !slices.Equal(tfs, p.tfs) {
		t.Fatalf("int4[] decoded to %v (err %v)", tfs, err)
	}
	empty := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20}
	if got, err := appendInt8Array(nil, empty); err != nil || len(got) != 0 {
		t.Fatalf("empty int8[] decoded to %v (err %v)", got, err)
	}
	for _, tt := range []struct {
		name string
		src  []byte
	}{
		{"short", chunksField[:10]},
		{"truncated elements", chunksField[:len(chunksField)-1]},
		{"int4 as int8", tfsField},
		{"null element", func() []byte {
			b := slices.Clone(chunksField)
			copy(b[20:], []byte{0xff, 0xff, 0xff, 0xff})
			return b
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := appendInt8Array(nil, tt.src); !errors.Is(err, errArrayFormat) {
				t.Fatalf("decoded %v (err %v), want errArrayFormat", got, err)
			}
		})
	}
}

// TestPostingsTextArrayCodec checks a bucket row's terms field against a
// hand-written text[] and the errors on malformed input.
func TestPostingsTextArrayCodec(t *testing.T) {
	p := &postingList{chunks: []int64{4, 2}, tfs: []int32{1, 3}}
	field := []byte{
		0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 2, 0, 0, 0, 1,
		0, 0, 0, 2, 'a', 'b',
		0, 0, 0, 0,
	}
	if _, _, terms := arrayFields(p, []string{"ab", ""}); !bytes.Equal(terms, field) {
		t.Fatalf("test encoder wrote %v, want %v", terms, field)
	}
	got, err := appendTextArray([][]byte{[]byte("x")}, field)
	if err != nil || !slices.EqualFunc(got, []string{"x", "ab", ""}, func(a []byte, b string) bool { return string(a) == b }) {
		t.Fatalf("text[] decoded to %q (err %v)", got, err)
	}
	for _, tt := range []struct {
		name string
		src  []byte
	}{
		{"short", field[:10]},
		{"truncated element", field[:len(field)-5]},
		{"trailing bytes", append(slices.Clone(field), 0)},
		{"int8 as text", []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"null element", func() []byte {
			b := slices.Clone(field)
			copy(b[26:], []byte{0xff, 0xff, 0xff, 0xff})
			return b
		}()},
		{"oversized element", func() []byte {
			b := slices.Clone(field)
			copy(b[20:], []byte{0, 0, 1, 0})
			return b
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := appendTextArray(nil, tt.src); !errors.Is(err, errArrayFormat) {
				t.Fatalf("decoded %q (err %v), want errArrayFormat", got, err)
			}
		})
	}
}

// TestSegmentRows checks a segment's layout: every posting in exactly one
// row; a term row for each term with more than bucketMaxPostings postings,
// the others in their bucket's row, ordered by term, then chunk; rows in
// key order, bucket keys never a token.
func TestSegmentRows(t *testing.T) {
	lists := postingLists{}
	want := map[string][]int64{}
	for i := range 3000 {
		term := fmt.Sprintf("term%04d", i)
		n := 1 + i%5
		if i%100 == 0 {
			n = bucketMaxPostings + 1 + i%7
		}
		if i%250 == 0 {
			n = bucketMaxPostings
		}
		for j := range n {
			c := int64((i*7919 + j*104729) % 100000) // unsorted, distinct per term
			lists.of(term).add(c, int32(j+1))
			want[term] = append(want[term], c)
		}
	}
	lists.of("empty")
	rows, total := segmentRows(lists)
	got := map[string][]int64{}
	var sum int64
	for i, r := range rows {
		if i > 0 && rows[i-1].key >= r.key {
			t.Fatalf("row %d key %q after %q", i, r.key, rows[i-1].key)
		}
		n := len(r.list.chunks)
		sum += int64(n)
		if len(r.list.tfs) != n {
			t.Fatalf("row %q: %d chunks, %d tfs", r.key, n, len(r.list.tfs))
		}
		if r.runs == nil {
			if n <= bucketMaxPostings || !slices.IsSorted(r.list.chunks) {
				t.Fatalf("term row %q: %d postings, sorted %v", r.key, n, slices.IsSorted(r.list.chunks))
			}
			got[r.key] = r.list.chunks
			continue
		}
		if !strings.HasPrefix(r.key, "#") || slices.Contains(analysis.Tokenize(r.key), r.key) {
			t.Fatalf("bucket row key %q", r.key)
		}
		lo := 0
		for k, run := range r.runs {
			term := string(run.term)
			if bucketKey(term) != r.key {
				t.Fatalf("term %q in bucket %q, want %q", term, r.key, bucketKey(term))
			}
			chunks := r.list.chunks[lo : lo+run.n]
			if k > 0 && string(r.runs[k-1].term) >= term || !slices.IsSorted(chunks) {
				t.Fatalf("bucket %q out of order at run %d", r.key, k)
			}
			got[term] = append(got[term], chunks...)
			lo += run.n
		}
		if lo != n {
			t.Fatalf("bucket row %q: runs of %d postings, %d in the row", r.key, lo, n)
		}
	}
	if sum != total || len(got) != len(want) {
		t.Fatalf("%d postings of %d terms in rows, total %d; want %d terms", sum, len(got), total, len(want))
	}
	for term, chunks := range want {
		slices.Sort(chunks)
		if !slices.Equal(got[term], chunks) || len(chunks) > bucketMaxPostings && rowOf(rows, term) < 0 {
			t.Fatalf("term %q: postings %v, want %v", term, got[term], chunks)
		}
	}
	if len(rows) > len(want)/10+postingBuckets {
		t.Errorf("%d rows for %d terms, most of them rare", len(rows), len(want))
	}
}

func rowOf(rows []segmentRow, key string) int {
	for i, r := range rows {
		if r.key == key {
			return i
		}
	}
	return -1
}

// TestPostingsRowsStream reads a whole COPY stream in small reads and
// checks its header, rows and trailer.
func TestPostingsRowsStream(t *testing.T) {
	lists := postingLists{}
	for i := range 3000 {
		term := fmt.Sprintf("term%04d", i)
		for j := range 1 + i%13 {
			lists.of(term).add(int64(i*10+j), int32(j+1))
		}
	}
	rows, _ := segmentRows(lists)
	got, err := io.ReadAll(iotest.OneByteReader(newPostingsRows(rows, 4)))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(copyHeader)
	for _, r := range rows {
		want = appendPostingsRow(want, r, 4)
	}
	want = append(want, 0xff, 0xff)
	if !bytes.Equal(got, want) {
		t.Fatalf("stream of %d bytes, want %d", len(got), len(want))
	}
	if !bytes.HasPrefix(got, []byte("PGCOPY\n\xff\r\n\x00")) {
		t.Fatalf("stream starts %q", got[:11])
	}
}

// FuzzPostingsArrays: the array decoders never panic on arbitrary bytes,
// and a bucket row's arrays decode to what was encoded.
func FuzzPostingsArrays(f *testing.F) {
	f.Add([]byte("wire\x00hold\x00\x00x"), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 'a'})
	f.Fuzz(func(t *testing.T, termBytes, raw []byte) {
		_, _ = appendTextArray(nil, raw)
		_, _ = appendInt8Array(nil, raw)
		_, _ = appendInt4Array(nil, raw)
		terms := strings.Split(string(termBytes), "\x00")
		p := &postingList{}
		for i := range terms {
			p.add(int64(i)*-7919, int32(i))
		}
		rawChunks, rawTfs, rawTerms := arrayFields(p, terms)
		var chunks []int64
		var tfs []int32
		if err := decodePostings(&chunks, &tfs, rawChunks, rawTfs); err != nil || !slices.Equal(chunks, p.chunks) || !slices.Equal(tfs, p.tfs) {
			t.Fatalf("postings decoded to %v %v (err %v)", chunks, tfs, err)
		}
		got, err := appendTextArray(nil, rawTerms)
		if err != nil || !slices.EqualFunc(got, terms, func(a []byte, b string) bool { return string(a) == b }) {
			t.Fatalf("terms decoded to %q, want %q (err %v)", got, terms, err)
		}
	})
}

// TestSortPostings: lists made of sorted runs in any order (as merges
// make them), of up to maxMergedRuns runs and beyond, and unsorted ones,
// come out ordered by chunk id with each tf still beside its chunk.
func TestSortPostings(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 500 {
		runs := rng.IntN(maxMergedRuns + 20)
		ids := rng.Perm(2000)[:rng.IntN(2000)]
		p := &postingList{}
		if trial%10 == 9 {
			for _, id := range ids { // no order at all
				p.add(int64(id), int32(id%97+1))
			}
		} else {
			// Cut ids into runs, sort each, and lay the runs out shuffled.
			cuts := []int{0, len(ids)}
			for range runs {
				cuts = append(cuts, rng.IntN(len(ids)+1))
			}
			slices.Sort(cuts)
			var parts [][]int
			for i := 1; i < len(cuts); i++ {
				part := slices.Clone(ids[cuts[i-1]:cuts[i]])
				slices.Sort(part)
				parts = append(parts, part)
			}
			rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
			for _, part := range parts {
				for _, id := range part {
					p.add(int64(id), int32(id%97+1))
				}
			}
		}
		sortPostings(p)
		want := slices.Clone(ids)
		slices.Sort(want)
		if len(p.chunks) != len(want) || len(p.tfs) != len(want) {
			t.Fatalf("trial %d: %d chunks, %d tfs, want %d", trial, len(p.chunks), len(p.tfs), len(want))
		}
		for i, id := range want {
			if p.chunks[i] != int64(id) || p.tfs[i] != int32(id%97+1) {
				t.Fatalf("trial %d: position %d holds chunk %d tf %d, want chunk %d tf %d", trial, i, p.chunks[i], p.tfs[i], id, id%97+1)
			}
		}
	}
}

// BenchmarkSortPostings: a merge of eight segments whose chunk ids
// interleave, by merging the runs and by sorting outright.
func BenchmarkSortPostings(b *testing.B) {
	base := &postingList{}
	for r := range 8 {
		for i := range 5000 {
			base.add(int64(i*8+(r+3)%8), 1)
		}
	}
	for _, c := range []struct {
		name string
		sort func(*postingList)
	}{{"runs", sortPostings}, {"full", sortPostingsFully}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.sort(&postingList{chunks: slices.Clone(base.chunks), tfs: slices.Clone(base.tfs)})
			}
		})
	}
}

// arrayFields encodes a postings row as the rows written before packed
// postings hold it: chunks and tfs as binary int8[] and int4[], and terms
// (nil for a term row) as a binary text[].
func arrayFields(p *postingList, terms []string) (chunks, tfs, termsField []byte) {
	n := len(p.chunks)
	chunks = appendArrayHeader(nil, oidInt8, n)
	for _, c := range p.chunks {
		chunks = binary.BigEndian.AppendUint32(chunks, 8)
		chunks = binary.BigEndian.AppendUint64(chunks, uint64(c))
	}
	tfs = appendArrayHeader(nil, oidInt4, n)
	for _, tf := range p.tfs {
		tfs = binary.BigEndian.AppendUint32(tfs, 4)
		tfs = binary.BigEndian.AppendUint32(tfs, uint32(tf))
	}
	if terms == nil {
		return chunks, tfs, nil
	}
	termsField = appendArrayHeader(nil, oidText, len(terms))
	for _, t := range terms {
		termsField = binary.BigEndian.AppendUint32(termsField, uint32(len(t)))
		termsField = append(termsField, t...)
	}
	return chunks, tfs, termsField
}

// appendArrayHeader appends the binary header of a one-dimensional array
// without nulls of n elements of type elem, starting at index 1.
func appendArrayHeader(b []byte, elem uint32, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, 1) // dimensions
	b = binary.BigEndian.AppendUint32(b, 0) // no nulls
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return binary.BigEndian.AppendUint32(b, 1) // lower bound
}

// BenchmarkSegmentRows: laying out one write's postings as a segment's
// rows, for a vocabulary of mostly rare terms (a Zipf-like spread of list
// lengths, as a batch of prose gives).
func BenchmarkSegmentRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 8))
	base := postingLists{}
	for i := range 30000 {
		term := fmt.Sprintf("t%05dx", i)
		n := 1 + int(2000/float64(i+1)) + rng.IntN(3)
		for c := range n {
			base.of(term).add(int64(c*7+i%7), int32(1+c%3))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		lists := make(postingLists, len(base))
		for t, p := range base {
			lists[t] = &postingList{chunks: slices.Clone(p.chunks), tfs: slices.Clone(p.tfs)}
		}
		b.StartTimer()
		segmentRows(lists)
	}
}
