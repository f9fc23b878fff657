package memindex

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
)

// pruneMin is the fewest postings of its terms from which a lexical part
// dense in postings is ranked by lexicalPruned; tests lower it.
var pruneMin = 1 << 16

// pruned counts the parts lexicalPruned ranked (for tests).
var pruned atomic.Int64

// pruneMargin widens each term's bound on its contributions, so that
// rounding (about 1e-16 an operation) never lets a chunk pass the sum of
// bounds it was judged by.
const pruneMargin = 1 + 1e-9

// pruneTerm is one query term's span of postings in a part, as
// lexicalPruned and docPruned walk it.
type pruneTerm struct {
	slots []int32
	tfs   []uint8 // see postingList.tfs
	// big and base are the list's map of tfs beyond a byte and the index
	// in the list of the window's first posting.
	big     map[int32]int32
	base    int
	bits    []uint64 // the list's bitmap, if it keeps one
	c       int      // cursor: the first posting not yet passed
	wt, idf float64
	ub      float64 // bound on wt x the term's contribution to a chunk or document
	// has and v are whether the chunk (document) being scored holds the
	// term, and the term's contribution to it.
	has bool
	v   float64
	// below is, while a candidate is judged, the sum of the bounds of the
	// non-proposing terms that may hold it and come before t in ascending
	// bound order: what the rest may add once t is scored.
	below float64
}

// tf is the tf of the posting at the term's cursor.
func (t *pruneTerm) tf() int32 { return tfOf(t.tfs[t.c], t.big, t.base+t.c) }

// maxScore is MaxScore's state over one part's terms (in query order):
// byBound lists them by ascending bound, and byBound[:nonEss] are the terms
// whose bounds sum (below) under the top list's floor, which no longer
// propose candidates.
type maxScore struct {
	terms   []pruneTerm
	byBound []int
	nonEss  int
	below   float64
}

// newMaxScore orders terms by bound into buf (reused) and returns the state.
func newMaxScore(terms []pruneTerm, buf []int) maxScore {
	byBound := buf[:0]
	for j := range terms {
		byBound = append(byBound, j)
	}
	slices.SortStableFunc(byBound, func(a, b int) int { return cmp.Compare(terms[a].ub, terms[b].ub) })
	return maxScore{terms: terms, byBound: byBound}
}

// next is the smallest slot at a proposing term's cursor, math.MaxInt32
// when none is left.
func (m *maxScore) next() int32 {
	s := int32(math.MaxInt32)
	for _, j := range m.byBound[m.nonEss:] {
		if t := &m.terms[j]; t.c < len(t.slots) && t.slots[t.c] < s {
			s = t.slots[t.c]
		}
	}
	return s
}

// raise stops the terms whose bounds, with those stopped before, sum below
// floor from proposing.
func (m *maxScore) raise(floor float64) {
	for m.nonEss < len(m.byBound) && m.below+m.terms[m.byBound[m.nonEss]].ub < floor {
		m.below += m.terms[m.byBound[m.nonEss]].ub
		m.nonEss++
	}
}

