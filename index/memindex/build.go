package memindex

import (
	"hash/maphash"
	"runtime"
	"sync"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// Builder builds a new index from whole documents faster than Put: the
// per-slot arrays are sized once, and the posting lists, most of the work,
// are built at the end on GOMAXPROCS goroutines, each owning a share of
// the terms. The index is the one Put would build from the same documents
// in the same order (a cache loading a tenant uses it).
type Builder struct {
	x *Index
	// tfs are the term frequencies of each slot (x.terms holds the terms).
	tfs [][]int32
	// built is set once the posting lists are in x: from then on Add puts
	// documents (a document id that comes again replaces the earlier one,
	// as Put does).
	built bool
}

// NewBuilder returns a builder of an index with settings s, sized for
// about chunks chunks.
func NewBuilder(s index.Settings, chunks int) *Builder {
	x := New(s)
	chunks = max(chunks, 0)
	x.chunks = make([]cordontype.Chunk, 0, chunks)
	x.alive = make([]bool, 0, chunks)
	x.class = make([]int8, 0, chunks)
	x.barrier = make([]int32, 0, chunks)
	x.asOf = make([]int64, 0, chunks)
	x.length = make([]int32, 0, chunks)
	x.normSq = make([]int64, 0, chunks)
	x.norm = make([]float64, 0, chunks)
	x.terms = make([][]string, 0, chunks)
	for d := range x.cols {
		x.cols[d] = make([]int8, 0, chunks)
	}
	return &Builder{x: x, tfs: make([][]int32, 0, chunks)}
}

// Add adds a document's chunks (all of one document, as from
// index.Prepare). Until Index, the builder keeps their terms and
// frequencies, not their vectors.
func (b *Builder) Add(docID string, prepared []index.PreparedChunk) {
	if !b.built {
		if _, dup := b.x.docs[docID]; !dup {
			slots := make([]int32, len(prepared))
			for i := range prepared {
				slots[i] = b.x.addSlot(&prepared[i], false)
				b.tfs = append(b.tfs, prepared[i].TF)
			}
			b.x.addDoc(docID, slots)
			return
		}
		b.buildPostings()
	}
	b.x.Put(docID, prepared, false)
}

// Index returns the index of the documents added; the builder is done.
func (b *Builder) Index() *Index {
	if !b.built {
		b.buildPostings()
	}
	x := b.x
	b.x = nil
	return x
}

// buildPartMin is the fewest slots worth a goroutine of their own in
// buildPostings; tests lower it.
var buildPartMin = 1024

// buildPostings builds the posting lists of every slot added: each of
// GOMAXPROCS goroutines those of a range of slots, joined in slot order.
func (b *Builder) buildPostings() {
	x := b.x
	parts := max(1, min(runtime.GOMAXPROCS(0), len(x.terms)/buildPartMin))
	lists := make([]map[string]*postingList, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := k*len(x.terms)/parts, (k+1)*len(x.terms)/parts
			m := make(map[string]*postingList)
			for s := lo; s < hi; s++ {
				tfs := b.tfs[s]
				for j, t := range x.terms[s] {
					p := m[t]
					if p == nil {
						p = &postingList{}
						m[t] = p
					}
					p.slots = append(p.slots, int32(s))
					p.tfs = append(p.tfs, tfs[j])
					p.df++
				}
			}
			lists[k] = m
		}()
	}
	wg.Wait()
	// Join the parts' lists of each term in part order (slot order), on
	// as many goroutines, each owning the terms whose hash falls to it; the
	// label counts of long lists (what add keeps from a list's
	// labelCountsMin-th posting on, every slot being alive) are taken there
	// too.
	joined := make([]map[string]*postingList, parts)
	seed := maphash.MakeSeed()
	for k := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := make(map[string]*postingList, len(lists[0])/parts)
			for _, part := range lists {
				for t, p := range part {
					if parts > 1 && maphash.String(seed, t)%uint64(parts) != uint64(k) {
						continue
					}
					if q := m[t]; q != nil {
						q.slots = append(q.slots, p.slots...)
						q.tfs = append(q.tfs, p.tfs...)
						q.df += p.df
					} else {
						m[t] = p
					}
				}
			}
			for _, p := range m {
				if len(p.slots) >= labelCountsMin {
					p.byLabel = x.countLabels(p)
				}
			}
			joined[k] = m
		}()
	}
	wg.Wait()
	all := joined[0]
	if parts > 1 {
		n := 0
		for _, m := range joined {
			n += len(m)
		}
		all = make(map[string]*postingList, n)
		for _, m := range joined {
			for t, p := range m {
				all[t] = p
			}
		}
	}
	x.postings = all
	b.tfs, b.built = nil, true
}
