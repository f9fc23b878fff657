package retrieval

import "github.com/cordon-rag/cordon/bm25"

// PolicyPatch is a retrieval policy as a request, a replay step or
// `cordon-lab eval --policy` gives it (SPEC section 9's policy object): every
// field present overrides the policy it is applied to, every absent (or
// null) one keeps it. The HTTP API applies it over [ServicePolicy], replay
// scripts over [DefaultPolicy]. Marshalled, it names only the fields set.
type PolicyPatch struct {
	MaxStaleTicks *int64 `json:"max_stale_ticks,omitempty"`
	EnableRerank  *bool  `json:"enable_rerank,omitempty"`
	// EnableDense false turns the dense side off; DenseFallback ("none" or
	// "lexical") is what a retrieve does when the query cannot be embedded.
	EnableDense   *bool    `json:"enable_dense,omitempty"`
	DenseFallback *string  `json:"dense_fallback,omitempty"`
	MinScore      *float64 `json:"min_score,omitempty"`
	TopN          *int     `json:"top_n,omitempty"`
	RerankDepth   *int     `json:"rerank_depth,omitempty"`
	RRFK          *int64   `json:"rrf_k,omitempty"`
	Limit         *int     `json:"limit,omitempty"`
	// RRFWeights may give any of its keys; a missing one keeps its value.
	RRFWeights  *WeightsPatch `json:"rrf_weights,omitempty"`
	Rerank      *string       `json:"rerank,omitempty"`
	RerankBlend *float64      `json:"rerank_blend,omitempty"`
	RerankDense *float64      `json:"rerank_dense,omitempty"`
	// RerankProximity mixes phrase proximity into the rerank score.
	RerankProximity *float64 `json:"rerank_proximity,omitempty"`
	// RerankDoc mixes document evidence into the rerank score.
	RerankDoc *float64 `json:"rerank_doc,omitempty"`
	// MaxChunksPerDoc caps the chunks of one document in the result (0: no
	// cap).
	MaxChunksPerDoc *int `json:"max_chunks_per_doc,omitempty"`
	// Query expansion (pseudo-relevance feedback): prf_docs > 0 turns it on.
	PRFDocs   *int     `json:"prf_docs,omitempty"`
	PRFTerms  *int     `json:"prf_terms,omitempty"`
	PRFWeight *float64 `json:"prf_weight,omitempty"`
	// QTFK3 weighs repeated query terms (0: off).
	QTFK3 *float64 `json:"qtf_k3,omitempty"`
	// StemWeight weighs the query's stem terms (0: none).
	StemWeight *float64 `json:"stem_weight,omitempty"`
	// FieldWeight weighs the field terms of the request's terms (0: none).
	FieldWeight *float64 `json:"field_weight,omitempty"`
	// BM25F combines each query word's forms and fields into one term.
	BM25F *bool `json:"bm25f,omitempty"`
	// IDF is the lexical idf formula ("plus1" or "rsj").
	IDF *string `json:"idf,omitempty"`
	// StopWords is the query stop list ("", "none" or "english").
	StopWords *string `json:"stop_words,omitempty"`
	// The model reranker's relevance floor and latency budget (rerank
	// "model").
	RerankMinScore *float64 `json:"rerank_min_score,omitempty"`
	RerankBudgetMS *int     `json:"rerank_budget_ms,omitempty"`
}

// WeightsPatch is a policy patch's rrf_weights.
type WeightsPatch struct {
	BM25   *float64 `json:"bm25,omitempty"`
	Cosine *float64 `json:"cosine,omitempty"`
	Doc    *float64 `json:"doc,omitempty"`
}