// lexicalPruned ranks the slots of pt's range as lexical's accumulators do,
// scoring only the chunks that may enter the top list (MaxScore): the
// terms are ordered by the bound on their contributions (their lists' largest
// tf in their shortest chunk), and once the top list is full, the terms
// whose bounds sum below its floor (so that a chunk holding only those
// cannot enter it) no longer propose chunks. A chunk proposed by one of the
// other terms is scored whole, every term's contribution summed in
// query-term order as the accumulators sum it, so its score has the same
// bits. Every live chunk holding a term is still filtered and counted for
// the funnel (all contributions are positive, so every such chunk has a
// score above zero), from a bitmap of the range's postings counted a word
// at a time against the alive and visibility bitmaps (pruneCount). A
// proposed chunk is dropped first by its bounds (the proposing terms
// holding it, and the others unless their list's bitmap lacks it) or by
// its alive and visibility bits, before its length or any posting is
// read, then once the proposing terms' contributions are known, and
// while the others are read, by descending bound, as soon as what those
// left may add cannot lift it to the floor; only a chunk whose score
// reaches the floor is checked for freshness. It reports false, having
// done nothing, when some term's contribution may not be positive or
// fewer than two terms have postings in the range.
func (x *Index) lexicalPruned(req *retrieval.RankRequest, st scopeStats, w *worker, sc *scratch, pt *rankPart, spans []span, normOf func(int32) float64) bool {
	params := x.settings.BM25
	terms := w.prune[:0]
	for i, sp := range spans {
		if sp.p == nil || sp.start == sp.end {
			continue
		}
		idf, wt := st.lex[i], req.Weight(i)
		if !(wt*idf > 1e-200) {
			return false
		}
		p := sp.p
		ub := float64(wt * bm25.TermNorm(idf, int64(p.maxTF), normOf(p.minLen), params))
		terms = append(terms, pruneTerm{slots: p.slots[sp.start:sp.end], tfs: p.tfs[sp.start:sp.end], big: p.big(), base: sp.start, bits: p.bits(), wt: wt, idf: idf, ub: ub * pruneMargin})
	}
	w.prune = terms
	if len(terms) < 2 {
		return false
	}
	m := newMaxScore(terms, w.pruneBound)
	w.pruneBound = m.byBound
	pruned.Add(1)
	vis := sc.vis
	x.pruneCount(w, vis, pt, terms)

	// The chunks that may enter the top list, in slot order.
	alive, length := x.vis.alive, x.length
	f := &w.f
	asOf, fresh, now, maxStale := f.asOf, f.fresh, f.now, f.maxStale
	floor := pt.top.floor()
	for {
		s := m.next()
		if s == math.MaxInt32 {
			break
		}
		// Bounds first: the proposing terms holding s, and the others
		// unless their list's bitmap lacks s. Most chunks stop here, and
		// so does a chunk the principal may not see.
		bound, below := 0.0, 0.0
		for _, j := range m.byBound[m.nonEss:] {
			t := &terms[j]
			if t.has = t.c < len(t.slots) && t.slots[t.c] == s; t.has {
				bound += t.ub
			}
		}
		for _, j := range m.byBound[:m.nonEss] {
			t := &terms[j]
			if t.has = t.bits == nil || listHas(t.bits, s); t.has {
				t.below = below
				below += t.ub
			}
		}
		if bound+below < floor || !liveVisible(alive, vis.bits, s) {
			for _, j := range m.byBound[m.nonEss:] {
				if t := &terms[j]; t.has {
					t.c++
				}
			}
			continue
		}
		// Then the proposing terms' contributions: with the others'
		// bounds they bound the score.
		dl := length[s]
		partial := 0.0
		for _, j := range m.byBound[m.nonEss:] {
			if t := &terms[j]; t.has {
				t.v = float64(t.wt * bm25.TermNorm(t.idf, int64(t.tf()), normOf(dl), params))
				partial += t.v
				t.c++
			}
		}
		if partial*pruneMargin+below < floor {
			continue
		}
		// The others by descending bound, until what they may still add
		// cannot lift the chunk to the floor.
		short := false
		for i := m.nonEss - 1; i >= 0 && !short; i-- {
			t := &terms[m.byBound[i]]
			if !t.has {
				continue
			}
			t.c = gallop(t.slots, t.c, s)
			t.has = t.c < len(t.slots) && t.slots[t.c] == s
			if t.has {
				t.v = float64(t.wt * bm25.TermNorm(t.idf, int64(t.tf()), normOf(dl), params))
				partial += t.v
			}
			short = partial*pruneMargin+t.below < floor
		}
		if short {
			continue
		}
		score := 0.0
		for j := range terms {
			if t := &terms[j]; t.has {
				score += t.v
			}
		}
		if score < floor {
			continue
		}
		if fresh && now-asOf[s] > maxStale {
			continue
		}
		pt.top.offer(s, score)
		if fl := pt.top.floor(); fl != floor {
			floor = fl
			m.raise(floor)
		}
	}
	return true
}

// gallop returns the first index at or after c of slots (sorted) whose
// slot is s or more.
func gallop(slots []int32, c int, s int32) int {
	if c >= len(slots) || slots[c] >= s {
		return c
	}
	lo, step := c, 1 // slots[lo] < s
	for lo+step < len(slots) && slots[lo+step] < s {
		lo += step
		step *= 2
	}
	hi := min(lo+step, len(slots))
	k, _ := slices.BinarySearch(slots[lo+1:hi], s)
	return lo + 1 + k
}

// pruneCount filters and counts, for pt's funnel, every live chunk of pt's
// range holding one of terms (all of them score above zero): their slots
// are set in a bitmap of the range, counted a word at a time against the
// alive bitmap and vis.
func (x *Index) pruneCount(w *worker, vis *visMask, pt *rankPart, terms []pruneTerm) {
	base := int(pt.lo >> 6)
	words := (int(pt.hi)+63)>>6 - base
	if cap(w.union) < words {
		w.union = make([]uint64, words)
	}
	union := w.union[:words]
	for j := range terms {
		t := &terms[j]
		if t.bits == nil {
			for _, s := range t.slots {
				union[int(s>>6)-base] |= 1 << (uint(s) & 63)
			}
			continue
		}
		// The list's words over the range, then the first and last words
		// cut to the range (their other bits are other parts' slots).
		if base < len(t.bits) {
			for k, b := range t.bits[base:min(base+words, len(t.bits))] {
				union[k] |= b
			}
		}
	}
	union[0] &= ^uint64(0) << (uint(pt.lo) & 63)
	if r := uint(pt.hi) & 63; r != 0 {
		union[words-1] &= 1<<r - 1
	}
	x.countUnion(&w.f, vis, union, base, pt)
}
