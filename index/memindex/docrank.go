package memindex

import "github.com/cordon-rag/cordon/retrieval"

// docRanking is the document ranking of req (SPEC section 5, "Document
// evidence") over the scope st was counted in: the postings of the query's
// terms summed per document, N counted over the documents (a document's
// chunks share its labels, so its first chunk decides).
func (x *Index) docRanking(req *retrieval.RankRequest, st scopeStats, f *filter) []retrieval.DocHit {
	entitled := x.settings.Statistics.Entitled()
	in := func(s int32) bool { return !entitled || f.visible(x.class[s], x.barrier[s]) }
	counter := retrieval.NewDocCounter(len(req.Terms))
	for i, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		for k, s := range p.slots {
			if x.alive[s] && in(s) {
				counter.Add(i, x.chunks[s].DocID, int64(p.tfs[k]), f.verdict(s) == keep)
			}
		}
	}
	sc := retrieval.DocScope{SumLen: st.sumLen}
	for _, slots := range x.docs {
		if in(slots[0]) {
			sc.N++
		}
	}
	docs, df := counter.Evidence(func(docID string) int64 {
		var n int64
		for _, s := range x.docs[docID] {
			n += int64(x.length[s])
		}
		return n
	})
	sc.DF = df
	return retrieval.RankDocs(req, docs, sc, x.settings.BM25)
}
