package memindex

import (
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

type postingList struct {
	term string
	id   int32 // its index in Index.lists
	// df counts the live postings, and docDF the live documents holding
	// the term (an index holds fewer than 2^31 slots).
	df, docDF int32
	// maxTF and minLen bound the list's postings, live or dead: the
	// largest tf and the shortest chunk (see lexicalPruned).
	maxTF, minLen int32
	// built is set for a list of a Builder's array of lists, and windows
	// while its slots and tfs are windows of the Builder's arrays of
	// postings: the arrays are counted whole (see listHeld).
	built, windows bool
	slots          []int32
	// tfs are the postings' term frequencies, one byte each: a tf of
	// tfEscape or more is tfEscape here and its value in ext.big, by the
	// posting's index in the list (see tfAt).
	tfs []uint8
	// maxDocTF and minDocLen bound the term's documents, live or dead: the
	// largest tf summed over a document's chunks, and the shortest
	// document (see docPruned).
	maxDocTF  int64
	minDocLen int64
	// ext holds what only long lists, or lists with a tf beyond a byte,
	// need; nil for the others, which are most lists of a real corpus
	// (a rare word, a number, a name), so that their header stays small.
	ext *listExt
}

// listExt is a posting list's part that most lists go without.
type listExt struct {
	// big maps the index in the list of each posting whose tf is
	// tfEscape or more to its tf.
	big map[int32]int32
	// bits has bit s set for each posting's slot s, live or dead, once
	// the list is long against the index (see listBitsMin); lexicalPruned
	// joins such lists a word at a time.
	bits []uint64
	// byLabel counts the live postings per label set once the list has
	// labelCountsMin postings, so the entitled scope's df of a common term
	// is a sum over a few label sets instead of a scan of the list;
	// docByLabel, kept beside it, counts the live documents holding the
	// term per label set (a document's chunks share its labels).
	byLabel, docByLabel map[labelSet]int64
}

// more returns p's extension, adding an empty one if it has none (the
// caller counts it: extSize).
func (p *postingList) more() *listExt {
	if p.ext == nil {
		p.ext = &listExt{}
	}
	return p.ext
}

// bits, big, byLabel and docByLabel read p's extension, nil without one.
func (p *postingList) bits() []uint64 {
	if p.ext == nil {
		return nil
	}
	return p.ext.bits
}

func (p *postingList) big() map[int32]int32 {
	if p.ext == nil {
		return nil
	}
	return p.ext.big
}

func (p *postingList) byLabel() map[labelSet]int64 {
	if p.ext == nil {
		return nil
	}
	return p.ext.byLabel
}

func (p *postingList) docByLabel() map[labelSet]int64 {
	if p.ext == nil {
		return nil
	}
	return p.ext.docByLabel
}

// labelCountsMin is the posting-list length from which a list keeps its
// per-label-set counts; a shorter list is scanned (cheap, and no map). Tests
// lower it.
var labelCountsMin = 2048

// Index is one tenant's chunks.
type Index struct {
	settings index.Settings

	// slotChunks, odd, tenant and sections hold each slot's chunk (see
	// slotChunk and chunk); texts are empty when dropTexts is set.
	slotChunks []slotChunk
	odd        map[int32]*cordontype.Chunk
	tenant     string
	sections   []string
	sectionIDs map[string]int32
	// dropTexts keeps every chunk's text out of memory (see DropTexts).
	dropTexts bool
	// packedIn says the chunks added come with their texts packed
	// already (Builder.PackedTexts); a slot keeps its text packed either
	// way (see PackText).
	packedIn bool
	alive    []bool
	class    []int8
	barrier  []int32 // interned barrier-set id
	asOf     []int64
	length   []int32
	normSq   []int64
	norm     []float64 // math.Sqrt(float64(normSq)), as hashembed.Cosine computes it
	// terms are the ids of each slot's distinct terms (their posting
	// lists in lists), for removal and compaction.
	terms    slotTerms
	cols     [][]int8 // cols[d][slot]
	overflow map[int32][]int32

	docs map[string][]int32
	// docTF is the document being added's summed tf per term id, or the
	// document being removed's term ids (see addDoc and Remove).
	docTF map[int32]int64
	// idBuf holds a slot's term ids while Remove reads them.
	idBuf []int32
	// docOf numbers each slot's document; docNames and docLen (the sum of
	// its chunks' lengths) are by number. A document gets a new number at
	// every Put; compaction renumbers. The document ranking accumulates
	// into slices by number.
	docOf    []int32
	docNames []string
	docLen   []int64
	postings map[string]*postingList
	// lists are the posting lists by id; a list whose last posting was
	// removed is nil, and its term gets a new id if it comes again.
	lists  []*postingList
	sets   [][]string // barrier sets by id
	setIDs map[string]int32
	// labels counts live chunks and their length sum per label set
	// (classification, barrier set): the entitled statistics scope sums the
	// sets a principal may see instead of scanning the chunks.
	labels map[labelSet]*labelStats

	live, dead  int
	compactions int // times maybeCompact rebuilt the index
	acct        accounting

	// vis is the alive bitmap and the principals' visibility bitmaps (see
	// visible).
	vis    visMasks
	sumLen int64

	pool    sync.Pool // *scratch
	docPool sync.Pool // *docScratch
}

type labelSet struct {
	class int8
	set   int32
}

type labelStats struct {
	n, sumLen int64
	docs      int64 // live documents (a document's chunks share its labels)
}

// scratch is one query's buffers, reused across queries through Index.pool:
// the lexical accumulators by slot (the lexical parts own disjoint slot
// ranges of them), the parts' results and each worker's own buffers.
type scratch struct {
	lex  []float64
	mark []bool
	// A combined query's group sums and marks (lexicalCombined), by slot,
	// allocated by the first such query.
	text, field []float64
	gmark       []bool
	over        []int32 // overflow slots, sorted
	parts       []rankPart
	docHits     []retrieval.DocHit // the lexical parts' document hits, joined
	workers     []*worker
	next        atomic.Int32 // the next part to rank
	// vis is the query's principal's visibility bitmap (see visible).
	vis *visMask
	// docPlan is the document ranking's statistics when it is pruned
	// (docPruned), which docPlanned says; the lexical parts then sum no
	// document runs.
	docPlan    docPlan
	docPlanned bool
}

// worker is what one goroutine of a query uses from part to part.
type worker struct {
	f       filter
	spans   []span
	touched []int32
	group   []int32  // lexicalCombined's slots of one group
	acc     []int64  // the dense side's dot products of one block
	acc32   []int32  // the same as int32s (see fitsInt32)
	pos     []uint64 // the block's positive dot products, a bit a slot
	// The block's candidate and stale slots (see blockMasks).
	cand, stale []uint64
	// Per-query caches by chunk length (see lexical).
	norm, one           []float64
	normStamp, oneStamp []uint64
	stamp               uint64
	// lexicalPruned's and docPruned's terms and their order by bound (the
	// lexical parts end before the document parts start).
	prune      []pruneTerm
	pruneBound []int
	union      []uint64  // pruneCount's bitmap of its range
	docTop     []float64 // docPruned's top scores
}

// rankPart is one side's ranking of one slot range, and its funnel counts;
// a lexical part also holds its share of the document ranking (see
// docRuns).
type rankPart struct {
	dense                        bool
	lo, hi                       int32
	top                          topN
	considered, hidden, outdated int
	// runs are the part's document runs of every query term, term by
	// term, the term i's ending at ends[i]; df is per query term, and
	// empty when nothing was counted.
	runs    []docRun
	ends    []int32
	df      []int64
	met     []int32
	group   []int32 // docScoresCombined's documents of one group
	docHits []retrieval.DocHit
}

// reset makes pt an empty part of the range [lo, hi), keeping its memory.
func (pt *rankPart) reset(dense bool, lo, hi int32, k int, x *Index) {
	*pt = rankPart{dense: dense, lo: lo, hi: hi, top: topN{k: k, x: x, items: pt.top.items[:0]},
		runs: pt.runs[:0], ends: pt.ends[:0], df: pt.df[:0], met: pt.met[:0], docHits: pt.docHits[:0]}
}

// New returns an empty index with the given settings.
func New(s index.Settings) *Index {
	return &Index{
		settings: s,
		cols:     make([][]int8, s.Dims),
		overflow: make(map[int32][]int32),
		docs:     make(map[string][]int32),
		docTF:    make(map[int32]int64),
		postings: make(map[string]*postingList),
		setIDs:   make(map[string]int32),
		labels:   make(map[labelSet]*labelStats),
	}
}

// DropTexts makes x keep no chunk text from now on: its hits carry their
// rows' ids (retrieval.Hit.Ref) for the caller to read their texts by.
// Call it on a new index.
func (x *Index) DropTexts() { x.dropTexts = true }

// DropsTexts reports whether x keeps no chunk texts (DropTexts).
func (x *Index) DropsTexts() bool { return x.dropTexts }

// Settings returns the index settings.
func (x *Index) Settings() index.Settings { return x.settings }

// SetStatistics switches the BM25 statistics scope: it decides how queries
// are scored, not what is stored. The caller holds the index exclusively.
func (x *Index) SetStatistics(scope bm25.Scope) { x.settings.Statistics = scope }

// Len is the number of live chunks.
func (x *Index) Len() int { return x.live }

func (x *Index) internSet(labels []string) int32 {
	key := ""
	for _, l := range labels {
		key += l + "\x00"
	}
	if id, ok := x.setIDs[key]; ok {
		return id
	}
	id := int32(len(x.sets))
	x.sets = append(x.sets, labels)
	x.setIDs[key] = id
	x.acct.held += strBytes(key) + labelsBytes(labels)
	return id
}

// PutPacked is Put of chunks whose texts come packed by PackText (a
// cache's decoding workers pack them in parallel).
func (x *Index) PutPacked(docID string, prepared []index.PreparedChunk) {
	was := x.packedIn
	x.packedIn = true
	x.Put(docID, prepared)
	x.packedIn = was
}

// Put replaces a document's chunks with prepared (all of one document, as
// from index.Prepare); an index that drops texts (DropTexts) keeps none of
// theirs.
func (x *Index) Put(docID string, prepared []index.PreparedChunk) {
	x.Remove(docID)
	slots := make([]int32, len(prepared))
	for i := range prepared {
		slots[i] = x.add(&prepared[i])
	}
	x.addDoc(docID, slots)
	x.maybeCompact()
}

// addDoc records the live slots of document docID under a new number.
func (x *Index) addDoc(docID string, slots []int32) {
	x.docs[docID] = slots
	// The id stays held by docNames until compaction, once numbered.
	x.acct.held += strBytes(docID) + allocSize(4*int64(cap(slots)))
	x.acct.docs = max(x.acct.docs, len(x.docs))
	if len(slots) == 0 {
		return
	}
	num := int32(len(x.docNames))
	var n int64
	for _, s := range slots {
		x.docOf[s] = num
		n += int64(x.length[s])
	}
	x.docNames = append(x.docNames, docID)
	x.docLen = append(x.docLen, n)
	ls := labelSet{class: x.class[slots[0]], set: x.barrier[slots[0]]}
	x.labels[ls].docs++
	// Each term's document counts and bounds (Put and compaction add the
	// chunks' postings first; a Builder's lists count their documents as
	// they are built).
	for id, tf := range x.docTF {
		p := x.lists[id]
		p.countDoc(tf, n)
		if m := p.docByLabel(); m != nil {
			m[ls]++
		}
	}
	x.acct.docTF = max(x.acct.docTF, len(x.docTF))
	clear(x.docTF)
}

// countDoc counts a live document of length dl holding p's term tf times.
func (p *postingList) countDoc(tf, dl int64) {
	if p.docDF == 0 && p.maxDocTF == 0 {
		p.maxDocTF, p.minDocLen = tf, dl
	}
	p.docDF++
	p.maxDocTF, p.minDocLen = max(p.maxDocTF, tf), min(p.minDocLen, dl)
}

// countDocLabels counts p's live documents per label set (a document not
// yet numbered, being added, is left to addDoc).
func (x *Index) countDocLabels(p *postingList) map[labelSet]int64 {
	m := make(map[labelSet]int64)
	prev := int32(-1)
	for _, s := range p.slots {
		if d := x.docOf[s]; d >= 0 && d != prev {
			prev = d
			if x.alive[s] {
				m[labelSet{class: x.class[s], set: x.barrier[s]}]++
			}
		}
	}
	return m
}

func (x *Index) add(pc *index.PreparedChunk) int32 {
	slot := x.addSlot(pc)
	ls := labelSet{class: x.class[slot], set: x.barrier[slot]}
	ids := make([]int32, len(pc.Terms))
	for j, t := range pc.Terms {
		p := x.postings[t]
		if p == nil {
			p = &postingList{term: t, id: int32(len(x.lists))}
			x.postings[t] = p
			x.lists = append(x.lists, p)
			x.acct.held += strBytes(t) + allocSize(listSize)
			x.acct.terms = max(x.acct.terms, len(x.postings))
		}
		ids[j] = p.id
		hadExt := p.ext != nil
		slotsCap, tfsCap, bitmap := cap(p.slots), cap(p.tfs), cap(p.bits())
		p.slots = append(p.slots, slot)
		x.acct.held += p.appendTF(pc.TF[j])
		p.bound(pc.TF[j], x.length[slot])
		switch {
		case p.bits() != nil:
			p.ext.bits = setBit(p.ext.bits, slot, true)
		case x.wantBits(len(p.slots)):
			p.buildBits()
		}
		if cap(p.slots) != slotsCap || cap(p.tfs) != tfsCap {
			// Grown: a list's own arrays replace the old ones, or the
			// windows of a Builder's arrays, which stay held (a window
			// is full, so both grow at once).
			if !p.windows {
				x.acct.held -= postingsBytes(slotsCap, tfsCap)
			}
			x.acct.held += postingsBytes(cap(p.slots), cap(p.tfs))
			p.windows = false
		}
		x.acct.held += allocSize(8*int64(cap(p.bits()))) - allocSize(8*int64(bitmap))
		p.df++
		switch {
		case p.byLabel() != nil:
			p.ext.byLabel[ls]++
		case len(p.slots) >= labelCountsMin:
			e := p.more()
			e.byLabel = x.countLabels(p)
			e.docByLabel = x.countDocLabels(p)
			x.acct.held += labelMaps
		}
		if !hadExt && p.ext != nil {
			x.acct.held += extBytes
		}
		// The document's own counts wait for addDoc.
		x.docTF[p.id] += int64(pc.TF[j])
	}
	x.terms.add(ids)
	return slot
}

// tfEscape is the one-byte tf that stands for a tf of tfEscape or more,
// kept in the list's big map.
const tfEscape = 255

// tfAt is the tf of the list's k-th posting.
func (p *postingList) tfAt(k int) int32 {
	return tfOf(p.tfs[k], p.big(), k)
}

// tfOf is the tf a posting's byte b stands for, in a list whose big map
// is big, k being the posting's index in its list.
func tfOf(b uint8, big map[int32]int32, k int) int32 {
	if b != tfEscape {
		return int32(b)
	}
	return big[int32(k)]
}

// appendTF appends a posting's tf to the list (its slot appended already)
// and returns the bytes its big map grew by (not its extension's, which
// the caller counts).
func (p *postingList) appendTF(tf int32) int64 {
	if tf < tfEscape {
		p.tfs = append(p.tfs, uint8(tf))
		return 0
	}
	p.tfs = append(p.tfs, tfEscape)
	e := p.more()
	before := bigBytes(len(e.big))
	if e.big == nil {
		e.big = make(map[int32]int32)
	}
	e.big[int32(len(p.tfs)-1)] = tf
	return bigBytes(len(e.big)) - before
}

// bound counts a posting of tf in a chunk of length dl in p's bounds.
func (p *postingList) bound(tf, dl int32) {
	if len(p.slots) == 1 {
		p.maxTF, p.minLen = tf, dl
		return
	}
	p.maxTF, p.minLen = max(p.maxTF, tf), min(p.minLen, dl)
}

// addSlot adds everything of a chunk but its postings and terms, in a new
// slot.
func (x *Index) addSlot(pc *index.PreparedChunk) int32 {
	slot := int32(len(x.slotChunks))
	c := pc.Chunk
	if x.dropTexts {
		c.Text = ""
	}
	x.alive = append(x.alive, true)
	x.docOf = append(x.docOf, -1)
	x.class = append(x.class, int8(c.Classification))
	x.barrier = append(x.barrier, x.internSet(c.Barriers))
	x.asOf = append(x.asOf, c.AsOfTick)
	x.length = append(x.length, int32(c.Length))
	x.normSq = append(x.normSq, pc.NormSq)
	x.norm = append(x.norm, math.Sqrt(float64(pc.NormSq)))
	x.acct.held += x.setChunk(slot, &c, pc.Ref)
	fits := true
	for _, v := range pc.Vector {
		if v > 127 || v < -128 {
			fits = false
			break
		}
	}
	for d, v := range pc.Vector {
		if !fits {
			v = 0
		}
		x.cols[d] = append(x.cols[d], int8(v))
	}
	if !fits {
		x.overflow[slot] = slices.Clone(pc.Vector)
		x.acct.held += allocSize(4 * int64(cap(x.overflow[slot])))
	}
	x.live++
	x.sumLen += int64(c.Length)
	ls := labelSet{class: x.class[slot], set: x.barrier[slot]}
	st := x.labels[ls]
	if st == nil {
		st = &labelStats{}
		x.labels[ls] = st
	}
	st.n++
	st.sumLen += int64(c.Length)
	x.maskAdd(slot)
	return slot
}

// Remove deletes a document's chunks. It reports whether it existed.
func (x *Index) Remove(docID string) bool {
	slots, ok := x.docs[docID]
	if !ok {
		return false
	}
	if len(slots) > 0 {
		ls := labelSet{class: x.class[slots[0]], set: x.barrier[slots[0]]}
		x.labels[ls].docs--
		// Each of its distinct terms loses a document.
		for _, s := range slots {
			x.idBuf = x.terms.appendIDs(x.idBuf[:0], s)
			for _, id := range x.idBuf {
				if _, dup := x.docTF[id]; dup {
					continue
				}
				x.docTF[id] = 0
				p := x.lists[id]
				p.docDF--
				if m := p.docByLabel(); m != nil {
					if m[ls]--; m[ls] == 0 {
						delete(m, ls)
					}
				}
			}
		}
		x.acct.docTF = max(x.acct.docTF, len(x.docTF))
		clear(x.docTF)
	} else {
		x.acct.held -= strBytes(docID) // not numbered: only docs held it
	}
	x.acct.held -= allocSize(4 * int64(cap(slots)))
	for _, s := range slots {
		x.alive[s] = false
		x.maskRemove(s)
		x.live--
		x.dead++
		x.sumLen -= int64(x.length[s])
		ls := labelSet{class: x.class[s], set: x.barrier[s]}
		if st := x.labels[ls]; st.n == 1 {
			delete(x.labels, ls)
		} else {
			st.n--
			st.sumLen -= int64(x.length[s])
		}
		x.idBuf = x.terms.appendIDs(x.idBuf[:0], s)
		for _, id := range x.idBuf {
			p := x.lists[id]
			p.df--
			if p.df == 0 {
				delete(x.postings, p.term)
				x.lists[id] = nil
				x.acct.held -= p.listHeld()
				continue
			}
			if m := p.byLabel(); m != nil {
				if m[ls]--; m[ls] == 0 {
					delete(m, ls)
				}
			}
		}
		if v, ok := x.overflow[s]; ok {
			x.acct.held -= allocSize(4 * int64(cap(v)))
			delete(x.overflow, s)
		}
		x.acct.held -= x.dropChunk(s)
	}
	delete(x.docs, docID)
	return true
}

// compactMinDead is the fewest dead slots worth a compaction; tests lower it.
var compactMinDead = 1024

// maybeCompact rebuilds the slot arrays once dead slots outnumber live ones,
// so memory and scan time track the live corpus.
func (x *Index) maybeCompact() {
	if x.dead < compactMinDead || x.dead < x.live {
		return
	}
	old := x
	n := New(x.settings)
	n.dropTexts = x.dropTexts
	n.packedIn = true // the texts move as they are held
	docIDs := make([]string, 0, len(old.docs))
	for id := range old.docs {
		docIDs = append(docIDs, id)
	}
	slices.Sort(docIDs)
	for _, id := range docIDs {
		var pcs []index.PreparedChunk
		for _, s := range old.docs[id] {
			pcs = append(pcs, old.prepared(s))
		}
		slots := make([]int32, len(pcs))
		for i := range pcs {
			slots[i] = n.add(&pcs[i])
		}
		n.addDoc(id, slots)
	}
	*x = Index{settings: n.settings, dropTexts: n.dropTexts, packedIn: old.packedIn, slotChunks: n.slotChunks, odd: n.odd, tenant: n.tenant, sections: n.sections, sectionIDs: n.sectionIDs, alive: n.alive, class: n.class, barrier: n.barrier,
		docOf: n.docOf, docNames: n.docNames, docLen: n.docLen,
		asOf: n.asOf, length: n.length, normSq: n.normSq, norm: n.norm, terms: n.terms, cols: n.cols, overflow: n.overflow,
		docs: n.docs, docTF: n.docTF, postings: n.postings, lists: n.lists, sets: n.sets, setIDs: n.setIDs, labels: n.labels, live: n.live, sumLen: n.sumLen,
		vis: visMasks{alive: n.vis.alive}, compactions: old.compactions + 1, acct: n.acct}
}

// prepared reconstructs a slot's PreparedChunk, its text packed (for
// compaction).
func (x *Index) prepared(s int32) index.PreparedChunk {
	ids := x.terms.appendIDs(nil, s)
	pc := index.PreparedChunk{Chunk: x.packedChunk(s), Terms: make([]string, len(ids)), NormSq: x.normSq[s], Ref: x.slotChunks[s].ref}
	pc.TF = make([]int32, len(ids))
	for j, id := range ids {
		p := x.lists[id]
		pc.Terms[j] = p.term
		for k, ps := range p.slots {
			if ps == s {
				pc.TF[j] = p.tfAt(k)
				break
			}
		}
	}
	if v, ok := x.overflow[s]; ok {
		pc.Vector = v
	} else {
		pc.Vector = make([]int32, x.settings.Dims)
		for d := range pc.Vector {
			pc.Vector[d] = int32(x.cols[d][s])
		}
	}
	return pc
}

// getScratch returns a scratch sized for x with workers workers.
func (x *Index) getScratch(workers int) *scratch {
	sc, _ := x.pool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	n := len(x.slotChunks)
	if cap(sc.lex) < n {
		sc.lex = make([]float64, n)
		sc.mark = make([]bool, n)
	}
	sc.lex, sc.mark = sc.lex[:n], sc.mark[:n]
	if sc.text != nil {
		if cap(sc.text) < n {
			sc.text, sc.field, sc.gmark = make([]float64, n), make([]float64, n), make([]bool, n)
		}
		sc.text, sc.field, sc.gmark = sc.text[:n], sc.field[:n], sc.gmark[:n]
	}
	for len(sc.workers) < workers {
		sc.workers = append(sc.workers, &worker{})
	}
	return sc
}

// normCacheLen bounds the per-query cache of length normalisations; longer
// chunks compute theirs directly.
const normCacheLen = 4096

// filter is one query's pre-filter over slots.
type filter struct {
	x *Index
	// x's label and tick columns, read on every ranked slot.
	class     []int8
	barrier   []int32
	asOf      []int64
	clearance int8
	setOK     []int8 // per barrier-set id: 0 unknown, 1 visible, 2 hidden
	principal []string
	now       int64
	// fresh is set when the query has a freshness contract of maxStale
	// ticks.
	fresh    bool
	maxStale int64
}

// visible is the entitlement predicate for a label set; small enough to
// inline into the scoring loops.
func (f *filter) visible(class int8, set int32) bool {
	if class > f.clearance {
		return false
	}
	ok := f.setOK[set]
	if ok == 0 {
		ok = f.learn(set)
	}
	return ok == 1
}

// visibleSum sums the counts of m's label sets the principal may see.
func (f *filter) visibleSum(m map[labelSet]int64) (n int64) {
	for ls, c := range m {
		if f.visible(ls.class, ls.set) {
			n += c
		}
	}
	return n
}

// learn decides and remembers whether the principal holds every label of
// barrier set set. It stays out of line so that visible inlines.
//
//go:noinline
func (f *filter) learn(set int32) int8 {
	f.setOK[set] = 2
	if retrieval.Subset(f.x.sets[set], f.principal) {
		f.setOK[set] = 1
	}
	return f.setOK[set]
}

// b2i is 1 for true, 0 for false (compiled without a branch).
func b2i(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}

// parallelMin is the fewest slots from which Rank spreads a query over
// GOMAXPROCS goroutines; below it the query runs on the caller's alone, so
// a small tenant pays no goroutine and concurrent queries pay nothing. Tests
// lower it.
var parallelMin = 32768

// lexicalParts and denseParts are how many slot ranges of each side a
// large index's query is cut into per goroutine. A lexical part keeps
// per-term caches it fills anew (see lexical), so the lexical side is cut
// no more than the goroutines need, and taken first; the dense side's
// smaller parts, taken after, keep both cores busy to the end when one
// part is slower (a denser range, another process on the core). Tests
// change them.
var lexicalParts, denseParts = 1, 4

// ranking counts the Rank calls running, of every index.
var ranking atomic.Int32

// forceParts cuts a large index's query into parts even on one goroutine;
// tests set it.
var forceParts bool

// Rank implements the store side of SPEC section 5 (steps 2-4) for one
// tenant: both rankings filtered, counted and truncated. The principal's
// tenant is the caller's business: an Index holds one tenant. Each side is
// ranked in parts by slot range, one part on a large index per goroutine at
// a time, taken in turn; a part keeps its own top list and funnel counts,
// merged in part order after, and a chunk's BM25 score is summed in one
// part in query-term order, so nothing depends on scheduling. A dense query
// of another model than the index's is a *retrieval.ModelMismatchError.
func (x *Index) Rank(req retrieval.RankRequest) (retrieval.Rankings, error) {
	q, err := req.QueryVector(x.settings.Spec())
	if err != nil {
		return retrieval.Rankings{}, err
	}
	n := int32(len(x.slotChunks))
	req.Combined = req.Combined.ForTenant(x.settings.Stems(), x.settings.NormFields())
	f := x.newFilter(&req)
	st := x.scopeStats(req.Terms, req.IDF, f)
	// A large index's query takes the cores no other query is ranking on:
	// concurrent queries gain nothing from sharing each other's cores, and
	// would pay the parts' overhead.
	others := int(ranking.Add(1)) - 1
	defer ranking.Add(-1)
	workers, lexN, denseN := 1, 1, 1
	if n >= int32(parallelMin) {
		workers = max(1, runtime.GOMAXPROCS(0)-others)
		if workers > 1 || forceParts {
			lexN, denseN = min(int(n), workers*lexicalParts), min(int(n), workers*denseParts)
		}
	}
	sc := x.getScratch(workers)
	defer x.pool.Put(sc)
	sc.vis = x.visible(f)
	sc.docPlanned = false
	if req.Combined != nil && sc.text == nil {
		sc.text, sc.field, sc.gmark = make([]float64, n), make([]float64, n), make([]bool, n)
	}
	if req.Docs {
		sc.docPlan, sc.docPlanned = x.docPlanFor(&req, st, f, sc.vis)
	}
	defer func() { sc.vis = nil }()
	dq := x.denseQuery(q, sc)
	sc.parts = slices.Grow(sc.parts[:0], lexN+denseN)[:lexN+denseN]
	for k := range lexN + denseN {
		parts, i, dense := lexN, k, k >= lexN
		if dense {
			parts, i = denseN, k-lexN
		}
		lo, hi := int32(int64(i)*int64(n)/int64(parts)), int32(int64(i+1)*int64(n)/int64(parts))
		if dense {
			// A dense part starts on a word of the bitmaps (see dense).
			lo, hi = lo&^63, hi&^63
			if i == parts-1 {
				hi = n
			}
		} else {
			// A lexical part holds whole documents (see docRuns).
			lo, hi = x.docStart(lo), x.docStart(hi)
		}
		sc.parts[k].reset(dense, lo, hi, req.TopN, x)
	}
	sc.spread(workers, len(sc.parts), func(w *worker, k int) {
		pt := &sc.parts[k]
		if pt.dense {
			x.dense(dq, w, sc, pt)
		} else {
			x.lexical(&req, st, w, sc, pt)
		}
	}, func(w *worker) { w.f.reset(x, &req) })
	rk := retrieval.Rankings{IDF: st.idf}
	lex, dense := topN{k: req.TopN, x: x}, topN{k: req.TopN, x: x}
	for i := range sc.parts {
		pt := &sc.parts[i]
		rk.Considered += pt.considered
		rk.ExcludedByEntitlement += pt.hidden
		rk.ExcludedByFreshness += pt.outdated
		into := &lex
		if pt.dense {
			into = &dense
		}
		if pt.dense && denseN == 1 || !pt.dense && lexN == 1 {
			*into = pt.top
			continue
		}
		for _, it := range pt.top.items {
			into.offer(it.slot, it.score)
		}
	}
	rk.Lexical = lex.hits(req.LazyTexts)
	if dq.qn != 0 && n != 0 {
		rk.Dense = dense.hits(req.LazyTexts)
	}
	if req.LazyTexts {
		rk.Unpack = UnpackText
	}
	switch {
	case req.Docs && sc.docPlanned:
		rk.Docs = x.docRankingPruned(&req, f, workers, sc, lexN)
	case req.Docs:
		rk.Docs = x.docRanking(&req, st, workers, sc, lexN)
	}
	rk.Stemmed = x.settings.Stems()
	return rk, nil
}

// docRanking is stage 2 of the document ranking (see docRuns) over the
// first lexN parts of sc, which stage 1 counted, on workers goroutines.
func (x *Index) docRanking(req *retrieval.RankRequest, st scopeStats, workers int, sc *scratch, lexN int) []retrieval.DocHit {
	n, idf := x.docScope(req, x.newFilter(req), sc.parts[:lexN])
	if n == 0 {
		return []retrieval.DocHit{}
	}
	avgdl := bm25.AvgDL(st.sumLen, n)
	ds := x.getDocScratch()
	defer x.docPool.Put(ds)
	sc.spread(min(workers, lexN), lexN, func(_ *worker, k int) {
		x.docScores(req, idf, avgdl, ds, &sc.parts[k])
	}, nil)
	hits := sc.parts[0].docHits
	if lexN > 1 {
		hits = sc.docHits[:0]
		for k := range lexN {
			hits = append(hits, sc.parts[k].docHits...)
		}
		sc.docHits = hits
	}
	// The top list may alias the pooled hits: the caller gets a copy.
	return slices.Clip(slices.Clone(retrieval.TopDocs(hits, req.TopN)))
}

// docRankingPruned is the document ranking by docPruned over the first
// lexN parts of sc, on workers goroutines.
func (x *Index) docRankingPruned(req *retrieval.RankRequest, f *filter, workers int, sc *scratch, lexN int) []retrieval.DocHit {
	sc.spread(min(workers, lexN), lexN, func(w *worker, k int) {
		x.docPruned(req, sc.docPlan, sc.vis, f, w, &sc.parts[k])
	}, nil)
	hits := sc.docHits[:0]
	for k := range lexN {
		hits = append(hits, sc.parts[k].docHits...)
	}
	sc.docHits = hits
	return slices.Clip(slices.Clone(retrieval.TopDocs(hits, req.TopN)))
}

// spread runs do(w, k) for every task k in [0, tasks), on workers
// goroutines (the caller's among them) taking tasks in turn, each with its
// own worker, which start (when not nil) prepares first.
func (sc *scratch) spread(workers, tasks int, do func(w *worker, k int), start func(w *worker)) {
	sc.next.Store(0)
	run := func(w *worker) {
		if start != nil {
			start(w)
		}
		for {
			k := int(sc.next.Add(1)) - 1
			if k >= tasks {
				return
			}
			do(w, k)
		}
	}
	if workers <= 1 {
		run(sc.workers[0])
		return
	}
	var wg sync.WaitGroup
	for _, w := range sc.workers[1:workers] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(w)
		}()
	}
	run(sc.workers[0])
	wg.Wait()
}

