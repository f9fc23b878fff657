package memindex

import (
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
)

// docScratch is one document ranking's accumulators, by document number.
type docScratch struct {
	tf    []int64
	score []float64
	seen  []bool  // scored by an earlier term of this query
	slot  []int32 // one live slot of the document, for its labels
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
	nd := len(x.docNames)
	sc := docScratch{tf: make([]int64, nd), score: make([]float64, nd), seen: make([]bool, nd), slot: make([]int32, nd)}
	var touched, ranked []int32
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
	out := make([]retrieval.DocHit, 0, len(ranked))
	for _, d := range ranked {
		if sc.score[d] > 0 {
			out = append(out, retrieval.DocHit{DocID: x.docNames[d], Score: sc.score[d]})
		}
	}
	return retrieval.TopDocs(out, req.TopN)
}
