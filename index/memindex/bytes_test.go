package memindex_test

import (
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/internal/adversarial"
)

// bytesTolerance is how far an index's count of its memory (Bytes) may be
// from the live heap it holds.
const bytesTolerance = 0.20

// prepareOwned prepares doc as a cache's load gives it to an index: every
// string the chunk's own allocation (index.Prepare's share the
// document's), and, with vocab, the terms counted by vocab and not named.
func prepareOwned(t *testing.T, doc *cordontype.Document, vocab *analysis.Vocabulary) ([]index.PreparedChunk, [][]int32) {
	t.Helper()
	pcs, err := index.Prepare(doc, index.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]int32, len(pcs))
	for j := range pcs {
		ch := &pcs[j].Chunk
		ch.ChunkID, ch.DocID, ch.Section, ch.Text = strings.Clone(ch.ChunkID), strings.Clone(ch.DocID), strings.Clone(ch.Section), strings.Clone(ch.Text)
		b := make([]string, len(ch.Barriers))
		for k, l := range ch.Barriers {
			b[k] = strings.Clone(l)
		}
		ch.Barriers = b
		if vocab != nil {
			ids[j], pcs[j].TF = vocab.CountIDs(ch.Text)
			pcs[j].Terms = nil
			continue
		}
		for k, term := range pcs[j].Terms {
			pcs[j].Terms[k] = strings.Clone(term)
		}
	}
	return pcs, ids
}

// TestBytesWithinLiveHeap: for each adversarial corpus, an index built
// whole (as a cache's load builds it), one built by Put (as a cache
// applies changes), and that one after half its documents are removed and
// a quarter put again (dead slots, grown lists, a compaction) count their
// memory (Bytes) within 20% of the live heap they hold.
func TestBytesWithinLiveHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds indexes of tens of MB")
	}
	s := index.DefaultSettings()
	for _, c := range adversarial.Corpora("t", 1) {
		t.Run(c.Name, func(t *testing.T) {
			// Preparing a document grows hashembed's shared cache of
			// token hashes, which is not the index's: fill it first.
			for i := range c.Docs {
				prepareOwned(t, &c.Docs[i], nil)
			}
			check := func(how string, x *memindex.Index, heap int64) {
				t.Helper()
				got := x.Bytes()
				t.Logf("%s: %d chunks, counted %d bytes, live heap %d (%+.1f%%), %.0f bytes a chunk", how, x.Len(), got, heap, 100*(float64(got)/float64(heap)-1), float64(heap)/float64(x.Len()))
				if math.Abs(float64(got-heap)) > bytesTolerance*float64(heap) {
					t.Errorf("%s: counted %d bytes, want within 20%% of the live heap %d", how, got, heap)
				}
			}
			before := liveHeap()
			x := func() *memindex.Index {
				vocab := analysis.NewVocabulary()
				b := memindex.NewBuilder(s, 0)
				for i := range c.Docs {
					pcs, ids := prepareOwned(t, &c.Docs[i], vocab)
					b.AddCounted(c.Docs[i].DocID, pcs, vocab, ids)
				}
				return b.Index()
			}()
			check("built whole", x, liveHeap()-before)
			runtime.KeepAlive(x)
			x = nil

			before = liveHeap()
			x = memindex.New(s)
			for i := range c.Docs {
				pcs, _ := prepareOwned(t, &c.Docs[i], nil)
				x.Put(strings.Clone(c.Docs[i].DocID), pcs)
			}
			check("put", x, liveHeap()-before)
			for i := range c.Docs {
				switch i % 4 {
				case 0:
					pcs, _ := prepareOwned(t, &c.Docs[i], nil)
					x.Put(strings.Clone(c.Docs[i].DocID), pcs)
				case 1, 2:
					x.Remove(c.Docs[i].DocID)
				}
			}
			check("put, half removed, a quarter put again", x, liveHeap()-before)
			runtime.KeepAlive(x)
		})
	}
}