func (x *Index) newFilter(req *retrieval.RankRequest) *filter {
	f := &filter{}
	f.reset(x, req)
	return f
}

// reset makes f req's filter over x, reusing its memory.
func (f *filter) reset(x *Index, req *retrieval.RankRequest) {
	setOK := f.setOK
	if cap(setOK) < len(x.sets) {
		setOK = make([]int8, len(x.sets))
	}
	setOK = setOK[:len(x.sets)]
	clear(setOK)
	*f = filter{x: x, class: x.class, barrier: x.barrier, asOf: x.asOf, clearance: int8(req.Principal.Clearance), setOK: setOK,
		principal: req.Principal.Barriers, now: req.NowTick}
	if req.MaxStaleTicks != nil {
		f.fresh, f.maxStale = true, *req.MaxStaleTicks
	}
}

// IDF is each term's idf under p's statistics scope, as Rank computes it
// (the retriever's query expansion asks for it).
func (x *Index) IDF(p cordontype.Principal, terms []string) []float64 {
	return x.scopeStats(terms, bm25.IDFPlusOne, x.newFilter(&retrieval.RankRequest{Principal: p})).idf
}

// scopeStats are the BM25 statistics of one query's scope (SPEC section 4).
type scopeStats struct {
	n, sumLen int64
	idf       []float64 // per query term: SPEC's (Rankings.IDF, the reranker's)
	lex       []float64 // per query term: the lexical ranking's (the request's kind)
}

