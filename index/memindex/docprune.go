package memindex

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/internal/topk"
	"github.com/cordon-rag/cordon/retrieval"
)

// prunedDocs counts the document rankings docPruned ranked, and
// combinedDocsPruned those of them docPrunedCombined ranked (for tests).
var prunedDocs, combinedDocsPruned atomic.Int64

// docPlan is a document ranking's statistics, computed before the parts
// run when the ranking may be pruned (docPlanFor).
type docPlan struct {
	n     int64
	idf   []float64
	avgdl float64
}

// docPlanFor returns the statistics of req's document ranking from the
// posting lists' document counts, and whether the ranking may be pruned
// (docPruned): the query's terms hold pruneMin postings or more and every
// term's weighted idf is positive, so every document holding a term scores
// above zero. The counts are those docRuns would count: a term's live
// documents, under the entitled scope only those f's principal may see.
func (x *Index) docPlanFor(req *retrieval.RankRequest, st scopeStats, f *filter, vis *visMask) (docPlan, bool) {
	postings := 0
	for _, t := range req.Terms {
		if p := x.postings[t]; p != nil {
			postings += len(p.slots)
		}
	}
	if postings < pruneMin {
		return docPlan{}, false
	}
	entitled := x.settings.Statistics.Entitled()
	var n int64
	for ls, c := range x.labels {
		if !entitled || f.visible(ls.class, ls.set) {
			n += c.docs
		}
	}
	if n == 0 {
		return docPlan{}, false
	}
	w := bm25.NewIDFs(req.IDF, len(req.Terms))
	for i, t := range req.Terms {
		p := x.postings[t]
		var df int64
		switch {
		case p == nil:
		case !entitled:
			df = int64(p.docDF)
		case p.docByLabel() != nil:
			df = f.visibleSum(p.docByLabel())
		default:
			for k := 0; k < len(p.slots); {
				s := p.slots[k]
				d := x.docOf[s]
				for k++; k < len(p.slots) && x.docOf[p.slots[k]] == d; k++ {
				}
				if x.alive[s] && hasBit(vis.bits, s) {
					df++
				}
			}
		}
		w.Set(i, n, df)
		if p != nil && req.Combined == nil && !(req.Weight(i)*w.Lex[i] > 1e-200) {
			return docPlan{}, false
		}
	}
	if c := req.Combined; c != nil {
		for _, g := range c.Groups {
			if !(g.Weight*w.Lex[g.IDF] > 1e-200) {
				return docPlan{}, false
			}
		}
	}
	return docPlan{n: n, idf: w.Lex, avgdl: bm25.AvgDL(st.sumLen, n)}, true
}

