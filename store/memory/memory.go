package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

var (
	_ retrieval.Store         = (*Store)(nil)
	_ retrieval.QueryEmbedder = (*Store)(nil)
)

// Store is the in-memory store. Every tenant uses the same index settings.
type Store struct {
	settings index.Settings
	models   *embed.Registry

	mu      sync.RWMutex
	tenants map[string]*tenant
}

type tenant struct {
	docs     map[string][]string // doc id -> chunk ids
	chunks   map[string]*index.PreparedChunk
	postings map[string]map[string]int64 // term -> chunk id -> tf
	sumLen   int64
}

// New returns an empty store with the given settings.
func New(s index.Settings) (*Store, error) { return NewWithModels(s, nil) }

// NewWithModels returns an empty store whose settings may name an embedding
// model other than hashing: models serves it (document vectors at Put).
func NewWithModels(s index.Settings, models *embed.Registry) (*Store, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := models.Check(s.Spec()); err != nil {
		return nil, err
	}
	return &Store{settings: s, models: models, tenants: make(map[string]*tenant)}, nil
}

// Settings returns the store's index settings.
func (s *Store) Settings() index.Settings { return s.settings }

// Put validates, chunks and stores doc, replacing any document with the same
// id in its tenant atomically. It returns the new chunks.
func (s *Store) Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error) {
	prepared, err := index.Prepare(&doc, s.settings)
	if err != nil {
		return nil, err
	}
	if err := index.Vectorize(ctx, s.models, s.settings.Spec(), prepared); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[doc.Tenant]
	if t == nil {
		t = &tenant{
			docs:     make(map[string][]string),
			chunks:   make(map[string]*index.PreparedChunk),
			postings: make(map[string]map[string]int64),
		}
		s.tenants[doc.Tenant] = t
	}
	t.remove(doc.DocID)
	ids := make([]string, len(prepared))
	out := make([]cordontype.Chunk, len(prepared))
	for i := range prepared {
		pc := &prepared[i]
		id := pc.Chunk.ChunkID
		ids[i] = id
		out[i] = pc.Chunk
		t.chunks[id] = pc
		t.sumLen += int64(pc.Chunk.Length)
		for j, term := range pc.Terms {
			p := t.postings[term]
			if p == nil {
				p = make(map[string]int64)
				t.postings[term] = p
			}
			p[id] = int64(pc.TF[j])
		}
	}
	t.docs[doc.DocID] = ids
	return out, nil
}

// Delete removes a document's chunks. It reports whether the document existed.
func (s *Store) Delete(_ context.Context, tenantName, docID string) (bool, error) {
	if err := cordontype.ValidateTenant(tenantName); err != nil {
		return false, err
	}
	if err := cordontype.ValidateDocID(docID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenantName]
	if t == nil {
		return false, nil
	}
	return t.remove(docID), nil
}

func (t *tenant) remove(docID string) bool {
	ids, ok := t.docs[docID]
	if !ok {
		return false
	}
	for _, id := range ids {
		pc := t.chunks[id]
		t.sumLen -= int64(pc.Chunk.Length)
		for _, term := range pc.Terms {
			p := t.postings[term]
			delete(p, id)
			if len(p) == 0 {
				delete(t.postings, term)
			}
		}
		delete(t.chunks, id)
	}
	delete(t.docs, docID)
	return true
}

// Rank implements [retrieval.Store]: it scores every chunk of the principal's
// tenant (and no other) with the statistics of the tenant's scope, then
// applies [retrieval.Funnel].
func (s *Store) Rank(_ context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenants[req.Principal.Tenant]
	if t == nil {
		return retrieval.Funnel(req, nil, nil), nil
	}
	q, err := req.QueryVector(s.settings.Spec())
	if err != nil {
		return retrieval.Rankings{}, err
	}
	req.Combined = req.Combined.ForTenant(s.settings.Stems(), s.settings.NormFields())
	st := t.stats(req, s.settings.Statistics)
	rk := retrieval.Funnel(req, t.lexical(&req, st, s.settings.BM25), t.dense(q))
	rk.IDF = st.idf
	rk.Stemmed = s.settings.Stems()
	if req.Docs {
		rk.Docs = t.docRanking(&req, st, s.settings)
	}
	return rk, nil
}

// TenantModel implements [retrieval.QueryEmbedder]: the store's model
// for every tenant it holds, hashing for one it does not.
func (s *Store) TenantModel(_ context.Context, tenant string) (embed.Spec, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.tenants[tenant] == nil {
		return embed.Spec{Model: embed.Hash}, nil
	}
	return s.settings.Spec(), nil
}

// EmbedQuery implements [retrieval.QueryEmbedder] with the store's
// registry.
func (s *Store) EmbedQuery(ctx context.Context, spec embed.Spec, text string, tokens []string) (*retrieval.DenseQuery, error) {
	return retrieval.EmbedQuery(ctx, s.models, spec, text, tokens)
}

// IDF implements [retrieval.Store]: each term's idf under p's statistics
// scope, as Rank computes it.
func (s *Store) IDF(_ context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenants[p.Tenant]
	if t == nil {
		return make([]float64, len(terms)), nil
	}
	return t.stats(retrieval.RankRequest{Principal: p, Terms: terms}, s.settings.Statistics).idf, nil
}

// scopeStats are the BM25 statistics of one query's scope (SPEC section 4).
type scopeStats struct {
	n, sumLen int64
	idf       []float64 // per query term: SPEC's (Rankings.IDF, the reranker's)
	lex       []float64 // per query term: the lexical ranking's (req.IDF)
}