// countLabels counts p's live postings per label set.
func (x *Index) countLabels(p *postingList) map[labelSet]int64 {
	m := make(map[labelSet]int64)
	for _, s := range p.slots {
		if x.alive[s] {
			m[labelSet{class: x.class[s], set: x.barrier[s]}]++
		}
	}
	return m
}

// scopeStats takes N and the length sum from the label-set counters and
// each query term's df from its posting list: all live postings under the
// tenant scope, or under the entitled scope only those of chunks the
// principal may see (freshness does not narrow it). When every label set
// is visible the two scopes agree and nothing is scanned.
func (x *Index) scopeStats(terms []string, kind bm25.IDFKind, f *filter) scopeStats {
	w := bm25.NewIDFs(kind, len(terms))
	st := scopeStats{n: int64(x.live), sumLen: x.sumLen, idf: w.IDF, lex: w.Lex}
	all := true
	if x.settings.Statistics.Entitled() {
		st.n, st.sumLen = 0, 0
		for ls, c := range x.labels {
			if f.visible(ls.class, ls.set) {
				st.n += c.n
				st.sumLen += c.sumLen
			} else {
				all = false
			}
		}
	}
	for i, t := range terms {
		p := x.postings[t]
		var df int64
		switch {
		case p == nil:
		case all:
			df = int64(p.df)
		case p.byLabel() != nil:
			df = f.visibleSum(p.byLabel())
		default:
			for _, s := range p.slots {
				if x.alive[s] && f.visible(x.class[s], x.barrier[s]) {
					df++
				}
			}
		}
		w.Set(i, st.n, df)
	}
	return st
}

