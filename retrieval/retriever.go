package retrieval

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/fusion"
	"github.com/cordon-rag/cordon/rerank"
)

// Result is one retrieval's answer.
type Result struct {
	Chunks                []Scored
	Considered            int
	ExcludedByEntitlement int
	ExcludedByFreshness   int
	// Degraded names the stages that were shed ("dense", "rerank"); never
	// nil.
	Degraded []string
	// DenseErr is why the dense side was shed: the embedding error; nil
	// unless Degraded names "dense".
	DenseErr error
	// Expansion holds the terms query expansion added, best first; nil when
	// the policy does not expand or nothing was added.
	Expansion []string
	// Policy is the policy that ranked: the query's ModelPolicy when the
	// tenant's model is not hashing and the query has one, else its Policy.
	Policy Policy
	// Model says what the model reranker did; nil unless the policy's
	// rerank kind is "model" with rerank enabled.
	Model *ModelRun
}

// Scored is a returned chunk with how its place was earned: each side's score
// and 1-based rank (nil when the chunk was not in that truncated ranking), the
// fused RRF score, and the rerank score (nil when rerank was shed).
type Scored struct {
	Chunk      cordontype.Chunk
	BM25       *float64
	BM25Rank   *int
	Cosine     *float64
	CosineRank *int
	Fused      float64
	Rerank     *float64
	// DocRank is the 1-based rank of the chunk's document in the document
	// ranking, nil when the policy leaves it out or the document is not in
	// it.
	DocRank *int
	// packed is the chunk's text as its store keeps it (Hit.Packed), until
	// the pipeline reads it (Rankings.fillScored): the rerank's candidates
	// and the result are filled, the rest never unpacked.
	packed string
}

// Retriever runs the retrieve pipeline over a Store.
type Retriever struct {
	store Store
	// reranker serves rerank "model"; nil: that kind is invalid.
	reranker rerank.Reranker
}

