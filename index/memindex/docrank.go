package memindex

import (
	"slices"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
)

// The document ranking (SPEC section 5, "Document evidence") is the same
// arithmetic as [retrieval.RankDocs], computed in two stages over the
// lexical parts, each part on its own goroutine:
//
//  1. docRuns, with the part's chunk ranking: a document's chunks are
//     consecutive slots (Put and the builder add them together, compaction
//     keeps them together) and the lexical parts start on document
//     boundaries, so the postings of a term in the part form one run per
//     document, in slot order. Each run of a live chunk in the statistics
//     scope counts toward the term's document frequency, and the run of a
//     document that may be ranked (its chunks share its labels and tick:
//     visible and fresh) is kept with its summed tf.
//  2. docScores, once every part has counted: each term's idf comes from the
//     parts' document frequencies, and each kept run adds the term's
//     weighted BM25 contribution to its document's score, term by term, so
//     a document's score is summed in query-term order.
//
// Nothing depends on how the slots were cut into parts or scheduled. When
// the query's terms hold many postings the two stages are replaced by
// docPruned (docprune.go), which takes the document frequencies from the
// posting lists' own document counts and scores only the documents that
// may enter the top list, with the same arithmetic.

// docRun is one document's postings of one query term in a part: its
// number and summed tf.
type docRun struct {
	doc int32
	tf  int64
}

// docScratch is one document ranking's accumulators, by document number,
// reused across queries: every entry a query sets is reset by the part
// that set it.
type docScratch struct {
	score []float64
	seen  []bool
	// A combined query's group sums and marks (docScoresCombined).
	text, field []float64
	gseen       []bool
}

// getDocScratch returns a scratch sized for every document number.
func (x *Index) getDocScratch() *docScratch {
	sc, _ := x.docPool.Get().(*docScratch)
	if sc == nil {
		sc = &docScratch{}
	}
	if nd := len(x.docNames); len(sc.score) < nd {
		sc.score, sc.seen = make([]float64, nd), make([]bool, nd)
		sc.text, sc.field, sc.gseen = make([]float64, nd), make([]float64, nd), make([]bool, nd)
	}
	return sc
}

// docStart moves slot boundary b forward to the first slot of a document,
// so that no document is cut by a part boundary.
func (x *Index) docStart(b int32) int32 {
	n := int32(len(x.docOf))
	for b > 0 && b < n && x.docOf[b] == x.docOf[b-1] {
		b++
	}
	return b
}

// docRuns is stage 1 for the part pt, over spans (the part's share of each
// query term's postings), with w's filter and the principal's visibility
// bitmap vis.
func (x *Index) docRuns(spans []span, entitled bool, vis *visMask, w *worker, pt *rankPart) {
	f := &w.f
	asOf, fresh, now, maxStale := f.asOf, f.fresh, f.now, f.maxStale
	alive, docOf, seen := x.alive, x.docOf, vis.bits
	runs := pt.runs[:0]
	pt.df = slices.Grow(pt.df[:0], len(spans))[:len(spans)]
	pt.ends = slices.Grow(pt.ends[:0], len(spans))[:len(spans)]
	for i, sp := range spans {
		df := int64(0)
		if p := sp.p; p != nil {
			slots, tfs, big := p.slots[sp.start:sp.end], p.tfs[sp.start:sp.end], p.big()
			tfs = tfs[:len(slots)]
			for k := 0; k < len(slots); {
				s := slots[k]
				d, tf := docOf[s], int64(tfOf(tfs[k], big, sp.start+k))
				for k++; k < len(slots) && docOf[slots[k]] == d; k++ {
					tf += int64(tfOf(tfs[k], big, sp.start+k))
				}
				if !alive[s] {
					continue
				}
				visible := hasBit(seen, s)
				if entitled && !visible {
					continue
				}
				df++
				if visible && !(fresh && now-asOf[s] > maxStale) {
					runs = append(runs, docRun{doc: d, tf: tf})
				}
			}
		}
		pt.df[i], pt.ends[i] = df, int32(len(runs))
	}
	pt.runs = runs
}