// longPostings is the posting-list length from which lexical caches a term's
// whole contribution by (tf, chunk length) for tf <= cachedTF. Tests lower
// it.
var longPostings = 2048

const cachedTF = 8

// visitOrder decides how lexical visits a range: 0 by the share of
// postings, 1 always in slot order, 2 always the touched slots. Tests set
// it.
var visitOrder = 0

// lexicalCombined is lexical's sums under c (SPEC section 4, "Combined
// terms"): group by group, each member's postings in spans add
// float64(coef * tf) to the slot's text or field sum in member order,
// then every slot the group touched adds the group's contribution to its
// lexical sum and is reset. Slots not yet marked are appended to touched
// unless scan; it returns touched.
func (x *Index) lexicalCombined(c *retrieval.Combined, st scopeStats, w *worker, sc *scratch, spans []span, normOf func(int32) float64, scan bool, touched []int32) []int32 {
	params := x.settings.BM25
	lex, mark, alive, length := sc.lex, sc.mark, x.alive, x.length
	text, field, gmark := sc.text, sc.field, sc.gmark
	checkAlive := x.dead > 0
	group := w.group[:0]
	defer func() { w.group = group[:0] }()
	for gi := range c.Groups {
		g := &c.Groups[gi]
		group = group[:0]
		for _, m := range g.Members {
			sp := spans[m.Term]
			if sp.p == nil {
				continue
			}
			sum := text
			if m.Field {
				sum = field
			}
			slots, tfs, big := sp.p.slots[sp.start:sp.end], sp.p.tfs[sp.start:sp.end], sp.p.big()
			tfs = tfs[:len(slots)]
			for k, s := range slots {
				if checkAlive && !alive[s] {
					continue
				}
				if !gmark[s] {
					gmark[s] = true
					group = append(group, s)
				}
				sum[s] += float64(m.Coef * float64(tfOf(tfs[k], big, sp.start+k)))
			}
		}
		idf := st.lex[g.IDF]
		for _, s := range group {
			gmark[s] = false
			norm := normOf(length[s])
			ptf := c.Combine(text[s], field[s], norm)
			text[s], field[s] = 0, 0
			if !(ptf > 0) {
				continue
			}
			if !scan && !mark[s] {
				mark[s] = true
				touched = append(touched, s)
			}
			lex[s] += float64(g.Weight * bm25.TermNormF(idf, ptf, norm, params))
		}
	}
	return touched
}