// New returns a Retriever over store, with opts applied. It validates
// policies against SPEC section 9's ranges only: the service's cost limits
// ([Limits]) are the service's to apply.
func New(store Store, opts ...Option) *Retriever {
	r := &Retriever{store: store}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Query is one retrieval's input. The principal must come from an
// authenticated source, never from the request body of an untrusted caller.
type Query struct {
	Principal cordontype.Principal
	Text      string
	NowTick   int64
	Policy    Policy
	// ModelPolicy, when set, is the policy for a tenant whose embedding
	// model is not hashing (the service's: the request over its profile with
	// [ModelDefaults]); nil is Policy for every tenant. Which one applies
	// is known once the store has ranked, so ModelPolicy must rank as
	// Policy does: the fields that decide what the store ranks, and query
	// expansion (max_stale_ticks, top_n, prf_docs, prf_terms, prf_weight,
	// qtf_k3, idf, stop_words, stem_weight, field_weight, bm25f), must be equal, or the query is
	// invalid.
	ModelPolicy *Policy
	// Reserve is the time the caller needs once the retrieval returns (the
	// service's audit append): the model reranker's call ends Reserve
	// before ctx's deadline, whatever the policy's rerank_budget_ms, and
	// the stage is shed then. 0 lets the call run to ctx's deadline.
	Reserve time.Duration
}

// RankRequest is what q asks the store to rank before any query expansion:
// the query text's tokens; its terms, the tokens the policy's stop list
// keeps, distinct in order of first occurrence, with their qtf weights,
// followed by their stem terms under stem_weight ([WithStems]), then the
// field terms of all of them under field_weight ([WithFields]); and the
// policy's fields that decide the rankings. The stop list reduces the
// terms every later stage reads; the dense side hashes (or embeds) the
// full query, which the retriever adds.
func (q Query) RankRequest() RankRequest {
	tokens := analysis.Tokenize(q.Text)
	kept := Stop(tokens, q.Policy.StopWords)
	terms := distinct(kept)
	terms, weights, combined := LexicalTerms(kept, terms, q.Policy)
	return RankRequest{
		Principal:     q.Principal,
		Tokens:        tokens,
		Terms:         terms,
		Weights:       weights,
		Combined:      combined,
		IDF:           q.Policy.IDF,
		NowTick:       q.NowTick,
		MaxStaleTicks: q.Policy.MaxStaleTicks,
		TopN:          q.Policy.TopN,
		Docs:          q.Policy.RRFWeights.Doc > 0,
	}
}

// Retrieve runs SPEC section 5 for q. Invalid input returns an error wrapping
// [cordontype.ErrInvalid] or [ErrInvalidPolicy]; nothing is ranked.
func (r *Retriever) Retrieve(ctx context.Context, q Query) (Result, error) {
	res, _, err := r.RetrieveVersion(ctx, q)
	return res, err
}

// RetrieveVersion is [Retriever.Retrieve] that also returns the version of
// the index snapshot that answered the last ranking (the expanded one when
// the query was expanded), so an audit record can cite it; the version is 0
// unless the store is a [VersionedStore].
func (r *Retriever) RetrieveVersion(ctx context.Context, q Query) (Result, int64, error) {
	if err := q.Principal.Validate(); err != nil {
		return Result{}, 0, err
	}
	if err := cordontype.ValidateTick("now_tick", q.NowTick); err != nil {
		return Result{}, 0, err
	}
	if err := r.Validate(q.Policy); err != nil {
		return Result{}, 0, err
	}
	if q.ModelPolicy != nil && !ranksAs(*q.ModelPolicy, q.Policy) {
		return Result{}, 0, fmt.Errorf("%w: the model policy must rank as the policy does (max_stale_ticks, top_n, prf_docs, prf_terms, prf_weight, qtf_k3, idf, stop_words, stem_weight, field_weight and bm25f equal, rrf_weights.doc both 0 or both > 0)", ErrInvalidPolicy)
	}
	req := q.RankRequest()
	terms := req.Terms[:queryTerms(req.Terms)] // the reranker's: without stem terms
	rk, version, req, denseErr, err := r.rankDense(ctx, req, q.Text, q.Policy)
	if err != nil {
		return Result{}, 0, fmt.Errorf("rank: %w", err)
	}
	var expansion []string
	if q.Policy.PRFDocs > 0 && len(rk.Lexical) > 0 {
		req2, added, ok, err := r.expand(ctx, req, rk, q.Policy)
		if err != nil {
			return Result{}, 0, err
		}
		if ok {
			if rk, version, err = r.rank(ctx, req2); err != nil {
				return Result{}, 0, fmt.Errorf("rank expanded query: %w", err)
			}
			expansion = added
		}
	}
	if req.Dense != nil && q.ModelPolicy != nil {
		// Valid for a hashing tenant is not valid for this one: the
		// model's defaults may meet a request's own values (rerank_blend
		// 0.9 with rerank_dense 0.15).
		if err := r.Validate(*q.ModelPolicy); err != nil {
			return Result{}, 0, fmt.Errorf("model defaults: %w", err)
		}
		q.Policy = *q.ModelPolicy
	}
	// The reranker reads the original terms and the first len(terms)
	// entries of rk.IDF, theirs in either pass (the model reranker, the
	// original query text).
	res := r.Finish(ctx, rk, terms, q)
	res.Expansion = expansion
	if denseErr != nil {
		res.Degraded = append([]string{DegradedDense}, res.Degraded...)
		res.DenseErr = denseErr
	}
	return res, version, nil
}

// ranksAs reports whether p and q agree on every field that decides what
// the store ranks, query expansion included.
func ranksAs(p, q Policy) bool {
	stale := p.MaxStaleTicks == q.MaxStaleTicks ||
		p.MaxStaleTicks != nil && q.MaxStaleTicks != nil && *p.MaxStaleTicks == *q.MaxStaleTicks
	return stale && p.TopN == q.TopN && p.PRFDocs == q.PRFDocs && p.PRFTerms == q.PRFTerms &&
		p.PRFWeight == q.PRFWeight && p.QTFK3 == q.QTFK3 && p.IDF == q.IDF && p.StemWeight == q.StemWeight &&
		p.FieldWeight == q.FieldWeight && p.BM25F == q.BM25F &&
		p.StopWords.effective() == q.StopWords.effective() &&
		(p.RRFWeights.Doc > 0) == (q.RRFWeights.Doc > 0)
}

// rank asks the store for req's rankings and, from a [VersionedStore], the
// version that answered.
func (r *Retriever) rank(ctx context.Context, req RankRequest) (Rankings, int64, error) {
	req.LazyTexts = true // every reader of a text below fills it first
	if vs, ok := r.store.(VersionedStore); ok {
		return vs.RankVersion(ctx, req)
	}
	rk, err := r.store.Rank(ctx, req)
	return rk, 0, err
}

// Tail is the pure end of the pipeline (SPEC section 5, steps 5-7) over a
// store's rankings: fuse, rerank (or shed it), collapse per document when
// the policy caps chunks per document, take the first limit. terms
// are the query's distinct tokens in order of first occurrence, as in the
// [RankRequest] that produced rk; tokens are the query text's tokens in
// order, with repetition (rerank_proximity reads them). p must be valid.
// Tail calls no model: for
// rerank "model" it is the shed result ([Retriever.Finish] calls the model).
func Tail(rk Rankings, terms, tokens []string, p Policy) Result {
	return tail(rk, Fuse(rk, p.RRFK, p.RRFWeights), terms, tokens, p, nil)
}

// tail is [Tail] over fused, [Fuse]'s list for rk and p. For rerank "model",
// scores are the model's for the first min(rerank_depth, len(fused)) fused
// chunks; nil sheds the stage, exactly as enable_rerank false does.
func tail(rk Rankings, fused []Scored, terms, tokens []string, p Policy, scores []float64) Result {
	res := Result{
		Considered:            rk.Considered,
		ExcludedByEntitlement: rk.ExcludedByEntitlement,
		ExcludedByFreshness:   rk.ExcludedByFreshness,
		Degraded:              []string{},
		Policy:                p,
	}
	res.Chunks = fused
	// A store's packed texts are read for the chunks the reranker reads
	// and those returned, no others.
	if p.EnableRerank && (p.Rerank != RerankModel || scores != nil) {
		rk.fillScored(fused[:min(p.RerankDepth, len(fused))])
		// An expanded query's rankings carry idf for the added terms too,
		// after the original ones: the reranker reads the original's.
		idf := rk.IDF
		if len(idf) > len(terms) {
			idf = idf[:len(terms)]
		}
		in := RerankInput{
			Terms:    terms,
			IDF:      idf,
			BM25Max:  bm25Max(rk),
			Depth:    p.RerankDepth,
			MinScore: p.MinScore,
			Kind:     p.Rerank,
			Blend:    p.RerankBlend,
			Dense:    p.RerankDense,
			CosMax:   cosMax(rk),
		}
		if p.RerankProximity > 0 {
			in.Proximity, in.Tokens = p.RerankProximity, tokens
		}
		if p.Rerank == RerankModel {
			in.Scores, in.MinScore = scores, p.RerankMinScore
		}
		if p.RerankDoc > 0 && p.RRFWeights.Doc > 0 {
			// Without rrf_weights.doc the store ranks no document.
			in.Doc, in.Docs = p.RerankDoc, rk.Docs
		}
		if rk.Stemmed {
			in.StemWeight = p.StemWeight
		}
		res.Chunks = Rerank(res.Chunks, in)
	} else {
		res.Degraded = append(res.Degraded, DegradedRerank)
	}
	if p.MaxChunksPerDoc > 0 {
		res.Chunks = Collapse(res.Chunks, p.MaxChunksPerDoc)
	}
	if len(res.Chunks) > p.Limit {
		res.Chunks = res.Chunks[:p.Limit]
	}
	rk.fillScored(res.Chunks)
	return res
}

// Collapse keeps, walking in order, at most n chunks of each document: a
// chunk is dropped when n chunks of its document are already kept. The
// order of the kept chunks is unchanged, so the result is as deterministic
// as its input.
func Collapse(in []Scored, n int) []Scored {
	kept := make(map[string]int)
	out := in[:0:0]
	for _, s := range in {
		if kept[s.Chunk.DocID] < n {
			kept[s.Chunk.DocID]++
			out = append(out, s)
		}
	}
	return out
}

// bm25Max is the lexical ranking's first score, 0 when it is empty.
func bm25Max(rk Rankings) float64 {
	if len(rk.Lexical) == 0 {
		return 0
	}
	return rk.Lexical[0].Score
}

// Fuse turns a store's rankings into fused chunks with their per-side scores
// and ranks, in fused order, weighing the lexical ranking w.BM25 and the
// dense one w.Cosine. Empty rankings are dropped before fusion.
func Fuse(rk Rankings, k int64, w Weights) []Scored {
	// The chunks and their per-side scores and ranks come from slices
	// sized for both rankings, so they never grow and their elements'
	// addresses hold.
	n := len(rk.Lexical) + len(rk.Dense)
	byID := make(map[string]*Scored, n)
	pool := make([]Scored, 0, n)
	scores := make([]float64, 0, n)
	ranks := make([]int, 0, n)
	var ranked [][]fusion.Ranked
	var weights []float64
	side := func(hits []Hit, lexical bool) {
		if len(hits) == 0 {
			return
		}
		list := make([]fusion.Ranked, len(hits))
		for i, h := range hits {
			list[i] = fusion.Ranked{ID: h.Chunk.ChunkID, Rank: i + 1}
			s, ok := byID[h.Chunk.ChunkID]
			if !ok {
				pool = append(pool, Scored{Chunk: h.Chunk, packed: h.Packed})
				s = &pool[len(pool)-1]
				byID[h.Chunk.ChunkID] = s
			}
			scores = append(scores, h.Score)
			ranks = append(ranks, i+1)
			score, rank := &scores[len(scores)-1], &ranks[len(ranks)-1]
			if lexical {
				s.BM25, s.BM25Rank = score, rank
			} else {
				s.Cosine, s.CosineRank = score, rank
			}
		}
		ranked = append(ranked, list)
		if lexical {
			weights = append(weights, w.BM25)
		} else {
			weights = append(weights, w.Cosine)
		}
	}
	side(rk.Lexical, true)
	side(rk.Dense, false)
	if docs := docSide(rk, byID, ranked, weights, k); len(docs) > 0 {
		ranked = append(ranked, docs)
		weights = append(weights, w.Doc)
	}
	fused := fusion.WeightedRRFRanked(ranked, weights, k)
	out := make([]Scored, len(fused))
	for i, f := range fused {
		out[i] = *byID[f.ChunkID]
		out[i].Fused = f.Score
	}
	return out
}

// RerankInput is what [Rerank] needs besides the fused chunks.
type RerankInput struct {
	// Terms are the query's distinct tokens in order of first occurrence;
	// IDF their idf under the principal's statistics scope (same index;
	// only the idf_overlap kind reads it).
	Terms []string
	IDF   []float64
	// BM25Max is the lexical ranking's first score (0 when it is empty).
	BM25Max  float64
	Depth    int
	MinScore float64
	Kind     RerankKind
	Blend    float64
	// Dense weighs the cosine relative to CosMax, the dense ranking's
	// first score (0 when it is empty); 0 is SPEC's formula.
	Dense  float64
	CosMax float64
	// Proximity weighs the chunk's phrase proximity to Tokens, the
	// query's tokens in order with repetition; 0 leaves the score as it
	// is.
	Proximity float64
	Tokens    []string
	// Doc weighs the chunk's document evidence: its document's score in
	// Docs, the document ranking, relative to the ranking's first (0 when
	// the document is not in it); 0 leaves the score as it is.
	Doc  float64
	Docs []DocHit
	// Scores, for the "model" kind, are the model's scores of the fused
	// chunks (same index); a chunk without one is dropped, as beyond the
	// depth. Other kinds do not read it.
	Scores []float64
	// StemWeight, the policy's stem_weight, is what the overlap kinds
	// count for a query term the chunk holds only in another form (a
	// token with the same stem term); 0 counts exact matches only.
	StemWeight float64
}

// Rerank scores the first in.Depth fused chunks by their overlap with the
// query (the share of its distinct terms, or of its IDF mass, the chunk
// holds), keeps those with overlap > 0 and overlap >= in.MinScore (the
// relevance floor: "nothing relevant" stays empty), and stable-sorts them by
// rerank score descending: (1 - blend) * overlap + blend * bm25 / bm25_max.
// Chunks beyond the depth are dropped. For the "model" kind the model's
// score takes the overlap's place, and the floor keeps score >= in.MinScore.
// Phrase proximity (in.Proximity), then document evidence (in.Doc), mix
// into the score of each chunk kept.
func Rerank(fused []Scored, in RerankInput) []Scored {
	if len(fused) > in.Depth {
		fused = fused[:in.Depth]
	}
	if in.Kind == RerankModel && len(fused) > len(in.Scores) {
		fused = fused[:len(in.Scores)]
	}
	out := make([]Scored, 0, len(fused))
	var m *analysis.Matcher
	var sm *analysis.StemMatcher
	if in.Kind != RerankModel {
		m = analysis.NewMatcher(in.Terms)
		if in.StemWeight > 0 {
			sm = analysis.NewStemMatcher(in.Terms)
		}
	}
	// credit is what query term i counts for the chunk last scanned: 1
	// found as it is, StemWeight found in another form, else 0.
	credit := func(i int) float64 {
		switch {
		case m.Has(i):
			return 1
		case sm.Has(i):
			return in.StemWeight
		}
		return 0
	}
	var pairs *analysis.PairMatcher
	if in.Proximity > 0 {
		pairs = analysis.NewPairMatcher(in.Tokens)
	}
	var shares map[string]float64
	if in.Doc > 0 {
		shares = docShares(in.Docs)
	}
	for i, s := range fused {
		var ov float64
		var keep bool
		switch in.Kind {
		case RerankModel:
			ov = in.Scores[i]
			keep = ov >= in.MinScore
		case RerankIDFOverlap:
			m.Scan(s.Chunk.Text)
			if sm != nil {
				sm.ScanHeld(s.Chunk.Text, m.Has)
				ov = idfOverlapCredit(in.Terms, in.IDF, credit)
			} else {
				ov = idfOverlap(in.Terms, in.IDF, m.Has)
			}
			keep = ov > 0 && ov >= in.MinScore
		default:
			m.Scan(s.Chunk.Text)
			if sm != nil {
				sm.ScanHeld(s.Chunk.Text, m.Has)
				ov = overlapCredit(in.Terms, credit)
			} else {
				ov = overlap(in.Terms, m.Has)
			}
			keep = ov > 0 && ov >= in.MinScore
		}
		if keep {
			score := blend(ov, s.BM25, in.BM25Max, in.Blend)
			if in.Dense > 0 {
				score = blendDense(ov, s, in)
			}
			if in.Proximity > 0 {
				score = mixIn(score, proximity(pairs, s.Chunk.Text), in.Proximity)
			}
			if in.Doc > 0 {
				score = mixIn(score, shares[s.Chunk.DocID], in.Doc) // 0 for a document not in the ranking
			}
			s.Rerank = &score
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b Scored) int {
		switch {
		case *a.Rerank > *b.Rerank:
			return -1
		case *a.Rerank < *b.Rerank:
			return 1
		}
		return 0
	})
	return out
}

// blend is SPEC section 5's rerank score, t1 = (1 - g) * overlap,
// t2 = g * (bm25 / bm25max), t1 + t2, each step rounded (no fused
// multiply-add). A chunk absent from the lexical ranking has bm25 0; t2 is 0
// when that ranking is empty.
func blend(overlap float64, bm25 *float64, bm25max, g float64) float64 {
	t1 := float64(float64(1.0-g) * overlap)
	var t2 float64
	if bm25max > 0 {
		var b float64
		if bm25 != nil {
			b = *bm25
		}
		t2 = float64(g * float64(b/bm25max))
	}
	return float64(t1 + t2)
}

// blendDense is the rerank score with a dense term (policy rerank_dense
// d > 0): t1 = (1 - g - d) * overlap, t2 = g * (bm25 / bm25max), t3 = d *
// (cosine / cosmax), then (t1 + t2) + t3, each step rounded. A chunk absent
// from a ranking scores 0 on its side; a side's term is 0 when its ranking
// is empty.
func blendDense(overlap float64, s Scored, in RerankInput) float64 {
	g, d := in.Blend, in.Dense
	t1 := float64(float64(float64(1.0-g)-d) * overlap)
	var t2, t3 float64
	if in.BM25Max > 0 && s.BM25 != nil {
		t2 = float64(g * float64(*s.BM25/in.BM25Max))
	}
	if in.CosMax > 0 && s.Cosine != nil {
		t3 = float64(d * float64(*s.Cosine/in.CosMax))
	}
	return float64(float64(t1+t2) + t3)
}

// cosMax is the dense ranking's first score, 0 when it is empty.
func cosMax(rk Rankings) float64 {
	if len(rk.Dense) == 0 {
		return 0
	}
	return rk.Dense[0].Score
}

// IDFOverlap is the share of the query's IDF mass a chunk holds: the sum of
// idf over the query terms the chunk contains divided by the sum over all
// query terms, each summed left to right in query order; 0 when the
// denominator is 0. query is a distinct token list, idf its idf values
// (missing entries count 0), chunk the chunk's distinct tokens.
func IDFOverlap(query []string, idf []float64, chunk []string) float64 {
	return idfOverlap(query, idf, holds(query, chunk))
}

// idfOverlap is IDFOverlap with has(i) telling whether the chunk holds
// query[i].
func idfOverlap(query []string, idf []float64, has func(i int) bool) float64 {
	var num, den float64
	for i := range query {
		var w float64
		if i < len(idf) {
			w = idf[i]
		}
		den += w
		if has(i) {
			num += w
		}
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// idfOverlapCredit is idfOverlap with each term's idf counted credit(i)
// times (in [0, 1]): num sums float64(idf * credit) in term order.
func idfOverlapCredit(query []string, idf []float64, credit func(i int) float64) float64 {
	var num, den float64
	for i := range query {
		var w float64
		if i < len(idf) {
			w = idf[i]
		}
		den += w
		num += float64(w * credit(i))
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// overlapCredit is overlap with each term counted credit(i): the credits'
// sum in term order over the number of terms.
func overlapCredit(query []string, credit func(i int) float64) float64 {
	if len(query) == 0 {
		return 0
	}
	var n float64
	for i := range query {
		n += credit(i)
	}
	return n / float64(len(query))
}

// holds returns has(i): whether chunk holds query[i].
func holds(query, chunk []string) func(i int) bool {
	have := make(map[string]struct{}, len(chunk))
	for _, t := range chunk {
		have[t] = struct{}{}
	}
	return func(i int) bool {
		_, ok := have[query[i]]
		return ok
	}
}

// Overlap is |set(query) ∩ set(chunk)| / |set(query)|, 0 for a query with no
// terms. Both arguments are distinct token lists.
func Overlap(query, chunk []string) float64 {
	return overlap(query, holds(query, chunk))
}

// overlap is Overlap with has(i) telling whether the chunk holds query[i].
func overlap(query []string, has func(i int) bool) float64 {
	if len(query) == 0 {
		return 0
	}
	n := 0
	for i := range query {
		if has(i) {
			n++
		}
	}
	return float64(n) / float64(len(query))
}

func distinct(tokens []string) []string {
	seen := make(map[string]struct{}, len(tokens))
	out := make([]string, 0, len(tokens))
	for _, t := range tokens {
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
	}
	return out
}

// docSide is the document ranking as a fusion input: for each document of
// rk.Docs, its lead chunk (the first of its chunks in the fusion of the
// other rankings, ranked and weighted as given) with the document's
// 1-based rank, which it also records in the chunk's DocRank. A document
// with no chunk among the candidates takes no part, and its other chunks
// get nothing: one place per document, as a whole-document ranking gives.
func docSide(rk Rankings, byID map[string]*Scored, ranked [][]fusion.Ranked, weights []float64, k int64) []fusion.Ranked {
	if len(rk.Docs) == 0 {
		return nil
	}
	rank := make(map[string]int, len(rk.Docs))
	for i, d := range rk.Docs {
		rank[d.DocID] = i + 1
	}
	var out []fusion.Ranked
	for _, f := range fusion.WeightedRRFRanked(ranked, weights, k) {
		s := byID[f.ChunkID]
		if r, ok := rank[s.Chunk.DocID]; ok {
			delete(rank, s.Chunk.DocID)
			s.DocRank = &r
			out = append(out, fusion.Ranked{ID: f.ChunkID, Rank: r})
		}
	}
	return out
}
