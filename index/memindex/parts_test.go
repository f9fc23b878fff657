package memindex_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

// partsCorpus puts n random documents into a memindex Index and the
// reference store under settings s: few words (so chunks tie on scores and
// on cosines), repeated texts (exact ties, broken by chunk id), some
// documents replaced or removed (dead slots; churn chances in ten after
// each put), four classifications, three barrier labels and ticks over
// [0, 1000]. The function it returns replaces, removes or adds one random
// document in both.
func partsCorpus(t *testing.T, r *rand.Rand, s index.Settings, n, churn int) (*memindex.Index, *memory.Store, func()) {
	t.Helper()
	ref, err := memory.New(s)
	if err != nil {
		t.Fatal(err)
	}
	x := memindex.New(s)
	words := []string{"ledger", "swap", "margin", "hold", "pmt", "fx", "desk", "limit", "tx4096", "note",
		"ledgers", "holding", "limits", "swapped"}
	var texts []string
	put := func(d int) {
		var text string
		if len(texts) > 0 && r.IntN(4) == 0 {
			text = texts[r.IntN(len(texts))]
		} else {
			var b strings.Builder
			for range 1 + r.IntN(30) {
				b.WriteString(words[min(r.IntN(len(words)), r.IntN(len(words)))] + " ")
			}
			text = b.String()
			texts = append(texts, text)
		}
		doc := cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("d%04d", d), Text: text,
			Classification: cordontype.Classification(r.IntN(4)), AsOfTick: int64(r.IntN(1001))}
		// Titles hold field terms (with Settings.Fields).
		for range r.IntN(3) {
			doc.Title += words[r.IntN(len(words))] + " "
		}
		for _, l := range []string{"mna", "trading", "legal"} {
			if r.IntN(4) == 0 {
				doc.Barriers = append(doc.Barriers, l)
			}
		}
		pcs, err := index.Prepare(&doc, s)
		if err != nil {
			t.Fatal(err)
		}
		x.Put(doc.DocID, pcs)
		if _, err := ref.Put(context.Background(), doc); err != nil {
			t.Fatal(err)
		}
	}
	// Replace or remove a document before d.
	write := func(d int) {
		e := r.IntN(d)
		if r.IntN(2) == 0 {
			put(e)
			return
		}
		x.Remove(fmt.Sprintf("d%04d", e))
		if _, err := ref.Delete(context.Background(), "t", fmt.Sprintf("d%04d", e)); err != nil {
			t.Fatal(err)
		}
	}
	for d := range n {
		put(d)
		for range churn {
			if d == 0 || r.IntN(10) != 0 {
				continue
			}
			write(d)
		}
	}
	return x, ref, func() {
		if r.IntN(3) == 0 {
			put(n)
			n++
			return
		}
		write(n)
	}
}

// partsQuery is a random query of principal, terms (some absent from the
// corpus, some repeated), weights, idf, freshness, top_n and the document
// ranking.
func partsQuery(r *rand.Rand) retrieval.RankRequest {
	words := []string{"ledger", "swap", "margin", "hold", "pmt", "fx", "desk", "limit", "tx4096", "note", "absent",
		"ledgers", "holds", "limiting", "notes"}
	var q strings.Builder
	for range 1 + r.IntN(6) {
		q.WriteString(words[r.IntN(len(words))] + " ")
	}
	tokens := analysis.Tokenize(q.String())
	terms := analysis.TokenSet(q.String())
	req := retrieval.RankRequest{
		Principal: cordontype.Principal{Tenant: "t", Clearance: cordontype.Classification(r.IntN(4))},
		Tokens:    tokens, Terms: terms, NowTick: 1000, TopN: 1 + r.IntN(30), Docs: r.IntN(3) == 0,
	}
	for _, l := range []string{"mna", "trading", "legal"} {
		if r.IntN(2) == 0 {
			req.Principal.Barriers = append(req.Principal.Barriers, l)
		}
	}
	if r.IntN(2) == 0 {
		stale := int64(r.IntN(1000))
		req.MaxStaleTicks = &stale
	}
	if r.IntN(2) == 0 {
		req.IDF = bm25.IDFRSJ
	}
	if r.IntN(3) == 0 {
		req.Weights = retrieval.QueryTermWeights(tokens, terms, 8)
	}
	if r.IntN(2) == 0 {
		// Stem and field terms, added or combined (bm25f).
		p := retrieval.Policy{QTFK3: []float64{0, 8}[r.IntN(2)], StemWeight: []float64{0, 0.3, 0.5, 1}[r.IntN(4)],
			FieldWeight: []float64{0, 0.5, 1, 4}[r.IntN(4)], BM25F: r.IntN(3) != 0}
		req.Terms, req.Weights, req.Combined = retrieval.LexicalTerms(tokens, terms, p)
	}
	return req
}