// lexical ranks the slots of pt's range (the whole tenant's statistics
// still apply) into pt, with w's buffers and filter and the range's share
// of sc's accumulators. A chunk's score sums float64(w * contribution) in
// term order, w the term's weight (1 unless the query was expanded or
// repeats the term).
func (x *Index) lexical(req *retrieval.RankRequest, st scopeStats, w *worker, sc *scratch, pt *rankPart) {
	if st.n == 0 {
		return
	}
	lo, hi := pt.lo, pt.hi
	avgdl := bm25.AvgDL(st.sumLen, st.n)
	params := x.settings.BM25
	// The length normalisation depends only on a chunk's length: compute it
	// once per distinct length (same operations, so the same bits). For a
	// long posting list, a term's contribution depends only on (tf, length):
	// compute it once per pair for small tf. Entries are valid when their
	// stamp is the current one, so nothing is cleared per term.
	if len(w.norm) < normCacheLen {
		w.norm, w.normStamp = make([]float64, normCacheLen), make([]uint64, normCacheLen)
		w.one, w.oneStamp = make([]float64, cachedTF*normCacheLen), make([]uint64, cachedTF*normCacheLen)
	}
	w.stamp++
	normStamp := w.stamp
	normOf := func(dl int32) float64 {
		if int(dl) >= normCacheLen {
			return bm25.LengthNorm(int64(dl), avgdl, params)
		}
		if w.normStamp[dl] != normStamp {
			w.norm[dl], w.normStamp[dl] = bm25.LengthNorm(int64(dl), avgdl, params), normStamp
		}
		return w.norm[dl]
	}
	lex, mark, alive, length := sc.lex, sc.mark, x.alive, x.length
	// Each term's postings in the range, and how many there are: when they
	// are many against the range, the range is visited in slot order
	// (sequential memory) and a slot is ranked when its sum is not zero;
	// otherwise the slots touched are marked and listed. Either way every
	// sum goes back to zero when visited, so the accumulators are all zero
	// between queries.
	spans := w.spans[:0]
	total := 0
	for _, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			spans = append(spans, span{})
			continue
		}
		start, _ := slices.BinarySearch(p.slots, lo)
		end := len(p.slots)
		if hi < x.lastSlot() {
			end, _ = slices.BinarySearch(p.slots, hi)
		}
		spans = append(spans, span{p: p, start: start, end: end})
		total += end - start
	}
	w.spans = spans[:0]
	if req.Docs && !sc.docPlanned {
		x.docRuns(spans, x.settings.Statistics.Entitled(), sc.vis, w, pt)
	}
	scan := total > int(hi-lo)/16
	if visitOrder != 0 {
		scan = visitOrder == 1
	}
	if scan && total >= pruneMin {
		if c := req.Combined; c != nil && x.lexicalCombinedPruned(c, st, w, sc, pt, spans, normOf) ||
			c == nil && x.lexicalPruned(req, st, w, sc, pt, spans, normOf) {
			return
		}
	}
	checkAlive := x.dead > 0
	touched := w.touched[:0]
	defer func() { w.touched = touched[:0] }()
	if req.Combined != nil {
		// The groups sum every term's postings: the term-by-term loop
		// below has nothing left to add.
		touched = x.lexicalCombined(req.Combined, st, w, sc, spans, normOf, scan, touched)
		spans = nil
	}
	for i, sp := range spans {
		p := sp.p
		if p == nil {
			continue
		}
		idf, wt := st.lex[i], req.Weight(i)
		long := len(p.slots) >= longPostings
		if long {
			w.stamp++
		}
		oneStamp := w.stamp
		slots, tfs, big := p.slots[sp.start:sp.end], p.tfs[sp.start:sp.end], p.big()
		tfs = tfs[:len(slots)]
		for k, s := range slots {
			if checkAlive && !alive[s] {
				continue
			}
			if !scan && !mark[s] {
				mark[s] = true
				touched = append(touched, s)
			}
			tf, dl := tfOf(tfs[k], big, sp.start+k), length[s]
			if long && tf <= cachedTF && int(dl) < normCacheLen {
				i := int(tf-1)*normCacheLen + int(dl)
				if w.oneStamp[i] != oneStamp {
					w.one[i], w.oneStamp[i] = bm25.TermNorm(idf, int64(tf), normOf(dl), params), oneStamp
				}
				lex[s] += float64(wt * w.one[i])
				continue
			}
			lex[s] += float64(wt * bm25.TermNorm(idf, int64(tf), normOf(dl), params))
		}
	}
	// The pre-filter (SPEC section 5, steps 2-3: hidden when outside the
	// principal's entitlement, else outdated when older than the freshness
	// contract allows), written out here, in dense and in docRuns (a call
	// per ranked slot costs about as much as the filter), its counts in
	// locals.
	f := &w.f
	class, barrier, asOf, setOK := f.class, f.barrier, f.asOf, f.setOK
	clearance, fresh, now, maxStale := f.clearance, f.fresh, f.now, f.maxStale
	considered, hidden, outdated := 0, 0, 0
	floor := pt.top.floor()
	// Visit the range's slots in slot order, or only those touched.
	visits := len(touched)
	if scan {
		visits = int(hi - lo)
	}
	for j := range visits {
		var s int32
		if scan {
			s = lo + int32(j)
		} else {
			s = touched[j]
			mark[s] = false
		}
		score := lex[s]
		if score == 0 {
			continue
		}
		lex[s] = 0
		if !(score > 0) {
			continue
		}
		set := barrier[s]
		ok := setOK[set]
		if ok == 0 {
			ok = f.learn(set)
		}
		hid := b2i(class[s] > clearance) | b2i(ok != 1)
		old := b2i(fresh && now-asOf[s] > maxStale) &^ hid
		considered++
		hidden += hid
		outdated += old
		if hid|old == 0 && score >= floor {
			pt.top.offer(s, score)
			floor = pt.top.floor()
		}
	}
	pt.considered += considered
	pt.hidden += hidden
	pt.outdated += outdated
}