// Apply returns base with the fields present in p set; a nil p is base.
// It does not validate: call [Policy.Validate] on the result.
func (p *PolicyPatch) Apply(base Policy) Policy {
	pol := base
	if p == nil {
		return pol
	}
	set(&pol.MaxStaleTicks, p.MaxStaleTicks)
	setv(&pol.EnableRerank, p.EnableRerank)
	setv(&pol.EnableDense, p.EnableDense)
	if p.DenseFallback != nil {
		pol.DenseFallback = DenseFallback(*p.DenseFallback)
	}
	setv(&pol.MinScore, p.MinScore)
	setv(&pol.TopN, p.TopN)
	setv(&pol.RerankDepth, p.RerankDepth)
	setv(&pol.RRFK, p.RRFK)
	setv(&pol.Limit, p.Limit)
	if w := p.RRFWeights; w != nil {
		setv(&pol.RRFWeights.BM25, w.BM25)
		setv(&pol.RRFWeights.Cosine, w.Cosine)
		setv(&pol.RRFWeights.Doc, w.Doc)
	}
	if p.Rerank != nil {
		pol.Rerank = RerankKind(*p.Rerank)
	}
	setv(&pol.RerankBlend, p.RerankBlend)
	setv(&pol.RerankDense, p.RerankDense)
	setv(&pol.RerankProximity, p.RerankProximity)
	setv(&pol.RerankDoc, p.RerankDoc)
	setv(&pol.MaxChunksPerDoc, p.MaxChunksPerDoc)
	setv(&pol.PRFDocs, p.PRFDocs)
	setv(&pol.PRFTerms, p.PRFTerms)
	setv(&pol.PRFWeight, p.PRFWeight)
	setv(&pol.QTFK3, p.QTFK3)
	setv(&pol.StemWeight, p.StemWeight)
	setv(&pol.FieldWeight, p.FieldWeight)
	setv(&pol.BM25F, p.BM25F)
	if p.IDF != nil {
		pol.IDF = bm25.IDFKind(*p.IDF)
	}
	if p.StopWords != nil {
		pol.StopWords = StopWords(*p.StopWords)
	}
	setv(&pol.RerankMinScore, p.RerankMinScore)
	setv(&pol.RerankBudgetMS, p.RerankBudgetMS)
	return pol
}

// Patch returns p as a patch that sets every field (max_stale_ticks only
// when p sets it): p.Patch().Apply(base) is p for every base without a
// freshness contract, and for every base when p has one (a patch cannot
// remove a contract: absent and null keep the base's). It is the one
// conversion of a policy to its wire form, for a request that must rank
// exactly as p does whatever the server's profile, and for audit records.
func (p Policy) Patch() *PolicyPatch {
	out := &PolicyPatch{
		EnableRerank:    &p.EnableRerank,
		EnableDense:     &p.EnableDense,
		MinScore:        &p.MinScore,
		TopN:            &p.TopN,
		RerankDepth:     &p.RerankDepth,
		RRFK:            &p.RRFK,
		Limit:           &p.Limit,
		RRFWeights:      &WeightsPatch{BM25: &p.RRFWeights.BM25, Cosine: &p.RRFWeights.Cosine, Doc: &p.RRFWeights.Doc},
		RerankBlend:     &p.RerankBlend,
		RerankDense:     &p.RerankDense,
		RerankProximity: &p.RerankProximity,
		RerankDoc:       &p.RerankDoc,
		MaxChunksPerDoc: &p.MaxChunksPerDoc,
		PRFDocs:         &p.PRFDocs,
		PRFTerms:        &p.PRFTerms,
		PRFWeight:       &p.PRFWeight,
		QTFK3:           &p.QTFK3,
		StemWeight:      &p.StemWeight,
		FieldWeight:     &p.FieldWeight,
		BM25F:           &p.BM25F,
		RerankMinScore:  &p.RerankMinScore,
		RerankBudgetMS:  &p.RerankBudgetMS,
	}
	set(&out.MaxStaleTicks, p.MaxStaleTicks)
	rerank, idf, fallback, stop := string(p.Rerank), string(p.IDF), string(p.DenseFallback), string(p.StopWords)
	out.Rerank, out.IDF, out.DenseFallback, out.StopWords = &rerank, &idf, &fallback, &stop
	return out
}

// set points dst at a copy of *v when v is present.
func set[T any](dst **T, v *T) {
	if v != nil {
		c := *v
		*dst = &c
	}
}

// setv sets *dst to *v when v is present.
func setv[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