// sameRankings fails unless got and want are the same in every field, every
// score to the bit and every nil slice nil but Docs: an empty document
// ranking is nil or not as the pooled scratch it came from (either path).
func sameRankings(t *testing.T, name string, got, want retrieval.Rankings) {
	t.Helper()
	if len(got.Docs) == 0 && len(want.Docs) == 0 {
		got.Docs, want.Docs = nil, nil
	}
	if !reflect.DeepEqual(got, want) || fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Fatalf("%s:\ngot  %+v\nwant %+v", name, got, want)
	}
	bits := func(v []float64) []uint64 {
		out := make([]uint64, len(v))
		for i, f := range v {
			out[i] = math.Float64bits(f)
		}
		return out
	}
	scores := func(rk retrieval.Rankings) []float64 {
		var v []float64
		for _, h := range rk.Lexical {
			v = append(v, h.Score)
		}
		for _, h := range rk.Dense {
			v = append(v, h.Score)
		}
		for _, h := range rk.Docs {
			v = append(v, h.Score)
		}
		return append(v, rk.IDF...)
	}
	if g, w := bits(scores(got)), bits(scores(want)); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: score bits got %x, want %x", name, g, w)
	}
}

// sameAsReference fails unless got ranks as the reference's want: the same
// chunks and documents in the same order with the same score bits, the same
// funnel counts and idfs (an empty list may be nil in one and not in the
// other).
func sameAsReference(t *testing.T, name string, got, want retrieval.Rankings) {
	t.Helper()
	norm := func(rk retrieval.Rankings) string {
		var b strings.Builder
		for _, h := range rk.Lexical {
			fmt.Fprintf(&b, "L %s %x\n", h.Chunk.ChunkID, math.Float64bits(h.Score))
		}
		for _, h := range rk.Dense {
			fmt.Fprintf(&b, "D %s %x\n", h.Chunk.ChunkID, math.Float64bits(h.Score))
		}
		for _, h := range rk.Docs {
			fmt.Fprintf(&b, "doc %s %x\n", h.DocID, math.Float64bits(h.Score))
		}
		for _, f := range rk.IDF {
			fmt.Fprintf(&b, "idf %x\n", math.Float64bits(f))
		}
		fmt.Fprintf(&b, "funnel %d %d %d\n", rk.Considered, rk.ExcludedByEntitlement, rk.ExcludedByFreshness)
		return b.String()
	}
	if g, w := norm(got), norm(want); g != w {
		t.Fatalf("%s:\ngot\n%s\nwant\n%s", name, g, w)
	}
}