// docPruned ranks the documents of pt's range (whole documents) into
// pt.docHits as docRuns and docScores would, scoring only the documents
// that may enter the top list (MaxScore over documents): a term's bound is
// its weighted contribution at its largest tf summed over a document in
// its shortest document; once top_n documents have scored, the terms whose
// bounds sum below the top_n-th best score no longer propose documents,
// and a proposed document whose proposing terms' contributions plus the
// others' bounds stay below it is dropped (the others read by descending
// bound, and the document dropped as soon as what those left may add
// cannot lift it to the floor). A document scored is scored
// whole, its terms' contributions summed in query-term order as docScores
// sums them. The hits kept are every document that scored at least the
// floor of its time, a superset of the part's top list; TopDocs picks the
// list.
func (x *Index) docPruned(req *retrieval.RankRequest, plan docPlan, vis *visMask, f *filter, w *worker, pt *rankPart) {
	prunedDocs.Add(1)
	if req.Combined != nil {
		x.docPrunedCombined(req, plan, vis, f, pt)
		return
	}
	params := x.settings.BM25
	lo, hi := pt.lo, pt.hi
	terms := w.prune[:0]
	defer func() { w.prune = terms[:0] }()
	for i, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		start, _ := slices.BinarySearch(p.slots, lo)
		end, _ := slices.BinarySearch(p.slots, hi)
		if start == end {
			continue
		}
		wt, idf := req.Weight(i), plan.idf[i]
		ub := float64(wt * bm25.Term(idf, p.maxDocTF, p.minDocLen, plan.avgdl, params))
		terms = append(terms, pruneTerm{slots: p.slots[start:end], tfs: p.tfs[start:end], big: p.big(), base: start, bits: p.bits(), wt: wt, idf: idf, ub: ub * pruneMargin})
	}
	hits := pt.docHits[:0]
	defer func() { pt.docHits = hits }()
	if len(terms) == 0 || req.TopN <= 0 {
		return
	}
	m := newMaxScore(terms, w.pruneBound)
	w.pruneBound = m.byBound
	alive, asOf, docOf, docLen := x.vis.alive, x.asOf, x.docOf, x.docLen
	fresh, now, maxStale := f.fresh, f.now, f.maxStale
	top := w.docTop[:0]
	defer func() { w.docTop = top[:0] }()
	floor := math.Inf(-1)
	for {
		s := m.next()
		if s == math.MaxInt32 {
			break
		}
		d := docOf[s]
		// Bounds first: the proposing terms holding d, and the others
		// unless their list's bitmap lacks d's slots. Most documents stop
		// here, and so does one the principal may not rank (a document's
		// chunks share its labels and tick).
		bound, below := 0.0, 0.0
		for _, j := range m.byBound[m.nonEss:] {
			t := &terms[j]
			if t.has = t.c < len(t.slots) && docOf[t.slots[t.c]] == d; t.has {
				bound += t.ub
			}
		}
		first := s
		if m.nonEss > 0 {
			end := s + 1
			for first > lo && docOf[first-1] == d {
				first--
			}
			for end < hi && docOf[end] == d {
				end++
			}
			for _, j := range m.byBound[:m.nonEss] {
				t := &terms[j]
				if t.has = t.bits == nil || listHasAny(t.bits, first, end); t.has {
					t.below = below
					below += t.ub
				}
			}
		}
		if bound+below < floor || !liveVisible(alive, vis.bits, s) || fresh && now-asOf[s] > maxStale {
			for _, j := range m.byBound[m.nonEss:] {
				if t := &terms[j]; t.has {
					t.sumDoc(docOf, d)
				}
			}
			continue
		}
		// Then the proposing terms' contributions: with the others'
		// bounds they bound the score.
		dl := docLen[d]
		partial := 0.0
		for _, j := range m.byBound[m.nonEss:] {
			if t := &terms[j]; t.has {
				t.v = float64(t.wt * bm25.Term(t.idf, t.sumDoc(docOf, d), dl, plan.avgdl, params))
				partial += t.v
			}
		}
		if partial*pruneMargin+below < floor {
			continue
		}
		// The others by descending bound, until what they may still add
		// cannot lift the document to the floor.
		short := false
		for i := m.nonEss - 1; i >= 0 && !short; i-- {
			t := &terms[m.byBound[i]]
			if !t.has {
				continue
			}
			t.c = gallop(t.slots, t.c, first)
			tf := t.sumDoc(docOf, d)
			t.has = tf > 0
			if t.has {
				t.v = float64(t.wt * bm25.Term(t.idf, tf, dl, plan.avgdl, params))
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
		hits = append(hits, retrieval.DocHit{DocID: x.docNames[d], Score: score})
		top = topk.Offer(top, req.TopN, score)
		if len(top) == req.TopN && top[0] > floor {
			floor = top[0]
			m.raise(floor)
		}
	}
}

// sumDoc advances t past document d's postings (docOf gives each slot's
// document), from its cursor, and returns their summed tf.
func (t *pruneTerm) sumDoc(docOf []int32, d int32) (tf int64) {
	for t.c < len(t.slots) && docOf[t.slots[t.c]] == d {
		tf += int64(t.tf())
		t.c++
	}
	return tf
}

// docPrunedCombined is docPruned for a combined request (SPEC section 4,
// "Combined terms"): MaxScore over documents with the query words' groups
// for terms. A group's bound is its weight times the saturation of the
// largest pseudo-frequency its lists allow over a document (their largest
// summed tfs, the text's in the shortest document of its text lists, as
// norm-1 units), widened by pruneMargin; a document scored is scored whole,
// each group's members summed in member order and the groups in group
// order, as docScoresCombined sums them.
func (x *Index) docPrunedCombined(req *retrieval.RankRequest, plan docPlan, vis *visMask, f *filter, pt *rankPart) {
	combinedDocsPruned.Add(1)
	c := req.Combined
	params := x.settings.BM25
	lo, hi := pt.lo, pt.hi
	hits := pt.docHits[:0]
	defer func() { pt.docHits = hits }()
	groups := make([]pruneGroup, 0, len(c.Groups))
	for gi := range c.Groups {
		g := &c.Groups[gi]
		pg := pruneGroup{wt: g.Weight, idf: plan.idf[g.IDF]}
		var tmax, fmax float64
		minLen := int64(math.MaxInt64)
		for _, m := range g.Members {
			p := x.postings[req.Terms[m.Term]]
			if p == nil {
				continue
			}
			start, _ := slices.BinarySearch(p.slots, lo)
			end, _ := slices.BinarySearch(p.slots, hi)
			if start == end {
				continue
			}
			if m.Field {
				fmax += m.Coef * float64(p.maxDocTF)
			} else {
				tmax += m.Coef * float64(p.maxDocTF)
				minLen = min(minLen, p.minDocLen)
			}
			pg.members = append(pg.members, pruneTerm{slots: p.slots[start:end], tfs: p.tfs[start:end], big: p.big(), base: start, bits: p.bits(), wt: m.Coef})
			pg.field = append(pg.field, m.Field)
		}
		if len(pg.members) == 0 {
			continue
		}
		minNorm := 1.0
		if tmax > 0 {
			minNorm = bm25.LengthNorm(minLen, plan.avgdl, params)
		}
		pg.ub = groupBound(c, g.Weight, pg.idf, tmax, fmax, minNorm, params)
		groups = append(groups, pg)
	}
	if len(groups) == 0 || req.TopN <= 0 {
		return
	}
	ms := newGroupMaxScore(groups)
	alive, asOf, docOf, docLen := x.vis.alive, x.asOf, x.docOf, x.docLen
	fresh, now, maxStale := f.fresh, f.now, f.maxStale
	var top []float64
	floor := math.Inf(-1)
	// score sets g's contribution to document d from its members holding
	// d (has), summing and advancing them.
	score := func(g *pruneGroup, d int32, norm float64) {
		var text, field float64
		for k := range g.members {
			m := &g.members[k]
			if !m.has {
				continue
			}
			tf := m.sumDoc(docOf, d)
			if g.field[k] {
				field += float64(m.wt * float64(tf))
			} else {
				text += float64(m.wt * float64(tf))
			}
		}
		g.setHead()
		ptf := c.Combine(text, field, norm)
		g.has, g.v = ptf > 0, 0
		if g.has {
			g.v = float64(g.wt * bm25.TermNormF(g.idf, ptf, norm, params))
		}
	}
	for {
		s := ms.next()
		if s == math.MaxInt32 {
			break
		}
		byBound, nonEss := ms.byBound, ms.nonEss
		d := docOf[s]
		bound, maybe := 0.0, 0.0
		for _, j := range byBound[nonEss:] {
			g := &groups[j]
			if g.has = g.head != math.MaxInt32 && docOf[g.head] == d; !g.has {
				continue
			}
			for k := range g.members {
				m := &g.members[k]
				m.has = m.c < len(m.slots) && docOf[m.slots[m.c]] == d
			}
			bound += g.ub
		}
		first := s
		if nonEss > 0 {
			end := s + 1
			for first > lo && docOf[first-1] == d {
				first--
			}
			for end < hi && docOf[end] == d {
				end++
			}
			for _, j := range byBound[:nonEss] {
				g := &groups[j]
				g.has = false
				for k := range g.members {
					if m := &g.members[k]; m.bits == nil || listHasAny(m.bits, first, end) {
						g.has = true
						break
					}
				}
				if g.has {
					g.below = maybe
					maybe += g.ub
				}
			}
		}
		if bound+maybe < floor || !liveVisible(alive, vis.bits, s) || fresh && now-asOf[s] > maxStale {
			for _, j := range byBound[nonEss:] {
				g := &groups[j]
				if !g.has {
					continue
				}
				for k := range g.members {
					if m := &g.members[k]; m.has {
						m.sumDoc(docOf, d)
					}
				}
				g.setHead()
			}
			continue
		}
		norm := bm25.LengthNorm(docLen[d], plan.avgdl, params)
		partial := 0.0
		for _, j := range byBound[nonEss:] {
			if g := &groups[j]; g.has {
				score(g, d, norm)
				partial += g.v
			}
		}
		if partial*pruneMargin+maybe < floor {
			continue
		}
		// The others by descending bound, until what they may still add
		// cannot lift the document to the floor.
		short := false
		for i := nonEss - 1; i >= 0 && !short; i-- {
			g := &groups[byBound[i]]
			if !g.has {
				continue
			}
			for k := range g.members {
				m := &g.members[k]
				m.c = gallop(m.slots, m.c, first)
				m.has = m.c < len(m.slots) && docOf[m.slots[m.c]] == d
			}
			score(g, d, norm)
			partial += g.v
			short = partial*pruneMargin+g.below < floor
		}
		if short {
			continue
		}
		total := ms.total()
		if total < floor {
			continue
		}
		hits = append(hits, retrieval.DocHit{DocID: x.docNames[d], Score: total})
		top = topk.Offer(top, req.TopN, total)
		if len(top) == req.TopN && top[0] > floor {
			floor = top[0]
			ms.raise(floor)
		}
	}
}
