package memindex

import "testing"

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
		if p.byLabel != nil {
			n++
		}
	}
	return n
}

// Overflowed is the number of x's chunks whose vector does not fit int8.
func (x *Index) Overflowed() int { return len(x.overflow) }
