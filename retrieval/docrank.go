package retrieval

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/bm25"
)

// DocHit is one document of the document ranking (SPEC section 5,
// "Document evidence") with its whole-document BM25 score.
type DocHit struct {
	DocID string
	Score float64
}

// DocEvidence is what a store knows of one document of the statistics
// scope holding at least one of a request's terms: its length (the sum of
// its chunks' lengths), each term's frequency in it (the sum over its
// chunks; same index as the request's Terms), and whether it may enter the
// ranking (the principal may see it and, under max_stale_ticks, it is
// fresh).
type DocEvidence struct {
	DocID  string
	Length int64
	TF     []int64
	Ranked bool
}

// DocScope is the document statistics of a request's scope: N the number of
// documents in it, SumLen the sum of their lengths (the chunk scope's length
// sum: a document's length is its chunks'), DF each term's number of
// documents in it holding the term (same index as the request's Terms).
type DocScope struct {
	N, SumLen int64
	DF        []int64
}

// RankDocs is the document ranking of req: every document of docs that
// may be ranked and scores > 0, scored with BM25 over whole documents under
// sc (the request's idf kind and term weights, the tenant's parameters p),
// sorted by score descending then doc id ascending in byte order, truncated
// to req.TopN. docs may come in any order; each document at most once.
// Every store ranks documents through it, so only the integer evidence is
// the store's.
func RankDocs(req *RankRequest, docs []DocEvidence, sc DocScope, p bm25.Params) []DocHit {
	if sc.N == 0 || len(docs) == 0 {
		return []DocHit{}
	}
	w := bm25.NewIDFs(req.IDF, len(req.Terms))
	for i := range req.Terms {
		w.Set(i, sc.N, sc.DF[i])
	}
	avgdl := bm25.AvgDL(sc.SumLen, sc.N)
	out := make([]DocHit, 0, len(docs))
	for _, d := range docs {
		if !d.Ranked {
			continue
		}
		var score float64
		if c := req.Combined; c != nil {
			score = c.Score(w.Lex, func(i int) int64 { return d.TF[i] }, bm25.LengthNorm(d.Length, avgdl, p), p)
			if score > 0 {
				out = append(out, DocHit{DocID: d.DocID, Score: score})
			}
			continue
		}
		for i, tf := range d.TF {
			if tf > 0 {
				score += float64(req.Weight(i) * bm25.Term(w.Lex[i], tf, d.Length, avgdl, p))
			}
		}
		if score > 0 {
			out = append(out, DocHit{DocID: d.DocID, Score: score})
		}
	}
	return TopDocs(out, req.TopN)
}

// TopDocs sorts a document ranking by score descending, then doc id
// ascending in byte order, and keeps its first topN (doc ids are unique,
// so the order is total). A long ranking is cut first with a heap of the
// topN best, which gives the same list as sorting it whole.
func TopDocs(h []DocHit, topN int) []DocHit {
	if topN < 0 {
		topN = 0
	}
	if len(h) > topN {
		top := &docHeap{}
		for _, d := range h {
			switch {
			case len(*top) < topN:
				heap.Push(top, d)
			case topN > 0 && docBefore(d, (*top)[0]):
				(*top)[0] = d
				heap.Fix(top, 0)
			}
		}
		h = *top
	}
	slices.SortFunc(h, func(a, b DocHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.DocID, b.DocID)
	})
	return h
}

// docBefore reports whether a ranks before b in a document ranking.
func docBefore(a, b DocHit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.DocID < b.DocID
}

// docHeap is a min-heap of document hits by ranking order: its root is the
// worst kept.
type docHeap []DocHit

func (h docHeap) Len() int           { return len(h) }
func (h docHeap) Less(i, j int) bool { return docBefore(h[j], h[i]) }
func (h docHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *docHeap) Push(v any)        { *h = append(*h, v.(DocHit)) }
func (h *docHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// DocCounter sums a request's postings into [DocEvidence]: a store adds the
// posting of every chunk of its statistics scope holding a query term, in
// any order, then asks for the evidence and the document frequencies.
type DocCounter struct {
	terms int
	docs  map[string]*DocEvidence
}

// NewDocCounter returns a counter for a request of terms terms.
func NewDocCounter(terms int) *DocCounter {
	return &DocCounter{terms: terms, docs: make(map[string]*DocEvidence)}
}

// Add counts tf occurrences of term i (the request's Terms index) in a
// chunk of document docID; ranked says whether the document may enter the
// ranking (the same for every chunk of a document).
func (c *DocCounter) Add(i int, docID string, tf int64, ranked bool) {
	d := c.docs[docID]
	if d == nil {
		d = &DocEvidence{DocID: docID, TF: make([]int64, c.terms), Ranked: ranked}
		c.docs[docID] = d
	}
	d.TF[i] += tf
}

// IDs returns the counted documents' ids, sorted.
func (c *DocCounter) IDs() []string {
	ids := make([]string, 0, len(c.docs))
	for id := range c.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Evidence returns the counted documents, sorted by id, each with the
// length length gives it, and each term's document frequency among them.
func (c *DocCounter) Evidence(length func(docID string) int64) ([]DocEvidence, []int64) {
	df := make([]int64, c.terms)
	out := make([]DocEvidence, 0, len(c.docs))
	for _, id := range c.IDs() {
		d := c.docs[id]
		for i, tf := range d.TF {
			if tf > 0 {
				df[i]++
			}
		}
		d.Length = length(id)
		out = append(out, *d)
	}
	return out, df
}