// span is the part of a posting list in one slot range.
type span struct {
	p          *postingList
	start, end int
}

// lastSlot is one past the last slot.
func (x *Index) lastSlot() int32 { return int32(len(x.slotChunks)) }

// denseQuery is what every dense part of one query reads.
type denseQuery struct {
	q     []int32
	qn    int64
	qnorm float64
	dims  []dim
	over  []int32 // overflow slots, sorted
	// fits32 says the int32 kernels may score the query, on g32.
	fits32 bool
	g32    dims32
}

// dim is one nonzero dimension of the query: its column and weight.
type dim struct {
	col []int8
	w   int64
}

func (x *Index) denseQuery(q []int32, sc *scratch) *denseQuery {
	dq := &denseQuery{q: q, qn: hashembed.NormSq(q)}
	if dq.qn == 0 {
		return dq
	}
	dq.qnorm = math.Sqrt(float64(dq.qn))
	for d, qv := range q {
		if qv != 0 {
			dq.dims = append(dq.dims, dim{col: x.cols[d], w: int64(qv)})
		}
	}
	if kernel32 && fitsInt32(dq.dims) {
		dq.fits32, dq.g32 = true, group32(dq.dims)
	}
	// Chunks whose vectors do not fit int8 are scored exactly on their own.
	over := sc.over[:0]
	for s := range x.overflow {
		over = append(over, s)
	}
	slices.Sort(over)
	sc.over, dq.over = over, over
	return dq
}

