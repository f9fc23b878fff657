package memindex

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// Hooks for the external tests (package memindex_test), which compare the
// index with the reference store through index/memindex/memindextest.

// SetCompactMinDead sets the dead slots that trigger a compaction until t
// ends.
func SetCompactMinDead(t testing.TB, n int) {
	old := compactMinDead
	compactMinDead = n
	t.Cleanup(func() { compactMinDead = old })
}

// SetLabelCountsMin sets the posting list length from which a list keeps
// per-label-set counts until t ends.
func SetLabelCountsMin(t testing.TB, n int) {
	old := labelCountsMin
	labelCountsMin = n
	t.Cleanup(func() { labelCountsMin = old })
}

// SetParallel sets the chunk count from which Rank runs two goroutines and
// the dense block size until t ends.
func SetParallel(t testing.TB, min, block int) {
	oldP, oldB := parallelMin, denseBlock
	parallelMin, denseBlock = min, block
	t.Cleanup(func() { parallelMin, denseBlock = oldP, oldB })
}

// SetRankParts sets the chunk count from which Rank spreads a query over
// the idle cores' goroutines, the parts of each side per goroutine, and
// whether a query on one goroutine is cut into parts too, until t ends.
func SetRankParts(t testing.TB, min, lexical, dense int, force bool) {
	oldP, oldL, oldD, oldF := parallelMin, lexicalParts, denseParts, forceParts
	parallelMin, lexicalParts, denseParts, forceParts = min, lexical, dense, force
	t.Cleanup(func() { parallelMin, lexicalParts, denseParts, forceParts = oldP, oldL, oldD, oldF })
}

// SetLexicalPaths sets the posting-list length from which a term's
// contributions are cached and the order lexical visits a range in (0 by
// the share of postings, 1 slot order, 2 the touched slots) until t ends.
func SetLexicalPaths(t testing.TB, long, order int) {
	oldL, oldO := longPostings, visitOrder
	longPostings, visitOrder = long, order
	t.Cleanup(func() { longPostings, visitOrder = oldL, oldO })
}

// Postings is the number of postings of terms.
func (x *Index) Postings(terms []string) int {
	n := 0
	for _, t := range terms {
		if p := x.postings[t]; p != nil {
			n += len(p.slots)
		}
	}
	return n
}

// Compactions is the number of times x was compacted.
func (x *Index) Compactions() int { return x.compactions }

// LabelCounted is the number of x's posting lists that keep per-label-set
// counts.
func (x *Index) LabelCounted() int {
	n := 0
	for _, p := range x.postings {
		if p.byLabel() != nil {
			n++
		}
	}
	return n
}

// Overflowed is the number of x's chunks whose vector does not fit int8.
func (x *Index) Overflowed() int { return len(x.overflow) }

// BigTFs is the number of postings whose tf does not fit a byte (see
// postingList.tfs).
func (x *Index) BigTFs() int {
	n := 0
	for _, p := range x.lists {
		if p != nil {
			n += len(p.big())
		}
	}
	return n
}

// EssentialPostings is the number of postings of req's terms, and of those
// of the terms MaxScore would have to score (its essential terms) had it
// known floor, the final top list's lowest lexical score, from the start:
// each term's largest contribution to a chunk's score is computed, the
// terms are taken from the smallest, and those whose contributions sum
// below floor are left out, since a chunk holding only those cannot reach
// the list. (An analysis for BenchmarkRankScale: what dynamic pruning could
// save at best.)
func (x *Index) EssentialPostings(req retrieval.RankRequest, floor float64) (postings, essential int) {
	st := x.scopeStats(req.Terms, req.IDF, x.newFilter(&req))
	avgdl := bm25.AvgDL(st.sumLen, st.n)
	type bound struct {
		max float64
		n   int
	}
	var bounds []bound
	for i, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		b := bound{n: len(p.slots)}
		for k, s := range p.slots {
			norm := bm25.LengthNorm(int64(x.length[s]), avgdl, x.settings.BM25)
			b.max = max(b.max, float64(req.Weight(i)*bm25.TermNorm(st.lex[i], int64(p.tfAt(k)), norm, x.settings.BM25)))
		}
		bounds = append(bounds, b)
		postings += b.n
	}
	slices.SortFunc(bounds, func(a, b bound) int { return cmp.Compare(a.max, b.max) })
	sum := 0.0
	for _, b := range bounds {
		if sum+b.max < floor {
			sum += b.max
			continue
		}
		essential += b.n
	}
	return postings, essential
}