// stats counts N, the length sum and each query term's df over the scope:
// every current chunk, or under the entitled scope the ones the principal
// may see (freshness does not narrow it).
func (t *tenant) stats(req retrieval.RankRequest, scope bm25.Scope) scopeStats {
	in := func(pc *index.PreparedChunk) bool {
		return !scope.Entitled() || retrieval.Visible(req.Principal, &pc.Chunk)
	}
	var st scopeStats
	for _, pc := range t.chunks {
		if in(pc) {
			st.n++
			st.sumLen += int64(pc.Chunk.Length)
		}
	}
	w := bm25.NewIDFs(req.IDF, len(req.Terms))
	st.idf, st.lex = w.IDF, w.Lex
	for i, term := range req.Terms {
		var df int64
		for id := range t.postings[term] {
			if in(t.chunks[id]) {
				df++
			}
		}
		w.Set(i, st.n, df)
	}
	return st
}

// lexical returns every chunk with BM25 > 0 under st, sorted; none when the
// scope holds no chunk. Each term's contribution is weighed by req.Weight.
func (t *tenant) lexical(req *retrieval.RankRequest, st scopeStats, p bm25.Params) []retrieval.Hit {
	if st.n == 0 {
		return nil
	}
	avgdl := bm25.AvgDL(st.sumLen, st.n)
	if req.Combined != nil {
		return t.combined(req.Combined, req, st, avgdl, p)
	}
	scores := make(map[string]float64)
	var order []string
	for i, term := range req.Terms {
		post := t.postings[term]
		if len(post) == 0 {
			continue
		}
		idf, w := st.lex[i], req.Weight(i)
		// Iterate postings in chunk-id order: the sum per chunk is in term
		// order regardless, but the first-seen order must not leak map order.
		ids := make([]string, 0, len(post))
		for id := range post {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if _, ok := scores[id]; !ok {
				order = append(order, id)
			}
			scores[id] += float64(w * bm25.Term(idf, post[id], int64(t.chunks[id].Chunk.Length), avgdl, p))
		}
	}
	hits := make([]retrieval.Hit, 0, len(order))
	for _, id := range order {
		if sc := scores[id]; sc > 0 {
			hits = append(hits, retrieval.Hit{Chunk: t.chunks[id].Chunk, Score: sc})
		}
	}
	retrieval.SortHits(hits)
	return hits
}

// combined is lexical under c (SPEC section 4, "Combined terms"): every
// chunk holding a term of c's groups, each scored group by group.
func (t *tenant) combined(c *retrieval.Combined, req *retrieval.RankRequest, st scopeStats, avgdl float64, p bm25.Params) []retrieval.Hit {
	held := make(map[string]bool)
	for _, term := range req.Terms {
		for id := range t.postings[term] {
			held[id] = true
		}
	}
	hits := make([]retrieval.Hit, 0, len(held))
	for id := range held {
		ch := t.chunks[id].Chunk
		norm := bm25.LengthNorm(int64(ch.Length), avgdl, p)
		tf := func(i int) int64 { return t.postings[req.Terms[i]][id] }
		if sc := c.Score(st.lex, tf, norm, p); sc > 0 {
			hits = append(hits, retrieval.Hit{Chunk: ch, Score: sc})
		}
	}
	retrieval.SortHits(hits)
	return hits
}

// dense returns every chunk with cosine > 0, sorted.
func (t *tenant) dense(q []int32) []retrieval.Hit {
	qn := hashembed.NormSq(q)
	if qn == 0 {
		return nil
	}
	var hits []retrieval.Hit
	for _, pc := range t.chunks {
		if c := hashembed.Cosine(hashembed.Dot(q, pc.Vector), qn, pc.NormSq); c > 0 {
			hits = append(hits, retrieval.Hit{Chunk: pc.Chunk, Score: c})
		}
	}
	retrieval.SortHits(hits)
	return hits
}

// docRanking is the document ranking of req (SPEC section 5, "Document
// evidence"): the documents of the scope st was counted over, each the sum
// of its chunks.
func (t *tenant) docRanking(req *retrieval.RankRequest, st scopeStats, s index.Settings) []retrieval.DocHit {
	entitled := s.Statistics.Entitled()
	first := func(docID string) *cordontype.Chunk { return &t.chunks[t.docs[docID][0]].Chunk }
	in := func(c *cordontype.Chunk) bool { return !entitled || retrieval.Visible(req.Principal, c) }
	counter := retrieval.NewDocCounter(len(req.Terms))
	for i, term := range req.Terms {
		for id, tf := range t.postings[term] {
			c := &t.chunks[id].Chunk
			if in(c) {
				ranked := retrieval.Visible(req.Principal, c) && !retrieval.Stale(c, req.NowTick, req.MaxStaleTicks)
				counter.Add(i, c.DocID, tf, ranked)
			}
		}
	}
	sc := retrieval.DocScope{SumLen: st.sumLen}
	for id := range t.docs {
		if in(first(id)) {
			sc.N++
		}
	}
	docs, df := counter.Evidence(func(docID string) int64 {
		var n int64
		for _, id := range t.docs[docID] {
			n += int64(t.chunks[id].Chunk.Length)
		}
		return n
	})
	sc.DF = df
	return retrieval.RankDocs(req, docs, sc, s.BM25)
}