// denseBlock is how many slots the dense side scores at a time: the block's
// dot products stay in L1 while the query's columns stream past. Tests
// lower it; dense rounds it up to a multiple of 64.
var denseBlock = 2048

// dense ranks the slots of pt's range (which starts on a multiple of 64)
// by cosine into pt. A block's slots with a positive dot product are
// counted against the alive bitmap and the principal's visibility bitmap
// 64 at a time; only the visible ones are checked for freshness and
// scored. A block holding no overflow slot is scored with int32 sums when
// the query allows them (see fitsInt32), else with int64 sums.
func (x *Index) dense(dq *denseQuery, w *worker, sc *scratch, pt *rankPart) {
	if dq.qn == 0 {
		return
	}
	lo, hi := int(pt.lo), int(pt.hi)
	over := dq.over
	k, _ := slices.BinarySearch(over, pt.lo)
	over = over[k:]
	block := (max(denseBlock, 1) + 63) &^ 63
	if len(w.acc) < block {
		w.acc, w.acc32 = make([]int64, block), make([]int32, block)
		w.pos, w.cand, w.stale = make([]uint64, block/64), make([]uint64, block/64), make([]uint64, block/64)
	}
	st := denseState{x: x, f: &w.f, vis: sc.vis.bits, qnorm: dq.qnorm, pt: pt, floor: pt.top.floor()}
	for base := lo; base < hi; base += block {
		end := min(base+block, hi)
		pos := w.pos[:(end-base+63)/64]
		if dq.fits32 && (len(over) == 0 || int(over[0]) >= end) {
			a := w.acc32[:end-base]
			dotBlock32(a, dq.g32, base, end)
			posWords32(a, pos)
			if kernelAsm {
				m := &blockMasks{cand: w.cand[:len(pos)], stale: w.stale[:len(pos)]}
				st.blockMasks(a, base, m.cand, m.stale)
				scoreBlock(&st, a, pos, m, base)
				continue
			}
			scoreBlock(&st, a, pos, nil, base)
			continue
		}
		a := w.acc[:end-base]
		dotBlock(a, dq.dims, base, end)
		for len(over) > 0 && int(over[0]) < end {
			a[int(over[0])-base] = hashembed.Dot(dq.q, x.overflow[over[0]])
			over = over[1:]
		}
		posWords64(a, pos)
		scoreBlock(&st, a, pos, nil, base)
	}
	pt.considered += st.considered
	pt.hidden += st.hidden
	pt.outdated += st.outdated
}

