package memindex

import (
	"unsafe"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// An index counts the memory it holds as it changes, so that a cache can
// charge a budget what the index really takes (Bytes) rather than a guess
// per chunk: a tenant of long unique tokens holds a dictionary entry per
// term (the string, its posting list's header, a map entry) that a charge
// per chunk misses by a factor of four. Everything is counted as the
// allocator sizes it (size classes, see allocSize), at the capacity a
// slice holds, and maps at their most entries so far (a Go map does not
// shrink). Strings are counted as the index's own, as a cache's load
// allocates them (shared strings, such as those of index.Prepare, are
// counted more than once: an upper bound).
//
// What is counted where:
//
//   - the per-slot and per-document arrays, from their capacities, in
//     Bytes, with one query's scratch over them and the alive bitmap and
//     visMasksMax principals' bitmaps, whether or not any principal has
//     queried yet (queries add them without a write);
//   - the maps, from the most entries each has held (acct's highs);
//   - everything else in acct.held, kept in step by every change: a
//     chunk's strings and term ids (addSlot, add, Remove), a document's
//     entry (addDoc, Remove), a posting list's header, term and postings
//     (add, Remove, and the Builder's arrays in buildPostings), a long
//     list's bitmap and label counts, barrier sets.

// accounting is what an index counts of its memory beside its slices'
// capacities (see Bytes).
type accounting struct {
	held int64
	// The most entries postings, docs, docTF and sectionIDs have held:
	// what their maps keep allocated.
	terms, docs, docTF, sections, odd int
	// termsMap is what a Builder's postings map, made for its size,
	// holds.
	termsMap int64
}

// Go's sizes of the index's elements.
const (
	chunkSize     = int64(unsafe.Sizeof(cordontype.Chunk{}))
	slotChunkSize = int64(unsafe.Sizeof(slotChunk{}))
	listSize      = int64(unsafe.Sizeof(postingList{}))
	extSize       = int64(unsafe.Sizeof(listExt{}))
	statsSize     = int64(unsafe.Sizeof(labelStats{}))
	stringSize    = int64(unsafe.Sizeof(""))
	sliceSize     = int64(unsafe.Sizeof([]int32(nil)))
	pointerSize   = int64(unsafe.Sizeof((*int)(nil)))
)

// Map slot sizes (key and element, aligned) of the index's maps.
const (
	postingsSlot = stringSize + pointerSize // map[string]*postingList
	docsSlot     = stringSize + sliceSize   // map[string][]int32
	docTFSlot    = 8 + 8                    // map[int32]int64
	overflowSlot = 8 + sliceSize            // map[int32][]int32
	oddSlot      = 8 + pointerSize          // map[int32]*cordontype.Chunk
	sectionsSlot = stringSize + 8           // map[string]int32
	setIDsSlot   = stringSize + 8           // map[string]int32
	labelsSlot   = 8 + pointerSize          // map[labelSet]*labelStats
	labelMapSlot = 8 + 8                    // map[labelSet]int64
	// labelMaps is what a long list's two maps of label-set counts
	// hold: a map of one group each (a tenant has a few label sets).
	labelMaps = 2 * (48 + 8 + 8*labelMapSlot)
)

// sizeClasses are the Go allocator's size classes up to 32 KiB
// (internal/runtime/gc.SizeClassToSize, Go 1.26).
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
	352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072,
	3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384,
	18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is the heap an allocation of n bytes takes: below 16 bytes
// about n (the tiny allocator packs such strings and int32 slices), up to
// 32 KiB its size class, beyond that whole 8 KiB pages.
func allocSize(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n < 16:
		return n
	case n > sizeClasses[len(sizeClasses)-1]:
		return (n + 8191) &^ 8191
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if sizeClasses[m] < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return sizeClasses[lo]
}

func strBytes(s string) int64 { return allocSize(int64(len(s))) }

// mapBytes estimates a Go map of n entries of slot bytes each: a slot and
// its control byte per entry, tables kept between 7/16 and 7/8 full (2/3
// on average).
func mapBytes(n int, slot int64) int64 { return int64(n) * (slot + 1) * 3 / 2 }

// mapMadeBytes is a Go map made for n entries of slot bytes each: its
// slots, a power of two holding n at most 7/8 full, and their control
// bytes.
func mapMadeBytes(n int, slot int64) int64 {
	slots := int64(8)
	for slots*7/8 < int64(n) {
		slots *= 2
	}
	return slots * (slot + 1)
}

// Bytes is the memory the index holds, by its own count: its arrays at
// their capacities, its maps, strings, posting lists and bitmaps, and what
// one query allocates over it (its scratch and, for up to visMasksMax
// principals, their visibility bitmaps). It does not scan the index: a
// change is counted as it is made. The caller holds the index exclusively.
func (x *Index) Bytes() int64 {
	n := x.acct.held
	n += allocSize(int64(cap(x.slotChunks))*slotChunkSize) + allocSize(stringSize*int64(cap(x.sections))) + allocSize(int64(cap(x.alive))) + allocSize(int64(cap(x.class))) +
		allocSize(4*int64(cap(x.barrier))) + allocSize(8*int64(cap(x.asOf))) + allocSize(4*int64(cap(x.length))) +
		allocSize(8*int64(cap(x.normSq))) + allocSize(8*int64(cap(x.norm))) + x.terms.bytes() + allocSize(4*int64(cap(x.idBuf))) +
		allocSize(4*int64(cap(x.docOf))) + allocSize(stringSize*int64(cap(x.docNames))) + allocSize(8*int64(cap(x.docLen))) +
		allocSize(pointerSize*int64(cap(x.lists))) + allocSize(sliceSize*int64(cap(x.sets))) + allocSize(sliceSize*int64(cap(x.cols)))
	for _, c := range x.cols {
		n += allocSize(int64(cap(c)))
	}
	n += (1 + visMasksMax) * allocSize(8*int64(len(x.slotChunks)+63)/64)
	// One query's scratch: lexical accumulators by slot, document sums
	// by document number.
	n += 9*int64(len(x.slotChunks)) + 9*int64(len(x.docNames))
	n += max(x.acct.termsMap, mapBytes(x.acct.terms, postingsSlot)) + mapBytes(x.acct.docs, docsSlot) + mapBytes(x.acct.docTF, docTFSlot) +
		mapBytes(len(x.overflow), overflowSlot) + mapBytes(x.acct.sections, sectionsSlot) + mapBytes(x.acct.odd, oddSlot) + mapBytes(len(x.setIDs), setIDsSlot) +
		mapBytes(len(x.labels), labelsSlot) + int64(len(x.labels))*allocSize(statsSize)
	return n
}

// SlotBytes is what a chunk of dims dimensions and terms distinct terms
// adds to an index built whole (a Builder's), but for its strings
// (ChunkBytes) and its new terms' dictionary entries (TermBytes): its
// entry in every per-slot array, its bits, its share of a query's scratch,
// its term ids and its postings.
func SlotBytes(dims, terms int) int64 {
	perSlot := slotChunkSize + 1 + 1 + 4 + 8 + 4 + 8 + 8 + 8 + 4 + int64(dims)
	bits := int64(1+visMasksMax+7) / 8
	// A term id takes at least a byte (slotTerms), a posting five.
	return perSlot + bits + 9 + int64(terms) + 5*int64(terms)
}

// ChunkBytes is SlotBytes for pc with its strings: its text and, at most,
// its section's name (see slotChunk). A text given packed (PackText, as a
// cache's load gives it) counts what the slot keeps; a text as
// index.Prepare gives it counts more than that (the slot packs it).
func ChunkBytes(dims int, pc *index.PreparedChunk) int64 {
	c := &pc.Chunk
	// A term id takes about two bytes (see slotTerms).
	n := SlotBytes(dims, len(pc.TF)) + int64(len(pc.TF)) + strBytes(c.Section) + strBytes(c.Text)
	for _, tf := range pc.TF {
		if tf >= tfEscape {
			n += bigBytes(1) // a list's map of one (more hold less each)
		}
	}
	return n + labelsBytes(c.Barriers)
}

// TermBytes is what a term of n bytes new to an index adds to its
// dictionary: its string, its posting list's header and its entries in the
// map and the list of posting lists.
func TermBytes(n int) int64 {
	return allocSize(int64(n)) + allocSize(listSize) + mapBytes(1, postingsSlot) + pointerSize
}

// DocBytes is what a document of chunks chunks adds beside its chunks.
func DocBytes(docID string, chunks int) int64 {
	return mapBytes(1, docsSlot) + strBytes(docID) + allocSize(4*int64(chunks)) + stringSize + 8 + 4 + 9
}

// NewTermBytes is the sum of TermBytes over the terms of prepared (named,
// as for Put) that x does not hold, each counted once.
func (x *Index) NewTermBytes(prepared []index.PreparedChunk) int64 {
	var n int64
	var seen map[string]bool
	for i := range prepared {
		for _, t := range prepared[i].Terms {
			if x.postings[t] != nil || seen[t] {
				continue
			}
			if len(prepared) > 1 {
				if seen == nil {
					seen = make(map[string]bool)
				}
				seen[t] = true
			}
			n += TermBytes(len(t))
		}
	}
	return n
}

func labelsBytes(labels []string) int64 {
	n := allocSize(stringSize * int64(cap(labels)))
	for _, l := range labels {
		n += strBytes(l)
	}
	return n
}

// chunkHeld is what a chunk's strings hold beside its slot.
func chunkHeld(c *cordontype.Chunk) int64 {
	return strBytes(c.ChunkID) + strBytes(c.DocID) + strBytes(c.Section) + strBytes(c.Text) + labelsBytes(c.Barriers)
}

// postingsBytes is what a list's own slots and tfs of capacities slots
// and tfs hold.
func postingsBytes(slots, tfs int) int64 { return allocSize(4*int64(slots)) + allocSize(int64(tfs)) }

// bigBytes is what a list's map of n tfs beyond a byte holds (see
// listExt.big): its header and entries.
func bigBytes(n int) int64 {
	if n == 0 {
		return 0
	}
	return allocSize(48) + mapBytes(n, 4+4)
}

// listHeld is what a posting list holds beside its map entry: its term,
// header, postings and extension (bitmap, label counts, large tfs), less
// what a Builder's arrays hold for it (counted with the arrays).
func (p *postingList) listHeld() int64 {
	n := strBytes(p.term)
	if !p.built {
		n += allocSize(listSize)
	}
	if !p.windows {
		n += postingsBytes(cap(p.slots), cap(p.tfs))
	}
	if e := p.ext; e != nil {
		n += extBytes + allocSize(8*int64(cap(e.bits))) + bigBytes(len(e.big))
		if e.byLabel != nil {
			n += labelMaps
		}
	}
	return n
}

// extBytes is what a list's extension (listExt) takes beside its parts.
var extBytes = allocSize(extSize)
