package postgres

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"
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

// TestPostingsArrayCodec checks the binary array coding against a
// hand-written int8[] and int4[] and the errors on malformed input; the
// integration tests run it through PostgreSQL.
func TestPostingsArrayCodec(t *testing.T) {
	p := &postingList{chunks: []int64{1, 1 << 40, -3}, tfs: []int32{7, 1, 1 << 30}}
	row := appendPostingsRow(nil, "wire", 9, p)
	want := []byte{0, 5, // fields
		0, 0, 0, 4, 'w', 'i', 'r', 'e',
		0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9,
		0, 0, 0, 4, 0, 0, 0, 3,
		0, 0, 0, 56, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 1,
		0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 0,
		0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd,
		0, 0, 0, 44, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 3, 0, 0, 0, 1,
		0, 0, 0, 4, 0, 0, 0, 7,
		0, 0, 0, 4, 0, 0, 0, 1,
		0, 0, 0, 4, 0x40, 0, 0, 0,
	}
	if !slices.Equal(row, want) {
		t.Fatalf("row\n got %v\nwant %v", row, want)
	}
	chunksField := row[34 : 34+56] // after the field count, term, block, n and the length
	tfsField := row[34+56+4:]
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

// TestPostingsRowsStream reads a whole COPY stream in small reads and
// checks its header, rows and trailer.
func TestPostingsRowsStream(t *testing.T) {
	lists := postingLists{}
	var terms []string
	for i := range 3000 {
		term := fmt.Sprintf("term%04d", i)
		terms = append(terms, term)
		for j := range 1 + i%5 {
			lists.of(term).add(int64(i*10+j), int32(j+1))
		}
	}
	got, err := io.ReadAll(iotest.OneByteReader(newPostingsRows(terms, lists, 4)))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(copyHeader)
	for _, term := range terms {
		want = appendPostingsRow(want, term, 4, lists[term])
	}
	want = append(want, 0xff, 0xff)
	if !bytes.Equal(got, want) {
		t.Fatalf("stream of %d bytes, want %d", len(got), len(want))
	}
	if !bytes.HasPrefix(got, []byte("PGCOPY\n\xff\r\n\x00")) {
		t.Fatalf("stream starts %q", got[:11])
	}
}