// denseState is what dense's blocks share: the query's filter and norm,
// the part's floor and its funnel counts.
type denseState struct {
	x                            *Index
	f                            *filter
	vis                          []uint64
	qnorm, floor                 float64
	pt                           *rankPart
	considered, hidden, outdated int
}

// blockMasks are a block's candidate and stale slots, a bit a slot (see
// denseState.blockMasks).
type blockMasks struct{ cand, stale []uint64 }

// scoreBlock counts and scores the block of slots from base whose dot
// products are a and whose positive ones are the bits of pos; with m, only
// m's candidates are scored and m's stale bits are the outdated slots.
func scoreBlock[T int32 | int64](st *denseState, a []T, pos []uint64, m *blockMasks, base int) {
	x, f, vis, pt := st.x, st.f, st.vis, st.pt
	alive, asOf, norm := x.vis.alive, x.asOf, x.norm
	fresh, now, maxStale := f.fresh, f.now, f.maxStale
	qnorm, floor := st.qnorm, st.floor
	considered, hidden, outdated := 0, 0, 0
	for j, pw := range pos {
		g := base>>6 + j
		p := pw & alive[g]
		if p == 0 {
			continue
		}
		v := p & vis[g]
		considered += bits.OnesCount64(p)
		hidden += bits.OnesCount64(p &^ v)
		check := fresh
		if m != nil {
			if fresh {
				o := v & m.stale[j]
				outdated += bits.OnesCount64(o)
				v &^= o
			}
			v &= m.cand[j]
			check = false
		}
		for ; v != 0; v &= v - 1 {
			i := j<<6 + bits.TrailingZeros64(v)
			s := base + i
			if check && now-asOf[s] > maxStale {
				outdated++
				continue
			}
			dv := float64(a[i])
			if dv < bar(qnorm, floor, norm[s]) {
				continue
			}
			den := float64(qnorm * norm[s])
			// hashembed.Cosine with both square roots taken once.
			if score := dv / den; score >= floor {
				pt.top.offer(int32(s), score)
				floor = pt.top.floor()
			}
		}
	}
	st.floor = floor
	st.considered += considered
	st.hidden += hidden
	st.outdated += outdated
}

// dotBlock sets a to the dot products of the slots [base, end) with the
// query on dims; integer sums, so the grouping of the additions does not
// change them.
func dotBlock(a []int64, dims []dim, base, end int) {
	clear(a)
	for ; len(dims) >= 4; dims = dims[4:] {
		c0, c1, c2, c3 := dims[0].col[base:end], dims[1].col[base:end], dims[2].col[base:end], dims[3].col[base:end]
		w0, w1, w2, w3 := dims[0].w, dims[1].w, dims[2].w, dims[3].w
		a, c1, c2, c3 := a[:len(c0)], c1[:len(c0)], c2[:len(c0)], c3[:len(c0)]
		for i, v := range c0 {
			a[i] += w0*int64(v) + w1*int64(c1[i]) + w2*int64(c2[i]) + w3*int64(c3[i])
		}
	}
	switch len(dims) {
	case 3:
		c0, c1, c2 := dims[0].col[base:end], dims[1].col[base:end], dims[2].col[base:end]
		w0, w1, w2 := dims[0].w, dims[1].w, dims[2].w
		a, c1, c2 := a[:len(c0)], c1[:len(c0)], c2[:len(c0)]
		for i, v := range c0 {
			a[i] += w0*int64(v) + w1*int64(c1[i]) + w2*int64(c2[i])
		}
	case 2:
		c0, c1 := dims[0].col[base:end], dims[1].col[base:end]
		w0, w1 := dims[0].w, dims[1].w
		a, c1 := a[:len(c0)], c1[:len(c0)]
		for i, v := range c0 {
			a[i] += w0*int64(v) + w1*int64(c1[i])
		}
	case 1:
		c0, w0 := dims[0].col[base:end], dims[0].w
		a := a[:len(c0)]
		for i, v := range c0 {
			a[i] += w0 * int64(v)
		}
	}
}

// topN keeps the k best (score desc, chunk id asc) slots in a heap whose root
// is the worst kept.
type topN struct {
	k     int
	x     *Index
	items []scored
}

type scored struct {
	slot  int32
	score float64
}

// worse reports whether a ranks after b in the result order.
func (t *topN) worse(a, b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return t.x.chunkIDAfter(a.slot, b.slot)
}

// offer keeps slot s with score if it ranks among the k best so far.
func (t *topN) offer(s int32, score float64) {
	c := scored{slot: s, score: score}
	if len(t.items) < t.k {
		// Sift up.
		t.items = append(t.items, c)
		i := len(t.items) - 1
		for i > 0 {
			p := (i - 1) / 2
			if !t.worse(t.items[i], t.items[p]) {
				break
			}
			t.items[i], t.items[p] = t.items[p], t.items[i]
			i = p
		}
		return
	}
	if t.k == 0 || !t.worse(t.items[0], c) {
		return
	}
	// Replace the root and sift down.
	t.items[0] = c
	n := len(t.items)
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && t.worse(t.items[r], t.items[l]) {
			m = r
		}
		if !t.worse(t.items[m], t.items[i]) {
			break
		}
		t.items[i], t.items[m] = t.items[m], t.items[i]
		i = m
	}
}

// floor is the lowest score that may still enter the list: a score below
// it ranks after everything a full list holds whatever its chunk. The
// callers keep it in a local and skip offer below it.
func (t *topN) floor() float64 {
	if len(t.items) < t.k || t.k == 0 {
		return math.Inf(-1)
	}
	return t.items[0].score
}

// hits returns t's items as hits, best first, their texts packed
// (Hit.Packed) when lazy.
func (t *topN) hits(lazy bool) []retrieval.Hit {
	slices.SortFunc(t.items, func(a, b scored) int {
		switch {
		case t.worse(b, a):
			return -1
		case t.worse(a, b):
			return 1
		}
		return 0
	})
	out := make([]retrieval.Hit, len(t.items))
	for i, it := range t.items {
		h := retrieval.Hit{Score: it.score, Ref: t.x.slotChunks[it.slot].ref}
		if lazy {
			h.Chunk = t.x.packedChunk(it.slot)
			h.Packed, h.Chunk.Text = h.Chunk.Text, ""
		} else {
			h.Chunk = t.x.chunk(it.slot)
		}
		out[i] = h
	}
	return out
}
