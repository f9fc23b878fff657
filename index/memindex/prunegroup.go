package memindex

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
)

// combinedPrunedRuns counts the parts lexicalCombinedPruned ranked (for
// tests).
var combinedPrunedRuns atomic.Int64

// pruneGroup is one combined term's group (SPEC section 4, "Combined
// terms") as lexicalCombinedPruned walks it: its members' spans in member
// order (a member's wt is its coefficient), which of them are field
// members, and the group's weight, idf and bound.
type pruneGroup struct {
	members []pruneTerm
	field   []bool
	wt, idf float64
	ub      float64 // bound on the group's contribution to a chunk
	has     bool
	v       float64
	// head is the smallest slot at one of the members' cursors,
	// math.MaxInt32 when none is left: kept while the group proposes, so
	// that finding the next candidate and the groups holding it reads one
	// value a group instead of every member's cursor.
	head int32
	// below is, while a candidate is judged, the sum of the bounds of the
	// non-proposing groups that may hold it and come before g in ascending
	// bound order: what the rest may add once g is scored.
	below float64
}

// setHead sets g.head from its members' cursors.
func (g *pruneGroup) setHead() {
	h := int32(math.MaxInt32)
	for k := range g.members {
		if m := &g.members[k]; m.c < len(m.slots) && m.slots[m.c] < h {
			h = m.slots[m.c]
		}
	}
	g.head = h
}

// at reports whether one of g's members' cursors is at slot s, marking
// those that are.
func (g *pruneGroup) at(s int32) bool {
	any := false
	for k := range g.members {
		m := &g.members[k]
		m.has = m.c < len(m.slots) && m.slots[m.c] == s
		any = any || m.has
	}
	return any
}

// mayHold reports whether slot s may be in one of g's members' lists (a
// list without a bitmap may hold any slot).
func (g *pruneGroup) mayHold(s int32) bool {
	for k := range g.members {
		if m := &g.members[k]; m.bits == nil || listHas(m.bits, s) {
			return true
		}
	}
	return false
}

// score sets g.v to g's contribution to slot s from the members whose
// cursors are at s (has), advancing them (and g.head), with the same
// operations as lexicalCombined; g.has says it is above zero.
func (g *pruneGroup) score(c *retrieval.Combined, norm float64, p bm25.Params) {
	var text, field float64
	for k := range g.members {
		m := &g.members[k]
		if !m.has {
			continue
		}
		if g.field[k] {
			field += float64(m.wt * float64(m.tf()))
		} else {
			text += float64(m.wt * float64(m.tf()))
		}
		m.c++
	}
	g.setHead()
	ptf := c.Combine(text, field, norm)
	g.has = ptf > 0
	g.v = 0
	if g.has {
		g.v = float64(g.wt * bm25.TermNormF(g.idf, ptf, norm, p))
	}
}

// groupBound is the bound of a group of weight wt and idf idf on its
// contribution: wt times the saturation of the largest pseudo-frequency its
// lists allow, in norm-1 units (the largest text sum tmax over the
// smallest length normalisation minNorm, plus the field sum fmax times
// the field weight), widened by pruneMargin.
func groupBound(c *retrieval.Combined, wt, idf, tmax, fmax, minNorm float64, p bm25.Params) float64 {
	bound := c.FieldWeight * fmax
	if tmax > 0 {
		bound += tmax / minNorm
	}
	return wt * bm25.TermNormF(idf, bound, 1, p) * pruneMargin
}

// groupMaxScore is MaxScore's state over groups, as maxScore's over
// terms: byBound lists them by ascending bound, byBound[:nonEss] no
// longer propose, and below is their bounds' sum.
type groupMaxScore struct {
	groups  []pruneGroup
	byBound []int
	nonEss  int
	below   float64
}

func newGroupMaxScore(groups []pruneGroup) groupMaxScore {
	byBound := make([]int, len(groups))
	for j := range groups {
		byBound[j] = j
		groups[j].setHead()
	}
	slices.SortStableFunc(byBound, func(a, b int) int { return cmp.Compare(groups[a].ub, groups[b].ub) })
	return groupMaxScore{groups: groups, byBound: byBound}
}

// next is the smallest slot at a proposing group's member's cursor (the
// smallest head), math.MaxInt32 when none is left.
func (m *groupMaxScore) next() int32 {
	s := int32(math.MaxInt32)
	for _, j := range m.byBound[m.nonEss:] {
		s = min(s, m.groups[j].head)
	}
	return s
}

// raise stops the groups whose bounds, with those stopped before, sum
// below floor from proposing.
func (m *groupMaxScore) raise(floor float64) {
	for m.nonEss < len(m.byBound) && m.below+m.groups[m.byBound[m.nonEss]].ub < floor {
		m.below += m.groups[m.byBound[m.nonEss]].ub
		m.nonEss++
	}
}