// SetPruneMin sets the postings from which a lexical part dense in postings
// is ranked by lexicalPruned until t ends (math.MaxInt: never).
func SetPruneMin(t testing.TB, n int) {
	old := pruneMin
	pruneMin = n
	t.Cleanup(func() { pruneMin = old })
}

// CombinedDocsPruned is the number of parts' document rankings
// docPrunedCombined ranked so far.
func CombinedDocsPruned() int64 { return combinedDocsPruned.Load() }

// CombinedPruned is the number of lexical parts lexicalCombinedPruned
// ranked so far.
func CombinedPruned() int64 { return combinedPrunedRuns.Load() }

// Pruned is the number of lexical parts lexicalPruned ranked so far.
func Pruned() int64 { return pruned.Load() }

// SetListBitsMin sets the postings from which a long list keeps a bitmap
// until t ends; it applies to lists as they grow (and to a Builder's).
func SetListBitsMin(t testing.TB, n int) {
	old := listBitsMin
	listBitsMin = n
	t.Cleanup(func() { listBitsMin = old })
}

// ComputeVisibility computes p's visibility bitmap anew (as a principal's
// first query does) and caches it.
func (x *Index) ComputeVisibility(p cordontype.Principal) {
	x.vis.mu.Lock()
	x.vis.masks = nil
	x.vis.mu.Unlock()
	x.visible(x.newFilter(&retrieval.RankRequest{Principal: p}))
}

// VisibilityBitmaps is how many principals' visibility bitmaps x keeps.
func (x *Index) VisibilityBitmaps() int {
	x.vis.mu.Lock()
	defer x.vis.mu.Unlock()
	return len(x.vis.masks)
}

// VisibilityComputed is how many visibility bitmaps every index computed.
func VisibilityComputed() int64 { return visComputed.Load() }

// CheckDocCounts recounts every posting list's live documents (all, and
// per label set where the list keeps them) and checks its document bounds
// against its live documents; it returns the first difference.
func (x *Index) CheckDocCounts() error {
	for _, p := range x.lists {
		if p == nil {
			continue
		}
		var df, maxTF int64
		minLen := int64(-1)
		byLabel := map[labelSet]int64{}
		for k := 0; k < len(p.slots); {
			s := p.slots[k]
			d, tf := x.docOf[s], int64(p.tfAt(k))
			for k++; k < len(p.slots) && x.docOf[p.slots[k]] == d; k++ {
				tf += int64(p.tfAt(k))
			}
			if !x.alive[s] {
				continue
			}
			df++
			byLabel[labelSet{class: x.class[s], set: x.barrier[s]}]++
			maxTF = max(maxTF, tf)
			if minLen < 0 || x.docLen[d] < minLen {
				minLen = x.docLen[d]
			}
		}
		if df != int64(p.docDF) {
			return fmt.Errorf("term %q: %d live documents counted, %d kept", p.term, df, p.docDF)
		}
		if p.docByLabel() != nil && !maps.Equal(byLabel, p.docByLabel()) {
			return fmt.Errorf("term %q: live documents per label set %v, kept %v", p.term, byLabel, p.docByLabel())
		}
		if maxTF > p.maxDocTF || df > 0 && minLen < p.minDocLen {
			return fmt.Errorf("term %q: documents' largest tf %d and shortest length %d, bounds kept %d and %d", p.term, maxTF, minLen, p.maxDocTF, p.minDocLen)
		}
	}
	return nil
}

// PrunedDocs is the number of lexical parts whose documents docPruned
// ranked so far.
func PrunedDocs() int64 { return prunedDocs.Load() }

// DenseKernels are the dense side's kernel choices SetDenseKernels takes:
// int64 sums, portable int32 sums, and vectorized int32 sums where the CPU
// has them (else the portable ones).
var DenseKernels = []string{"int64", "int32", "int32-vectorized"}

// SetDenseKernels makes the dense side use DenseKernels[k] until t ends.
func SetDenseKernels(t testing.TB, k int) {
	old32, oldAsm := kernel32, kernelAsm
	kernel32, kernelAsm = k > 0, k > 1 && haveAsm
	t.Cleanup(func() { kernel32, kernelAsm = old32, oldAsm })
}
