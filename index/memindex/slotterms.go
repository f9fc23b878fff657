package memindex

import (
	"encoding/binary"
	"slices"
)

// slotTerms holds each slot's distinct term ids (the ids of their posting
// lists), which a removal and a compaction read: sorted, each as a uvarint
// of its difference from the one before (the first as itself), in one
// array for all slots. A chunk of the bench corpus holds about 190 distinct
// terms (words, stems and field terms) among about 10^5, so an id takes two
// bytes instead of an int32's four, and a slot holds one offset instead of
// a slice. A removed slot's ids stay until a compaction rebuilds the index.
type slotTerms struct {
	data []byte
	// end[s] is where slot s's ids end in data; they start at end[s-1]
	// (at 0 for slot 0).
	end []int64
}

// add appends the ids of the next slot, sorting ids in place.
func (t *slotTerms) add(ids []int32) {
	slices.Sort(ids)
	t.data = appendDeltas(t.data, ids)
	t.end = append(t.end, int64(len(t.data)))
}

// appendDeltas appends the encoding of sorted ids to dst.
func appendDeltas(dst []byte, ids []int32) []byte {
	prev := int32(0)
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id-prev))
		prev = id
	}
	return dst
}

// appendIDs appends slot s's ids, ascending, to dst.
func (t *slotTerms) appendIDs(dst []int32, s int32) []int32 {
	start := int64(0)
	if s > 0 {
		start = t.end[s-1]
	}
	b := t.data[start:t.end[s]]
	id := int32(0)
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		id += int32(d)
		dst = append(dst, id)
		b = b[n:]
	}
	return dst
}

// bytes is what the ids hold, at their capacities.
func (t *slotTerms) bytes() int64 {
	return allocSize(int64(cap(t.data))) + allocSize(8*int64(cap(t.end)))
}

// build sets the ids of every slot from ids[s], sorting each in place, in
// parts goroutines (run runs fn(k) for each part k at once; bound(k) is
// part k's first slot).
func (t *slotTerms) build(ids [][]int32, parts int, bound func(int) int, run func(fn func(k int))) {
	data := make([][]byte, parts)
	t.end = make([]int64, len(ids))
	run(func(k int) {
		var b []byte
		for s := bound(k); s < bound(k+1); s++ {
			slices.Sort(ids[s])
			b = appendDeltas(b, ids[s])
			t.end[s] = int64(len(b))
		}
		data[k] = b
	})
	n := 0
	for _, b := range data {
		n += len(b)
	}
	t.data = make([]byte, 0, n)
	for k, b := range data {
		base := int64(len(t.data))
		for s := bound(k); s < bound(k+1); s++ {
			t.end[s] += base
		}
		t.data = append(t.data, b...)
	}
}