// total is the sum of the contributions of the groups that have one, in
// group order.
func (m *groupMaxScore) total() float64 {
	score := 0.0
	for j := range m.groups {
		if g := &m.groups[j]; g.has {
			score += g.v
		}
	}
	return score
}

// lexicalCombinedPruned is lexicalPruned for a combined request: MaxScore
// over the groups instead of the terms. A group's bound is its weight times
// the saturation of the largest pseudo-frequency its lists allow (their
// largest tfs, the text's in the shortest chunk of its text lists, as
// norm-1 units), widened by pruneMargin; a proposed chunk is judged as
// lexicalPruned judges it, and scored whole, every group's contribution
// summed in group order as lexicalCombined sums it, so its score has the
// same bits. Each proposing group keeps its head, the smallest slot at its
// members' cursors, so the next candidate is the smallest head. It reports
// false, having done nothing, when some group's contribution may not be
// positive or fewer than two groups have postings in the range.
func (x *Index) lexicalCombinedPruned(c *retrieval.Combined, st scopeStats, w *worker, sc *scratch, pt *rankPart, spans []span, normOf func(int32) float64) bool {
	params := x.settings.BM25
	groups := make([]pruneGroup, 0, len(c.Groups))
	var lists []pruneTerm
	for gi := range c.Groups {
		g := &c.Groups[gi]
		pg := pruneGroup{wt: g.Weight, idf: st.lex[g.IDF]}
		if !(pg.wt*pg.idf > 1e-200) {
			return false
		}
		var tmax, fmax float64
		minLen := int32(math.MaxInt32)
		for _, m := range g.Members {
			sp := spans[m.Term]
			if sp.p == nil || sp.start == sp.end {
				continue
			}
			p := sp.p
			if m.Field {
				fmax += m.Coef * float64(p.maxTF)
			} else {
				tmax += m.Coef * float64(p.maxTF)
				minLen = min(minLen, p.minLen)
			}
			pg.members = append(pg.members, pruneTerm{slots: p.slots[sp.start:sp.end], tfs: p.tfs[sp.start:sp.end], big: p.big(), base: sp.start, bits: p.bits(), wt: m.Coef})
			pg.field = append(pg.field, m.Field)
		}
		if len(pg.members) == 0 {
			continue
		}
		minNorm := 1.0
		if tmax > 0 {
			minNorm = normOf(minLen)
		}
		pg.ub = groupBound(c, g.Weight, pg.idf, tmax, fmax, minNorm, params)
		groups = append(groups, pg)
		lists = append(lists, pg.members...)
	}
	if len(groups) < 2 {
		return false
	}
	ms := newGroupMaxScore(groups)
	combinedPrunedRuns.Add(1)
	pruned.Add(1)
	vis := sc.vis
	x.pruneCount(w, vis, pt, lists)

	alive, length := x.vis.alive, x.length
	f := &w.f
	asOf, fresh, now, maxStale := f.asOf, f.fresh, f.now, f.maxStale
	floor := pt.top.floor()
	for {
		s := ms.next()
		if s == math.MaxInt32 {
			break
		}
		byBound, nonEss := ms.byBound, ms.nonEss
		bound, maybe := 0.0, 0.0
		for _, j := range byBound[nonEss:] {
			if g := &groups[j]; g.head == s {
				g.at(s)
				g.has = true
				bound += g.ub
			} else {
				g.has = false
			}
		}
		for _, j := range byBound[:nonEss] {
			if g := &groups[j]; g.mayHold(s) {
				g.has = true
				g.below = maybe
				maybe += g.ub
			} else {
				g.has = false
			}
		}
		if bound+maybe < floor || !liveVisible(alive, vis.bits, s) {
			for _, j := range byBound[nonEss:] {
				g := &groups[j]
				if !g.has {
					continue
				}
				for k := range g.members {
					if m := &g.members[k]; m.has {
						m.c++
					}
				}
				g.setHead()
			}
			continue
		}
		norm := normOf(length[s])
		partial := 0.0
		for _, j := range byBound[nonEss:] {
			if g := &groups[j]; g.has {
				g.score(c, norm, params)
				partial += g.v
			}
		}
		if partial*pruneMargin+maybe < floor {
			continue
		}
		// The others by descending bound, until what they may still add
		// cannot lift the chunk to the floor.
		short := false
		for i := nonEss - 1; i >= 0 && !short; i-- {
			g := &groups[byBound[i]]
			if !g.has {
				continue
			}
			for k := range g.members {
				m := &g.members[k]
				m.c = gallop(m.slots, m.c, s)
			}
			if g.at(s) {
				g.score(c, norm, params)
				partial += g.v
			} else {
				g.has = false
			}
			short = partial*pruneMargin+g.below < floor
		}
		if short {
			continue
		}
		score := ms.total()
		if score < floor {
			continue
		}
		if fresh && now-asOf[s] > maxStale {
			continue
		}
		pt.top.offer(s, score)
		if fl := pt.top.floor(); fl != floor {
			floor = fl
			ms.raise(floor)
		}
	}
	return true
}
