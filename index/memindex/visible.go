package memindex

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// visMasksMax is how many principals' visibility bitmaps an index keeps
// (about one bit a chunk each); the least recently used goes first.
const visMasksMax = 8

// visComputed counts the visibility bitmaps computed, of every index (for
// tests).
var visComputed atomic.Int64

// visMask is one principal's entitlement over every slot, one bit a slot:
// bit s is set when the principal may see slot s, live or dead
// (classification and barriers; freshness is per query and not in it; the
// alive bitmap tells the dead). A new slot's bit is set as it is added
// (see maskAdd), so a principal's mask is computed once, not per query.
type visMask struct {
	key       string
	clearance int8
	barriers  []string
	bits      []uint64
}

// visMasks are an index's alive bitmap and its principals' visibility
// bitmaps. The bitmaps are read by concurrent queries and changed only by
// writes, which hold the index alone; mu orders the queries that look a
// principal's mask up or compute it.
type visMasks struct {
	mu    sync.Mutex
	alive []uint64 // bit s: slot s is alive
	masks []*visMask
}

// setBit sets or clears bit s of b, growing b as needed.
func setBit(b []uint64, s int32, on bool) []uint64 {
	w := int(s >> 6)
	if w >= len(b) {
		b = append(b, make([]uint64, w+1-len(b))...)
	}
	if on {
		b[w] |= 1 << (uint(s) & 63)
	} else {
		b[w] &^= 1 << (uint(s) & 63)
	}
	return b
}

// hasBit reports whether bit s of b is set.
func hasBit(b []uint64, s int32) bool { return b[s>>6]>>(uint(s)&63)&1 != 0 }

// liveVisible reports whether slot s is alive (alive, the alive bitmap)
// and visible (vis, a principal's bitmap).
func liveVisible(alive, vis []uint64, s int32) bool {
	return (alive[s>>6]&vis[s>>6])>>(uint(s)&63)&1 != 0
}

// listHas reports whether a posting list's bitmap b, which ends at the
// list's last slot's word, has slot s.
func listHas(b []uint64, s int32) bool {
	w := int(s >> 6)
	return w < len(b) && b[w]>>(uint(s)&63)&1 != 0
}

// listHasAny reports whether a posting list's bitmap b has a slot in
// [lo, hi).
func listHasAny(b []uint64, lo, hi int32) bool {
	for s := lo; s < hi; {
		w := int(s >> 6)
		if w >= len(b) {
			return false
		}
		word := b[w] >> (uint(s) & 63)
		if n := min(64-(s&63), hi-s); n < 64 {
			word &= 1<<uint(n) - 1
		}
		if word != 0 {
			return true
		}
		s = int32(w+1) << 6
	}
	return false
}

// maskAdd records the new live slot s in every bitmap.
func (x *Index) maskAdd(s int32) {
	m := &x.vis
	m.alive = setBit(m.alive, s, true)
	for _, v := range m.masks {
		v.bits = setBit(v.bits, s, x.class[s] <= v.clearance && retrieval.Subset(x.sets[x.barrier[s]], v.barriers))
	}
}

// maskRemove records that slot s is dead.
func (x *Index) maskRemove(s int32) { x.vis.alive = setBit(x.vis.alive, s, false) }

// visKey names a principal's entitlement: its clearance and its barrier
// labels, in its order (the filter's), each prefixed with its length.
func visKey(p cordontype.Principal) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(p.Clearance)))
	for _, l := range p.Barriers {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(l)))
		b.WriteByte(':')
		b.WriteString(l)
	}
	return b.String()
}

// visible returns f's principal's mask, computing it on first use.
func (x *Index) visible(f *filter) *visMask {
	key := visKey(cordontype.Principal{Clearance: cordontype.Classification(f.clearance), Barriers: f.principal})
	m := &x.vis
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, v := range m.masks {
		if v.key == key {
			// Most recently used first.
			copy(m.masks[1:i+1], m.masks[:i])
			m.masks[0] = v
			return v
		}
	}
	visComputed.Add(1)
	n := len(x.slotChunks)
	v := &visMask{key: key, clearance: f.clearance, barriers: slices.Clone(f.principal), bits: make([]uint64, (n+63)>>6)}
	// Each barrier set's verdict first (an index has few sets), then one
	// pass over the slots without a branch on their labels.
	setOK := make([]uint64, len(x.sets))
	for set, labels := range x.sets {
		setOK[set] = uint64(b2i(retrieval.Subset(labels, v.barriers)))
	}
	class, barrier := x.class[:n], x.barrier[:n]
	for w := range v.bits {
		lo := w << 6
		cs, bs := class[lo:min(lo+64, n)], barrier[lo:min(lo+64, n)]
		bs = bs[:len(cs)]
		var word uint64
		for b, c := range cs {
			word |= (uint64(b2i(c <= v.clearance)) & setOK[bs[b]]) << b
		}
		v.bits[w] = word
	}
	if len(m.masks) == visMasksMax {
		m.masks = m.masks[:visMasksMax-1]
	}
	m.masks = slices.Insert(m.masks, 0, v)
	return v
}

// countUnion counts, for pt's funnel, the live slots whose bits are set in
// union (bit s-base<<6 for slot s, base the first word of pt's range): each
// is considered, hidden unless vis has it, else outdated when older than
// f's freshness contract. It clears union.
func (x *Index) countUnion(f *filter, vis *visMask, union []uint64, base int, pt *rankPart) {
	alive, asOf := x.vis.alive, x.asOf
	fresh, now, maxStale := f.fresh, f.now, f.maxStale
	considered, hidden, outdated := 0, 0, 0
	for k, u := range union {
		if u == 0 {
			continue
		}
		union[k] = 0
		g := base + k
		a := u & alive[g]
		v := a & vis.bits[g]
		considered += bits.OnesCount64(a)
		hidden += bits.OnesCount64(a &^ v)
		if !fresh {
			continue
		}
		for ; v != 0; v &= v - 1 {
			s := g<<6 + bits.TrailingZeros64(v)
			outdated += b2i(now-asOf[s] > maxStale)
		}
	}
	pt.considered += considered
	pt.hidden += hidden
	pt.outdated += outdated
}

// listBitsMin is the fewest postings from which a posting list keeps a
// bitmap of its slots, when it also holds one slot in listBitsShare or more:
// the bitmap then costs at most a quarter of the list's own 8 bytes a
// posting. Tests lower it.
var listBitsMin = 4096

const listBitsShare = 16

// wantBits reports whether a list of n postings keeps a bitmap.
func (x *Index) wantBits(n int) bool {
	return n >= listBitsMin && n*listBitsShare >= len(x.slotChunks)
}

// buildBits sets p's bitmap from its slots (the caller counts p's
// extension if it adds one).
func (p *postingList) buildBits() {
	bits := make([]uint64, int(p.slots[len(p.slots)-1])>>6+1)
	for _, s := range p.slots {
		bits[s>>6] |= 1 << (uint(s) & 63)
	}
	p.more().bits = bits
}
