package memindex

import (
	"slices"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
)

// docScratch is one document ranking's accumulators, by document number,
// reused across queries: every entry a query sets is reset before the
// scratch goes back to the pool.
type docScratch struct {
	tf    []int64
	score []float64
	seen  []bool  // met by an earlier term of this query
	slot  []int32 // one live slot of the document, for its labels
	// The documents met (seen) and those of them that may be ranked, and
	// the scored hits, by query.
	met, ranked, touched []int32
	hits                 []retrieval.DocHit
}

// getDocScratch returns a scratch sized for every document number.
func (x *Index) getDocScratch() *docScratch {
	sc, _ := x.docPool.Get().(*docScratch)
	if sc == nil {
		sc = &docScratch{}
	}
	if nd := len(x.docNames); len(sc.tf) < nd {
		sc.tf, sc.score, sc.seen, sc.slot = make([]int64, nd), make([]float64, nd), make([]bool, nd), make([]int32, nd)
	}
	return sc
}

// putDocScratch resets what a query set and pools sc.
func (x *Index) putDocScratch(sc *docScratch) {
	for _, d := range sc.met {
		sc.seen[d], sc.score[d] = false, 0
	}
	sc.met, sc.ranked, sc.touched, sc.hits = sc.met[:0], sc.ranked[:0], sc.touched[:0], sc.hits[:0]
	x.docPool.Put(sc)
}

// docRanking is the document ranking of req (SPEC section 5, "Document
// evidence") over the scope st was counted in, the same arithmetic as
// [retrieval.RankDocs] without its maps: term by term, the postings of the
// scope's chunks are summed per document number, the term's document
// frequency is the number of documents that got any, and each rankable
// document adds the term's weighted BM25 contribution to its score, so a
// document's score is summed in query-term order. N is the sum of the
// visible label sets' document counts (a document's chunks share its
// labels), the length sum the chunk scope's.
func (x *Index) docRanking(req *retrieval.RankRequest, st scopeStats, f *filter) []retrieval.DocHit {
	entitled := x.settings.Statistics.Entitled()
	var n int64
	for ls, c := range x.labels {
		if !entitled || f.visible(ls.class, ls.set) {
			n += c.docs
		}
	}
	if n == 0 {
		return []retrieval.DocHit{}
	}
	avgdl := bm25.AvgDL(st.sumLen, n)
	params := x.settings.BM25
	w := bm25.NewIDFs(req.IDF, len(req.Terms))
	sc := x.getDocScratch()
	defer x.putDocScratch(sc)
	touched, ranked := sc.touched, sc.ranked
	defer func() { sc.touched, sc.ranked = touched[:0], ranked[:0] }()
	for i, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		touched = touched[:0]
		for k, s := range p.slots {
			if !x.alive[s] || entitled && !f.visible(x.class[s], x.barrier[s]) {
				continue
			}
			d := x.docOf[s]
			if sc.tf[d] == 0 {
				touched = append(touched, d)
				sc.slot[d] = s
			}
			sc.tf[d] += int64(p.tfs[k])
		}
		w.Set(i, n, int64(len(touched)))
		idf, wt := w.Lex[i], req.Weight(i)
		for _, d := range touched {
			if !sc.seen[d] {
				sc.seen[d] = true
				sc.met = append(sc.met, d)
				if f.verdict(sc.slot[d]) != keep {
					sc.tf[d] = 0
					sc.score[d] = -1 // never ranked
					continue
				}
				ranked = append(ranked, d)
			}
			if sc.score[d] >= 0 {
				sc.score[d] += float64(wt * bm25.Term(idf, sc.tf[d], x.docLen[d], avgdl, params))
			}
			sc.tf[d] = 0
		}
	}
	for _, d := range ranked {
		if sc.score[d] > 0 {
			sc.hits = append(sc.hits, retrieval.DocHit{DocID: x.docNames[d], Score: sc.score[d]})
		}
	}
	// The top list may alias the pooled hits: the caller gets a copy.
	return slices.Clip(slices.Clone(retrieval.TopDocs(sc.hits, req.TopN)))
}
