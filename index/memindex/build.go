package memindex

import (
	"runtime"
	"sync"

	"github.com/cordon-rag/cordon/index"
)

// Builder builds a new index from whole documents faster than Put: the
// per-slot arrays are sized once, and the posting lists, most of the work,
// are built at the end by term id, on GOMAXPROCS goroutines, into one
// array. The index is the one Put would build from the same documents in
// the same order (a cache loading a tenant uses it).
type Builder struct {
	x *Index
	// tfs and ids are the term frequencies and term ids of each slot
	// (x.terms holds the terms), numbered by vocabs[part[s]].
	tfs  [][]int32
	ids  [][]int32
	part []int32
	// vocabs number the slots' terms: vocabs[0] is the builder's own,
	// for Add; AddCounted adds the callers'.
	vocabs []Vocabulary
	own    *ownVocabulary
	// built is set once the posting lists are in x: from then on Add puts
	// documents (a document id that comes again replaces the earlier one,
	// as Put does).
	built bool
}

// A Vocabulary numbers terms: Terms()[id] is the term of id.
// analysis.Vocabulary is one.
type Vocabulary interface{ Terms() []string }

// ownVocabulary numbers the terms of the chunks given to Add.
type ownVocabulary struct {
	ids   map[string]int32
	terms []string
}

func (v *ownVocabulary) Terms() []string { return v.terms }

// number returns the ids of terms, numbering the new ones.
func (v *ownVocabulary) number(terms []string) []int32 {
	ids := make([]int32, len(terms))
	for j, t := range terms {
		id, ok := v.ids[t]
		if !ok {
			id = int32(len(v.terms))
			v.ids[t] = id
			v.terms = append(v.terms, t)
		}
		ids[j] = id
	}
	return ids
}

// NewBuilder returns a builder of an index with settings s, sized for
// about chunks chunks.
func NewBuilder(s index.Settings, chunks int) *Builder {
	x := New(s)
	chunks = max(chunks, 0)
	x.slotChunks = make([]slotChunk, 0, chunks)
	x.alive = make([]bool, 0, chunks)
	x.class = make([]int8, 0, chunks)
	x.barrier = make([]int32, 0, chunks)
	x.asOf = make([]int64, 0, chunks)
	x.length = make([]int32, 0, chunks)
	x.normSq = make([]int64, 0, chunks)
	x.norm = make([]float64, 0, chunks)
	for d := range x.cols {
		x.cols[d] = make([]int8, 0, chunks)
	}
	own := &ownVocabulary{ids: map[string]int32{}}
	return &Builder{x: x, tfs: make([][]int32, 0, chunks), ids: make([][]int32, 0, chunks),
		part: make([]int32, 0, chunks), vocabs: []Vocabulary{own}, own: own}
}

// Add adds a document's chunks (all of one document, as from
// index.Prepare). Until Index, the builder keeps their terms and
// frequencies, not their vectors.
func (b *Builder) Add(docID string, prepared []index.PreparedChunk) {
	if b.adding(docID, prepared) {
		for i := range prepared {
			b.addSlot(&prepared[i], 0, b.own.number(prepared[i].Terms))
		}
		b.addDoc(docID, len(prepared))
	}
}

// AddCounted adds a document's chunks as Add does, whose terms vocab
// numbered: ids[i] are the ids in vocab of prepared[i]'s terms (the ids
// analysis.Vocabulary.CountIDs gives; prepared[i].Terms may be nil). The
// builder reads vocab's terms when it builds the posting lists (in Index,
// or when a document id comes again) and when it puts a document once they
// are built, and vocab must count nothing then; until then it may, for
// documents not yet added. The builder takes ids[i] as the index's terms
// of the chunk, renumbered in place.
func (b *Builder) AddCounted(docID string, prepared []index.PreparedChunk, vocab Vocabulary, ids [][]int32) {
	if _, dup := b.x.docs[docID]; b.built || dup {
		// Put, in adding, reads the terms by name.
		terms := vocab.Terms()
		for i := range prepared {
			if prepared[i].Terms == nil && ids[i] != nil {
				names := make([]string, len(ids[i]))
				for j, id := range ids[i] {
					names[j] = terms[id]
				}
				prepared[i].Terms = names
			}
		}
	}
	if !b.adding(docID, prepared) {
		return
	}
	part := -1
	for k, v := range b.vocabs {
		if v == vocab {
			part = k
			break
		}
	}
	if part < 0 {
		part = len(b.vocabs)
		b.vocabs = append(b.vocabs, vocab)
	}
	for i := range prepared {
		b.addSlot(&prepared[i], int32(part), ids[i])
	}
	b.addDoc(docID, len(prepared))
}

