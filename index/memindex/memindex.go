package memindex

import (
	"container/heap"
	"math"
	"slices"
	"sync"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

type postingList struct {
	slots []int32
	tfs   []int32
	df    int64 // live postings
	// byLabel counts the live postings per label set once the list has
	// labelCountsMin postings, so the entitled scope's df of a common term
	// is a sum over a few label sets instead of a scan of the list.
	byLabel map[labelSet]int64
}

// labelCountsMin is the posting-list length from which a list keeps its
// per-label-set counts; a shorter list is scanned (cheap, and no map). Tests
// lower it.
var labelCountsMin = 2048

// Index is one tenant's chunks.
type Index struct {
	settings index.Settings

	chunks   []cordontype.Chunk // by slot; Text may be empty (see AddOptions)
	alive    []bool
	class    []int8
	barrier  []int32 // interned barrier-set id
	asOf     []int64
	length   []int32
	normSq   []int64
	norm     []float64  // math.Sqrt(float64(normSq)), as hashembed.Cosine computes it
	terms    [][]string // distinct terms of each slot, for removal
	cols     [][]int8   // cols[d][slot]
	overflow map[int32][]int32

	docs map[string][]int32
	// docOf numbers each slot's document; docNames and docLen (the sum of
	// its chunks' lengths) are by number. A document gets a new number at
	// every Put; compaction renumbers. The document ranking accumulates
	// into slices by number.
	docOf    []int32
	docNames []string
	docLen   []int64
	postings map[string]*postingList
	sets     [][]string // barrier sets by id
	setIDs   map[string]int32
	// labels counts live chunks and their length sum per label set
	// (classification, barrier set): the entitled statistics scope sums the
	// sets a principal may see instead of scanning the chunks.
	labels map[labelSet]*labelStats

	live, dead  int
	compactions int // times maybeCompact rebuilt the index
	sumLen      int64

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

type scratch struct {
	lex     []float64
	mark    []bool
	touched []int32
	// Per-query caches by chunk length (see lexical).
	norm, one           []float64
	normStamp, oneStamp []uint64
	stamp               uint64
}

// New returns an empty index with the given settings.
func New(s index.Settings) *Index {
	return &Index{
		settings: s,
		cols:     make([][]int8, s.Dims),
		overflow: make(map[int32][]int32),
		docs:     make(map[string][]int32),
		postings: make(map[string]*postingList),
		setIDs:   make(map[string]int32),
		labels:   make(map[labelSet]*labelStats),
	}
}

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
	return id
}

// Put replaces a document's chunks with prepared (all of one document, as
// from index.Prepare). dropText keeps chunk texts out of memory; a caller
// that does so must fetch texts for the hits it returns.
func (x *Index) Put(docID string, prepared []index.PreparedChunk, dropText bool) {
	x.Remove(docID)
	slots := make([]int32, len(prepared))
	for i := range prepared {
		slots[i] = x.add(&prepared[i], dropText)
	}
	x.addDoc(docID, slots)
	x.maybeCompact()
}

// addDoc records the live slots of document docID under a new number.
func (x *Index) addDoc(docID string, slots []int32) {
	x.docs[docID] = slots
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
	x.labels[labelSet{class: x.class[slots[0]], set: x.barrier[slots[0]]}].docs++
}

func (x *Index) add(pc *index.PreparedChunk, dropText bool) int32 {
	slot := x.addSlot(pc, dropText)
	ls := labelSet{class: x.class[slot], set: x.barrier[slot]}
	for j, t := range pc.Terms {
		p := x.postings[t]
		if p == nil {
			p = &postingList{}
			x.postings[t] = p
		}
		p.slots = append(p.slots, slot)
		p.tfs = append(p.tfs, pc.TF[j])
		p.df++
		switch {
		case p.byLabel != nil:
			p.byLabel[ls]++
		case len(p.slots) >= labelCountsMin:
			p.byLabel = x.countLabels(p)
		}
	}
	return slot
}

// addSlot adds everything of a chunk but its postings, in a new slot.
func (x *Index) addSlot(pc *index.PreparedChunk, dropText bool) int32 {
	slot := int32(len(x.chunks))
	c := pc.Chunk
	if dropText {
		c.Text = ""
	}
	x.chunks = append(x.chunks, c)
	x.alive = append(x.alive, true)
	x.docOf = append(x.docOf, -1)
	x.class = append(x.class, int8(c.Classification))
	x.barrier = append(x.barrier, x.internSet(c.Barriers))
	x.asOf = append(x.asOf, c.AsOfTick)
	x.length = append(x.length, int32(c.Length))
	x.normSq = append(x.normSq, pc.NormSq)
	x.norm = append(x.norm, math.Sqrt(float64(pc.NormSq)))
	x.terms = append(x.terms, pc.Terms)
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
	return slot
}

// Remove deletes a document's chunks. It reports whether it existed.
func (x *Index) Remove(docID string) bool {
	slots, ok := x.docs[docID]
	if !ok {
		return false
	}
	if len(slots) > 0 {
		x.labels[labelSet{class: x.class[slots[0]], set: x.barrier[slots[0]]}].docs--
	}
	for _, s := range slots {
		x.alive[s] = false
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
		for _, t := range x.terms[s] {
			p := x.postings[t]
			p.df--
			if p.df == 0 {
				delete(x.postings, t)
				continue
			}
			if p.byLabel != nil {
				if p.byLabel[ls]--; p.byLabel[ls] == 0 {
					delete(p.byLabel, ls)
				}
			}
		}
		delete(x.overflow, s)
		x.chunks[s] = cordontype.Chunk{}
		x.terms[s] = nil
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
			slots[i] = n.add(&pcs[i], false)
		}
		n.addDoc(id, slots)
	}
	*x = Index{settings: n.settings, chunks: n.chunks, alive: n.alive, class: n.class, barrier: n.barrier,
		docOf: n.docOf, docNames: n.docNames, docLen: n.docLen,
		asOf: n.asOf, length: n.length, normSq: n.normSq, norm: n.norm, terms: n.terms, cols: n.cols, overflow: n.overflow,
		docs: n.docs, postings: n.postings, sets: n.sets, setIDs: n.setIDs, labels: n.labels, live: n.live, sumLen: n.sumLen,
		compactions: old.compactions + 1}
}