// TestRankPartsMatchSerial forces Rank's parallel path (every index is
// "large", cut into 1 to 7 parts per side and goroutine, on 1 to 4
// goroutines, with dense blocks of 1 to 2048 slots, each term's
// contributions cached or not, each range visited in slot order or by the
// slots touched, a range dense in postings ranked by lexicalPruned or not)
// and requires every field
// of its Rankings to equal the serial path's and the reference's, over
// randomized corpora with ties, dead slots, entitlement and freshness
// filters, both idfs, both statistics scopes, documents of one chunk or
// of several, posting lists with bitmaps or without, writes between
// queries (after the principals' visibility bitmaps were computed) and
// compacted indexes.
func TestRankPartsMatchSerial(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	compactions := 0
	pruned0, prunedDocs0, combined0, combinedDocs0 := memindex.Pruned(), memindex.PrunedDocs(), memindex.CombinedPruned(), memindex.CombinedDocsPruned()
	defer func() {
		if memindex.CombinedDocsPruned() == combinedDocs0 && !t.Failed() {
			t.Error("no part's documents were ranked by docPrunedCombined")
		}
		if memindex.CombinedPruned() == combined0 && !t.Failed() {
			t.Error("no part was ranked by lexicalCombinedPruned")
		}
		if compactions == 0 && !t.Failed() {
			t.Error("no corpus was compacted: the test exercised no renumbered documents")
		}
		if memindex.Pruned() == pruned0 && !t.Failed() {
			t.Error("no part was ranked by lexicalPruned")
		}
		if memindex.PrunedDocs() == prunedDocs0 && !t.Failed() {
			t.Error("no part's documents were ranked by docPruned")
		}
	}()
	for _, scope := range []bm25.Scope{bm25.ScopeTenant, bm25.ScopeEntitled} {
		for seed := uint64(1); seed <= 12; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", scope, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 25))
				s := index.DefaultSettings()
				s.Statistics = scope
				if seed%5 == 0 {
					// No stem or field terms: combined groups keep the
					// word alone.
					s.Analyzer, s.Fields = analysis.AnalyzerExact, false
				}
				if seed%2 == 0 {
					// Documents of several chunks, some of them cut by
					// the parts' even slot ranges.
					s.Chunking = chunk.Options{MaxWords: 6, OverlapWords: 1}
				}
				memindex.SetLabelCountsMin(t, 16)
				churn := 1
				if seed%3 == 0 {
					// Compactions renumber the documents and their slots.
					memindex.SetCompactMinDead(t, 4)
					churn = 20
				}
				// Lists of a few postings keep bitmaps in half the corpora.
				memindex.SetListBitsMin(t, []int{1, math.MaxInt}[seed%4/2])
				x, ref, write := partsCorpus(t, r, s, 20+r.IntN(200), churn)
				ranked := 0
				for i := range 40 {
					if i > 0 && r.IntN(4) == 0 {
						// A write after queries: the bitmaps they built
						// must follow it.
						write()
					}
					if err := x.CheckDocCounts(); err != nil {
						t.Fatalf("before query %d: %v", i, err)
					}
					req := partsQuery(r)
					want, err := ref.Rank(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					memindex.SetRankParts(t, math.MaxInt32, 1, 1, false)
					memindex.SetLexicalPaths(t, []int{1, 8, 2048}[r.IntN(3)], r.IntN(3))
					memindex.SetPruneMin(t, []int{0, math.MaxInt}[r.IntN(2)])
					memindex.SetDenseKernels(t, r.IntN(len(memindex.DenseKernels)))
					serial, err := x.Rank(req)
					if err != nil {
						t.Fatal(err)
					}
					sameAsReference(t, fmt.Sprintf("query %d, serial", i), serial, want)
					ranked += len(serial.Lexical) + len(serial.Dense)
					procs, lexParts, denseParts, blk := 1+r.IntN(4), 1+r.IntN(7), 1+r.IntN(7), []int{1, 3, 64, 2048}[r.IntN(4)]
					runtime.GOMAXPROCS(procs)
					memindex.SetParallel(t, 0, blk)
					memindex.SetRankParts(t, 0, lexParts, denseParts, true)
					memindex.SetLexicalPaths(t, []int{1, 8, 2048}[r.IntN(3)], r.IntN(3))
					memindex.SetPruneMin(t, []int{0, math.MaxInt}[r.IntN(2)])
					memindex.SetDenseKernels(t, r.IntN(len(memindex.DenseKernels)))
					got, err := x.Rank(req)
					if err != nil {
						t.Fatal(err)
					}
					sameRankings(t, fmt.Sprintf("query %d, %d goroutines, %d+%d parts, block %d", i, procs, lexParts, denseParts, blk), got, serial)
				}
				if ranked == 0 {
					t.Fatal("no query ranked anything: the test compared empty lists")
				}
				compactions += x.Compactions()
			})
		}
	}
}

// TestVisibilityBitmapsBounded: an index keeps the visibility bitmaps of
// at most 8 principals, a principal queried again reuses its own, and each
// query's rankings still equal the reference's as principals come and go.
func TestVisibilityBitmapsBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	x, ref, _ := partsCorpus(t, r, index.DefaultSettings(), 100, 1)
	var principals []cordontype.Principal
	for c := range 4 {
		for _, bs := range [][]string{nil, {"mna"}, {"legal", "mna"}, {"legal", "mna", "trading"}, {"trading"}} {
			principals = append(principals, cordontype.Principal{Tenant: "t", Clearance: cordontype.Classification(c), Barriers: bs})
		}
	}
	computed := memindex.VisibilityComputed()
	for i := range 3 * len(principals) {
		req := partsQuery(r)
		req.Principal = principals[i%len(principals)]
		want, err := ref.Rank(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.Rank(req)
		if err != nil {
			t.Fatal(err)
		}
		sameAsReference(t, fmt.Sprintf("query %d", i), got, want)
		if n, wantN := x.VisibilityBitmaps(), min(i+1, 8); n != wantN {
			t.Fatalf("after %d queries of distinct principals in turn: %d visibility bitmaps, want %d", i+1, n, wantN)
		}
	}
	// Twenty principals in turn: each query found its principal evicted.
	if n := memindex.VisibilityComputed() - computed; n != int64(3*len(principals)) {
		t.Fatalf("%d visibility bitmaps computed for %d queries of principals in turn", n, 3*len(principals))
	}
	// The 8 most recent principals' bitmaps are reused, not computed again.
	computed = memindex.VisibilityComputed()
	for i := 3*len(principals) - 1; i >= 3*len(principals)-8; i-- {
		req := partsQuery(r)
		req.Principal = principals[i%len(principals)]
		if _, err := x.Rank(req); err != nil {
			t.Fatal(err)
		}
	}
	if n := memindex.VisibilityComputed() - computed; n != 0 || x.VisibilityBitmaps() != 8 {
		t.Fatalf("the 8 most recent principals queried again: %d bitmaps computed, %d kept", n, x.VisibilityBitmaps())
	}
}