// docScope is the document ranking's N and the idfs of its terms: N is the
// sum of the visible label sets' document counts under the entitled scope
// (a document's chunks share its labels), of all of them under the tenant
// scope, and a term's document frequency the sum of the parts'.
func (x *Index) docScope(req *retrieval.RankRequest, f *filter, parts []rankPart) (n int64, idf []float64) {
	entitled := x.settings.Statistics.Entitled()
	for ls, c := range x.labels {
		if !entitled || f.visible(ls.class, ls.set) {
			n += c.docs
		}
	}
	w := bm25.NewIDFs(req.IDF, len(req.Terms))
	for i := range req.Terms {
		var df int64
		for k := range parts {
			if !parts[k].dense && i < len(parts[k].df) {
				df += parts[k].df[i]
			}
		}
		w.Set(i, n, df)
	}
	return n, w.Lex
}

// docScores is stage 2 for the part pt: its documents' scores, and those
// above zero as pt.docHits. The scratch's entries pt sets are its own
// documents' and are reset before it returns.
func (x *Index) docScores(req *retrieval.RankRequest, idf []float64, avgdl float64, sc *docScratch, pt *rankPart) {
	params := x.settings.BM25
	score, seen, docLen := sc.score, sc.seen, x.docLen
	met := pt.met[:0]
	n := min(len(req.Terms), len(pt.df))
	if c := req.Combined; c != nil {
		// The groups sum every term's runs: the term loop below has
		// nothing left to add.
		met = x.docScoresCombined(c, idf, avgdl, sc, pt, met)
		n = 0
	}
	for i := range n {
		lidf, wt := idf[i], req.Weight(i)
		from := int32(0)
		if i > 0 {
			from = pt.ends[i-1]
		}
		for _, r := range pt.runs[from:pt.ends[i]] {
			d := r.doc
			if !seen[d] {
				seen[d] = true
				met = append(met, d)
			}
			score[d] += float64(wt * bm25.Term(lidf, r.tf, docLen[d], avgdl, params))
		}
	}
	hits := pt.docHits[:0]
	for _, d := range met {
		if score[d] > 0 {
			hits = append(hits, retrieval.DocHit{DocID: x.docNames[d], Score: score[d]})
		}
		seen[d], score[d] = false, 0
	}
	pt.met, pt.docHits = met[:0], hits
}

// docScoresCombined is docScores' sums under c (SPEC section 4, "Combined
// terms"): group by group, each member's kept runs add float64(coef * tf)
// to the document's text or field sum in member order, then each document
// the group met adds the group's contribution. It appends the documents
// met to met and returns it.
func (x *Index) docScoresCombined(c *retrieval.Combined, idf []float64, avgdl float64, sc *docScratch, pt *rankPart, met []int32) []int32 {
	params := x.settings.BM25
	score, seen, docLen := sc.score, sc.seen, x.docLen
	text, field, gseen := sc.text, sc.field, sc.gseen
	group := pt.group[:0]
	defer func() { pt.group = group[:0] }()
	for gi := range c.Groups {
		g := &c.Groups[gi]
		group = group[:0]
		for _, m := range g.Members {
			if m.Term >= len(pt.df) {
				continue
			}
			from := int32(0)
			if m.Term > 0 {
				from = pt.ends[m.Term-1]
			}
			for _, r := range pt.runs[from:pt.ends[m.Term]] {
				d := r.doc
				if !gseen[d] {
					gseen[d] = true
					group = append(group, d)
				}
				if m.Field {
					field[d] += float64(m.Coef * float64(r.tf))
				} else {
					text[d] += float64(m.Coef * float64(r.tf))
				}
			}
		}
		for _, d := range group {
			norm := bm25.LengthNorm(docLen[d], avgdl, params)
			ptf := c.Combine(text[d], field[d], norm)
			text[d], field[d], gseen[d] = 0, 0, false
			if !(ptf > 0) {
				continue
			}
			if !seen[d] {
				seen[d] = true
				met = append(met, d)
			}
			score[d] += float64(g.Weight * bm25.TermNormF(idf[g.IDF], ptf, norm, params))
		}
	}
	return met
}