// prepared reconstructs a slot's PreparedChunk (for compaction).
func (x *Index) prepared(s int32) index.PreparedChunk {
	pc := index.PreparedChunk{Chunk: x.chunks[s], Terms: x.terms[s], NormSq: x.normSq[s]}
	pc.TF = make([]int32, len(pc.Terms))
	for j, t := range pc.Terms {
		p := x.postings[t]
		for k, ps := range p.slots {
			if ps == s {
				pc.TF[j] = p.tfs[k]
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

func (x *Index) getScratch() *scratch {
	sc, _ := x.pool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	n := len(x.chunks)
	if cap(sc.lex) < n {
		sc.lex = make([]float64, n)
		sc.mark = make([]bool, n)
	}
	sc.lex, sc.mark = sc.lex[:n], sc.mark[:n]
	return sc
}

// normCacheLen bounds the per-query cache of length normalisations; longer
// chunks compute theirs directly.
const normCacheLen = 4096

// filter is one query's pre-filter over slots.
type filter struct {
	x         *Index
	clearance int8
	setOK     []int8 // per barrier-set id: 0 unknown, 1 visible, 2 hidden
	principal []string
	now       int64
	maxStale  *int64
}

// verdict is the pre-filter's decision on one slot (SPEC section 5,
// steps 2-3), in the order the funnel counts them.
type verdict uint8

const (
	keep   verdict = iota // visible and fresh
	hidden                // outside the principal's entitlement
	stale                 // visible, but older than the freshness contract allows
)

// verdict decides slot s.
func (f *filter) verdict(s int32) verdict {
	if !f.visible(f.x.class[s], f.x.barrier[s]) {
		return hidden
	}
	if f.maxStale != nil && f.now-f.x.asOf[s] > *f.maxStale {
		return stale
	}
	return keep
}

// visible is the entitlement predicate for a label set.
func (f *filter) visible(class int8, set int32) bool {
	if class > f.clearance {
		return false
	}
	if f.setOK[set] == 0 {
		f.setOK[set] = 2
		if retrieval.Subset(f.x.sets[set], f.principal) {
			f.setOK[set] = 1
		}
	}
	return f.setOK[set] == 1
}

// admit counts a ranked slot in the funnel (SPEC section 5, steps 2-3) and
// reports whether it survives the pre-filter.
func (f *filter) admit(s int32, rk *retrieval.Rankings) bool {
	rk.Considered++
	switch f.verdict(s) {
	case hidden:
		rk.ExcludedByEntitlement++
		return false
	case stale:
		rk.ExcludedByFreshness++
		return false
	}
	return true
}

// parallelMin is the fewest slots for which Rank scores its two sides on two
// goroutines; tests lower it.
var parallelMin = 32768

// Rank implements the store side of SPEC section 5 (steps 2-4) for one
// tenant: both rankings filtered, counted and truncated. The principal's
// tenant is the caller's business: an Index holds one tenant. On a large
// index the dense side and two halves of the lexical side run in parallel;
// each counts into its own funnel, summed after, so nothing depends on
// scheduling. A dense query of another model than the index's is a
// *retrieval.ModelMismatchError.
func (x *Index) Rank(req retrieval.RankRequest) (retrieval.Rankings, error) {
	q, err := req.QueryVector(x.settings.Spec())
	if err != nil {
		return retrieval.Rankings{}, err
	}
	newFilter := func() *filter { return x.newFilter(&req) }
	var lex, dense retrieval.Rankings
	n := int32(len(x.chunks))
	st := x.scopeStats(req.Terms, req.IDF, newFilter())
	lexical := func(rk *retrieval.Rankings, lo, hi int32) *topN {
		sc := x.getScratch()
		defer x.pool.Put(sc)
		return x.lexical(req, st, newFilter(), sc, rk, lo, hi)
	}
	if n >= int32(parallelMin) {
		// Three tasks for the cores: dense, and the lexical side split by
		// slot range (each chunk's score is still summed in query-term
		// order; the halves' tops are merged under the same total order).
		var wg sync.WaitGroup
		var upper retrieval.Rankings
		var upperTop *topN
		mid := n / 2
		wg.Add(2)
		go func() {
			defer wg.Done()
			dense.Dense = x.dense(req, q, newFilter(), &dense)
		}()
		go func() {
			defer wg.Done()
			upperTop = lexical(&upper, mid, n)
		}()
		top := lexical(&lex, 0, mid)
		wg.Wait()
		for _, it := range upperTop.items {
			top.offer(it.slot, it.score)
		}
		lex.Lexical = top.hits()
		lex.Considered += upper.Considered
		lex.ExcludedByEntitlement += upper.ExcludedByEntitlement
		lex.ExcludedByFreshness += upper.ExcludedByFreshness
	} else {
		lex.Lexical = lexical(&lex, 0, n).hits()
		dense.Dense = x.dense(req, q, newFilter(), &dense)
	}
	var docs []retrieval.DocHit
	if req.Docs {
		docs = x.docRanking(&req, st, newFilter())
	}
	return retrieval.Rankings{
		Lexical:               lex.Lexical,
		Dense:                 dense.Dense,
		Docs:                  docs,
		IDF:                   st.idf,
		Considered:            lex.Considered + dense.Considered,
		ExcludedByEntitlement: lex.ExcludedByEntitlement + dense.ExcludedByEntitlement,
		ExcludedByFreshness:   lex.ExcludedByFreshness + dense.ExcludedByFreshness,
	}, nil
}

func (x *Index) newFilter(req *retrieval.RankRequest) *filter {
	return &filter{x: x, clearance: int8(req.Principal.Clearance), setOK: make([]int8, len(x.sets)),
		principal: req.Principal.Barriers, now: req.NowTick, maxStale: req.MaxStaleTicks}
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
			df = p.df
		case p.byLabel != nil:
			for ls, n := range p.byLabel {
				if f.visible(ls.class, ls.set) {
					df += n
				}
			}
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
// whole contribution by (tf, chunk length) for tf <= cachedTF.
const (
	longPostings = 2048
	cachedTF     = 8
)

// lexical ranks the slots in [lo, hi) (the whole tenant's statistics still
// apply): Rank splits a large index in two and merges the halves' tops. A
// chunk's score sums float64(w * contribution) in term order, w the term's
// weight (1 unless the query was expanded or repeats the term).
func (x *Index) lexical(req retrieval.RankRequest, st scopeStats, f *filter, sc *scratch, rk *retrieval.Rankings, lo, hi int32) *topN {
	top := &topN{k: req.TopN, x: x}
	if st.n == 0 {
		return top
	}
	avgdl := bm25.AvgDL(st.sumLen, st.n)
	params := x.settings.BM25
	// The length normalisation depends only on a chunk's length: compute it
	// once per distinct length (same operations, so the same bits). For a
	// long posting list, a term's contribution depends only on (tf, length):
	// compute it once per pair for small tf. Entries are valid when their
	// stamp is the current one, so nothing is cleared per term.
	if len(sc.norm) < normCacheLen {
		sc.norm, sc.normStamp = make([]float64, normCacheLen), make([]uint64, normCacheLen)
		sc.one, sc.oneStamp = make([]float64, cachedTF*normCacheLen), make([]uint64, cachedTF*normCacheLen)
	}
	sc.stamp++
	normStamp := sc.stamp
	normOf := func(dl int32) float64 {
		if int(dl) >= normCacheLen {
			return bm25.LengthNorm(int64(dl), avgdl, params)
		}
		if sc.normStamp[dl] != normStamp {
			sc.norm[dl], sc.normStamp[dl] = bm25.LengthNorm(int64(dl), avgdl, params), normStamp
		}
		return sc.norm[dl]
	}
	touched := sc.touched[:0]
	defer func() { sc.touched = touched[:0] }()
	for i, t := range req.Terms {
		p := x.postings[t]
		if p == nil {
			continue
		}
		idf, w := st.lex[i], req.Weight(i)
		long := len(p.slots) >= longPostings
		if long {
			sc.stamp++
		}
		oneStamp := sc.stamp
		start, _ := slices.BinarySearch(p.slots, lo)
		for k := start; k < len(p.slots) && p.slots[k] < hi; k++ {
			s := p.slots[k]
			if !x.alive[s] {
				continue
			}
			if !sc.mark[s] {
				sc.mark[s] = true
				sc.lex[s] = 0
				touched = append(touched, s)
			}
			tf, dl := p.tfs[k], x.length[s]
			if long && tf <= cachedTF && int(dl) < normCacheLen {
				i := int(tf-1)*normCacheLen + int(dl)
				if sc.oneStamp[i] != oneStamp {
					sc.one[i], sc.oneStamp[i] = bm25.TermNorm(idf, int64(tf), normOf(dl), params), oneStamp
				}
				sc.lex[s] += float64(w * sc.one[i])
				continue
			}
			sc.lex[s] += float64(w * bm25.TermNorm(idf, int64(tf), normOf(dl), params))
		}
	}
	visit := func(s int32) {
		sc.mark[s] = false
		if score := sc.lex[s]; score > 0 && f.admit(s, rk) {
			top.offer(s, score)
		}
	}
	// Many touched chunks are cheaper to visit in slot order (sequential
	// memory) than in the order they were touched.
	if len(touched) > int(hi-lo)/16 {
		for s := lo; s < hi; s++ {
			if sc.mark[s] {
				visit(s)
			}
		}
	} else {
		for _, s := range touched {
			visit(s)
		}
	}
	return top
}

// denseBlock is how many slots the dense side scores at a time: the block's
// dot products stay in L1 while the query's columns stream past. Tests
// lower it.
var denseBlock = 2048

func (x *Index) dense(req retrieval.RankRequest, q []int32, f *filter, rk *retrieval.Rankings) []retrieval.Hit {
	qn := hashembed.NormSq(q)
	n := len(x.chunks)
	if qn == 0 || n == 0 {
		return nil
	}
	type dim struct {
		col []int8
		w   int64
	}
	var dims []dim
	for d, qv := range q {
		if qv != 0 {
			dims = append(dims, dim{col: x.cols[d], w: int64(qv)})
		}
	}
	// Chunks whose vectors do not fit int8 are scored exactly on their own.
	var over []int32
	for s := range x.overflow {
		over = append(over, s)
	}
	slices.Sort(over)
	qnorm := math.Sqrt(float64(qn))
	top := topN{k: req.TopN, x: x}
	acc := make([]int64, min(denseBlock, n))
	for base := 0; base < n; base += denseBlock {
		end := min(base+denseBlock, n)
		a := acc[:end-base]
		clear(a)
		for _, d := range dims {
			col := d.col[base:end]
			w := d.w
			for i, c := range col {
				a[i] += w * int64(c)
			}
		}
		for len(over) > 0 && int(over[0]) < end {
			a[int(over[0])-base] = hashembed.Dot(q, x.overflow[over[0]])
			over = over[1:]
		}
		for i, dv := range a {
			if dv <= 0 {
				continue
			}
			s := int32(base + i)
			if !x.alive[s] {
				continue
			}
			if f.admit(s, rk) {
				// hashembed.Cosine with both square roots taken once.
				top.offer(s, float64(dv)/float64(qnorm*x.norm[s]))
			}
		}
	}
	return top.hits()
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
	return t.x.chunks[a.slot].ChunkID > t.x.chunks[b.slot].ChunkID
}

func (t *topN) Len() int           { return len(t.items) }
func (t *topN) Less(i, j int) bool { return t.worse(t.items[i], t.items[j]) }
func (t *topN) Swap(i, j int)      { t.items[i], t.items[j] = t.items[j], t.items[i] }
func (t *topN) Push(v any)         { t.items = append(t.items, v.(scored)) }
func (t *topN) Pop() any {
	v := t.items[len(t.items)-1]
	t.items = t.items[:len(t.items)-1]
	return v
}

func (t *topN) offer(s int32, score float64) {
	c := scored{slot: s, score: score}
	if len(t.items) < t.k {
		heap.Push(t, c)
		return
	}
	if t.worse(t.items[0], c) {
		t.items[0] = c
		heap.Fix(t, 0)
	}
}

func (t *topN) hits() []retrieval.Hit {
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
		out[i] = retrieval.Hit{Chunk: t.x.chunks[it.slot], Score: it.score}
	}
	return out
}