// adding reports whether a document is added to the builder's slots;
// otherwise it was put in the index (a document id that comes again, or
// one after the posting lists were built).
func (b *Builder) adding(docID string, prepared []index.PreparedChunk) bool {
	if !b.built {
		if _, dup := b.x.docs[docID]; !dup {
			return true
		}
		b.buildPostings()
	}
	b.x.Put(docID, prepared)
	return false
}

func (b *Builder) addSlot(pc *index.PreparedChunk, part int32, ids []int32) {
	b.x.addSlot(pc)
	b.tfs = append(b.tfs, pc.TF)
	b.ids = append(b.ids, ids)
	b.part = append(b.part, part)
}

// addDoc records a document of the last n slots.
func (b *Builder) addDoc(docID string, n int) {
	slots := make([]int32, n)
	for i := range slots {
		slots[i] = int32(len(b.ids) - n + i)
	}
	b.x.addDoc(docID, slots)
}

// DropTexts makes the index keep no chunk texts (Index.DropTexts). Call
// it before adding.
func (b *Builder) DropTexts() { b.x.DropTexts() }

// PackedTexts says the chunks given to Add and AddCounted from now on come
// with their texts packed by PackText (a cache's decoding workers pack
// them in parallel). Call it before adding.
func (b *Builder) PackedTexts() { b.x.packedIn = true }

// Index returns the index of the documents added; the builder is done.
func (b *Builder) Index() *Index {
	if !b.built {
		b.buildPostings()
	}
	x := b.x
	b.x = nil
	x.packedIn = false // what Put is given later comes as index.Prepare gives it
	return x
}

// buildPartMin is the fewest slots worth a goroutine of their own in
// buildPostings; tests lower it.
var buildPartMin = 1024

