package memindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// TestSlotChunkRoundTrip: every chunk an index holds comes back from chunk
// exactly as it was put, its text through packing, whether its id is index.Prepare's (document id,
// "::", ordinal) and kept as an ordinal or not and kept whole (odd), and
// slot ids compare as the ids themselves do, also after removals and a
// compaction.
func TestSlotChunkRoundTrip(t *testing.T) {
	old := compactMinDead
	compactMinDead = 1
	t.Cleanup(func() { compactMinDead = old })
	s := index.DefaultSettings()
	r := rand.New(rand.NewPCG(3, 4))
	// Document ids that are prefixes of each other and of their chunks'
	// ids, and ids around the ordinal's form.
	docIDs := []string{"a", "a:", "a::", "a::1", "a:b", "b", "doc-7", "Zürich", "z"}
	ids := func(doc string, i int) []string {
		return []string{
			fmt.Sprintf("%s::%d", doc, i),    // Prepare's form
			fmt.Sprintf("%s::0%d", doc, i),   // a leading zero
			fmt.Sprintf("%s:%d", doc, i),     // one colon
			fmt.Sprintf("%s::-%d", doc, i+1), // negative
			fmt.Sprintf("%s::%d", doc, int64(math.MaxInt32)+int64(i)+1),
			fmt.Sprintf("other::%d", i),
		}
	}
	// Texts as a slot keeps them, packed: empty, short, repetitive, not
	// Latin, and longer than S2's 64 KiB blocks.
	texts := []string{"", "x", strings.Repeat("ledger hold ", 3), "Zürich naïve 東京 ledger", strings.Repeat("wire release ", 7000)}
	x := New(s)
	want := map[string][]cordontype.Chunk{}
	put := func(doc string) {
		n := 1 + r.IntN(4)
		var pcs []index.PreparedChunk
		for i := range n {
			id := fmt.Sprintf("%s::%d", doc, i)
			if r.IntN(3) == 0 {
				cands := ids(doc, i)
				id = cands[r.IntN(len(cands))]
			}
			c := cordontype.Chunk{ChunkID: id, DocID: doc, Tenant: "t", Section: []string{"", "Intro", "Risk > Limits"}[r.IntN(3)],
				Text: texts[r.IntN(len(texts))], StartChar: r.IntN(1000), EndChar: 1000 + r.IntN(1000), Length: 2 + r.IntN(5),
				Classification: cordontype.Classification(r.IntN(4)), Barriers: [][]string{{}, {"deal-a"}, {"deal-a", "mna"}}[r.IntN(3)], AsOfTick: r.Int64N(100)}
			switch r.IntN(12) {
			case 0:
				c.Tenant = "u" // not the index's tenant
			case 1:
				c.EndChar = math.MaxInt32 + 5 // beyond an int32
			}
			pcs = append(pcs, index.PreparedChunk{Chunk: c, Terms: []string{"ledger", "hold"}, TF: []int32{1, 1}, Vector: make([]int32, s.Dims)})
		}
		x.Put(doc, pcs)
		want[doc] = nil
		for _, pc := range pcs {
			want[doc] = append(want[doc], pc.Chunk)
		}
	}
	for range 200 {
		put(docIDs[r.IntN(len(docIDs))])
		// Every live slot's chunk is the one put.
		var live []int32
		for doc, slots := range x.docs {
			for i, s := range slots {
				if got := x.chunk(s); !reflect.DeepEqual(got, want[doc][i]) {
					t.Fatalf("slot %d: got %+v, want %+v", s, got, want[doc][i])
				}
				live = append(live, s)
			}
		}
		for range 50 {
			a, b := live[r.IntN(len(live))], live[r.IntN(len(live))]
			if got, want := x.chunkIDAfter(a, b), x.chunk(a).ChunkID > x.chunk(b).ChunkID; got != want {
				t.Fatalf("%q after %q: got %t, want %t", x.chunk(a).ChunkID, x.chunk(b).ChunkID, got, want)
			}
		}
	}
	if x.compactions == 0 || len(x.odd) == 0 {
		t.Fatalf("%d compactions, %d odd chunks: the test exercised too little", x.compactions, len(x.odd))
	}
}

// TestHeaderSizes: the records an index holds once per term and once per
// chunk keep their sizes (a real corpus holds about ten posting lists a
// chunk, most of them of one posting, so a field added to a list's header
// costs every tenant that much memory per list): a new field must earn
// its bytes and move this bound with a measurement.
func TestHeaderSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"postingList", unsafe.Sizeof(postingList{}), 112},
		{"slotChunk", unsafe.Sizeof(slotChunk{}), 40},
	} {
		if c.size > c.max {
			t.Errorf("%s takes %d bytes, more than %d", c.name, c.size, c.max)
		}
	}
	if allocSize(listSize) != 112 {
		t.Errorf("a posting list's header is allocated %d bytes, want 112", allocSize(listSize))
	}
}