// buildPostings builds the posting lists of every slot added. The slots'
// terms get the index's ids, in order of first occurrence as Put numbers
// them, in place, and become the index's terms of each slot (x.terms). Then each of
// GOMAXPROCS goroutines counts the postings of each term in a range of
// slots, which places every range's postings of a term after those of the
// ranges before it, in one array of all the postings, and each goroutine
// writes its range's there: each list is in slot order, and no list is
// grown or joined.
func (b *Builder) buildPostings() {
	x := b.x
	defer func() { b.tfs, b.ids, b.part, b.vocabs, b.own, b.built = nil, nil, nil, nil, nil, true }()
	// remap[k][id] is the index's id of vocabs[k]'s id, -1 until a slot
	// holds it; one look at each vocabulary's terms finds a term that two
	// of them number.
	global := make(map[string]int32)
	var names []string
	remap := make([][]int32, len(b.vocabs))
	terms := make([][]string, len(b.vocabs))
	for k, v := range b.vocabs {
		terms[k] = v.Terms()
		remap[k] = make([]int32, len(terms[k]))
		for i := range remap[k] {
			remap[k][i] = -1
		}
	}
	for s, ids := range b.ids {
		k := b.part[s]
		r := remap[k]
		for j, id := range ids {
			g := r[id]
			if g < 0 {
				t := terms[k][id]
				var ok bool
				if g, ok = global[t]; !ok {
					g = int32(len(names))
					global[t] = g
					names = append(names, t)
				}
				r[id] = g
			}
			ids[j] = g
		}
	}
	n := len(b.ids)
	parts := max(1, min(runtime.GOMAXPROCS(0), n/buildPartMin))
	bound := func(k int) int { return k * n / parts }
	parallel := func(fn func(k int)) {
		var wg sync.WaitGroup
		for k := range parts {
			wg.Go(func() { fn(k) })
		}
		wg.Wait()
	}
	// counts[k][g]: range k's postings of term g; then, where range k
	// writes its first one.
	counts := make([][]int32, parts)
	parallel(func(k int) {
		c := make([]int32, len(names))
		for s := bound(k); s < bound(k+1); s++ {
			for _, g := range b.ids[s] {
				c[g]++
			}
		}
		counts[k] = c
	})
	start := make([]int, len(names)+1)
	for g := range names {
		at := start[g]
		for k := range parts {
			c := int(counts[k][g])
			counts[k][g] = int32(at)
			at += c
		}
		start[g+1] = at
	}
	slots, tfs := make([]int32, start[len(names)]), make([]uint8, start[len(names)])
	// bigs[k] are range k's postings whose tf does not fit a byte.
	type bigTF struct{ term, at, tf int32 }
	bigs := make([][]bigTF, parts)
	parallel(func(k int) {
		at := counts[k]
		for s := bound(k); s < bound(k+1); s++ {
			tf := b.tfs[s]
			for j, g := range b.ids[s] {
				slots[at[g]], tfs[at[g]] = int32(s), uint8(min(tf[j], tfEscape))
				if tf[j] >= tfEscape {
					bigs[k] = append(bigs[k], bigTF{g, at[g] - int32(start[g]), tf[j]})
				}
				at[g]++
			}
		}
	})
	// The postings written, each slot's ids are the index's terms of it.
	x.terms.build(b.ids, parts, bound, parallel)
	lists := make([]postingList, len(names))
	for _, bs := range bigs {
		for _, e := range bs {
			p := lists[e.term].more()
			if p.big == nil {
				p.big = make(map[int32]int32)
			}
			p.big[e.at] = e.tf
		}
	}
	x.postings, x.lists = make(map[string]*postingList, len(names)), make([]*postingList, len(names))
	for g, t := range names {
		lo, hi := start[g], start[g+1]
		p := &lists[g]
		// Capped: a list that grows later leaves its neighbours alone.
		p.term, p.id, p.slots, p.tfs, p.df = t, int32(g), slots[lo:hi:hi], tfs[lo:hi:hi], int32(hi-lo)
		p.built, p.windows = true, true
		x.postings[t], x.lists[g] = p, p
		x.acct.held += strBytes(t) + bigBytes(len(p.big()))
	}
	// The arrays of every list's header and postings.
	x.acct.held += allocSize(listSize*int64(len(lists))) + postingsBytes(len(slots), len(tfs))
	x.acct.terms, x.acct.termsMap = max(x.acct.terms, len(x.postings)), mapMadeBytes(len(names), postingsSlot)
	// Each list's counts and bounds in one pass over its postings: its
	// bounds (postingList.bound), its documents (every slot is live, so
	// each document holding the term counts) and, for a long list, its
	// postings and documents per label set (what add keeps from a list's
	// labelCountsMin-th posting on), counted by a dense number of each
	// slot's label set instead of in maps.
	sets := make(map[labelSet]int32, len(x.labels))
	var setKeys []labelSet
	lsOf := make([]int32, len(x.class))
	for s := range lsOf {
		ls := labelSet{class: x.class[s], set: x.barrier[s]}
		id, ok := sets[ls]
		if !ok {
			id = int32(len(setKeys))
			sets[ls] = id
			setKeys = append(setKeys, ls)
		}
		lsOf[s] = id
	}
	parallel(func(k int) {
		chunks, docs := make([]int64, len(setKeys)), make([]int64, len(setKeys))
		for g := k * len(lists) / parts; g < (k+1)*len(lists)/parts; g++ {
			x.listStats(&lists[g], lsOf, setKeys, chunks, docs)
		}
	})
	for g := range lists {
		if p := &lists[g]; p.ext != nil {
			x.acct.held += extBytes + allocSize(8*int64(cap(p.ext.bits)))
			if p.ext.byLabel != nil {
				x.acct.held += labelMaps
			}
		}
	}
}

// listStats sets a built list's bounds, document counts and bounds and,
// when it is long, its per-label-set counts; lsOf numbers each slot's label
// set, setKeys are the sets by number, and chunks and docs are zeroed
// scratch of one count per set.
func (x *Index) listStats(p *postingList, lsOf []int32, setKeys []labelSet, chunks, docs []int64) {
	long := len(p.slots) >= labelCountsMin
	slots := p.slots
	p.maxTF, p.minLen = p.tfAt(0), x.length[slots[0]]
	for k := 0; k < len(slots); {
		s, start := slots[k], k
		d, ls, tf := x.docOf[s], lsOf[s], int64(0)
		for ; k < len(slots) && x.docOf[slots[k]] == d; k++ {
			tfk := p.tfAt(k)
			tf += int64(tfk)
			p.maxTF, p.minLen = max(p.maxTF, tfk), min(p.minLen, x.length[slots[k]])
		}
		p.countDoc(tf, x.docLen[d])
		if long {
			// A document's chunks share its labels.
			chunks[ls] += int64(k - start)
			docs[ls]++
		}
	}
	if x.wantBits(len(slots)) {
		p.buildBits()
	}
	if !long {
		return
	}
	e := p.more()
	e.byLabel, e.docByLabel = make(map[labelSet]int64), make(map[labelSet]int64)
	for id, n := range docs {
		if n > 0 {
			e.docByLabel[setKeys[id]] = n
			docs[id] = 0
		}
	}
	for id, n := range chunks {
		if n > 0 {
			e.byLabel[setKeys[id]] = n
			chunks[id] = 0
		}
	}
}
