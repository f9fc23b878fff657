package retrieval

import (
	"fmt"
	"math"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/fusion"
)

// Policy defaults from SPEC section 5.
const (
	DefaultMinScore    = 0.2 // rerank relevance floor: share of query terms a chunk must hold
	DefaultTopN        = 50  // per-ranking candidates kept after the pre-filter
	DefaultRerankDepth = 20  // fused chunks the reranker looks at; the rest are dropped
	DefaultLimit       = 5   // chunks returned
	DegradedRerank     = "rerank"
	// DegradedDense names the dense side in Result.Degraded when the query
	// could not be embedded and the policy's dense_fallback ran the
	// retrieve lexical-only.
	DegradedDense = "dense"
	// DefaultPRFTerms and DefaultPRFWeight apply once query expansion is on
	// (PRFDocs > 0): ten added terms, each weighing at most half an
	// original term.
	DefaultPRFTerms  = 10
	DefaultPRFWeight = 0.5
	// DefaultRerankMinScore is the model reranker's relevance floor: 0
	// keeps every chunk a model scores >= 0 (the sigmoid and relevance
	// scores of text-embeddings-inference and Cohere-style servers are in
	// [0, 1]). Models are calibrated differently, so a floor that empties
	// the result on nonsense is the operator's to measure and set.
	DefaultRerankMinScore = 0.0
	// DefaultRerankBudgetMS is the model reranker's latency budget when
	// neither the request nor the server sets one.
	DefaultRerankBudgetMS = 300
	// MaxRerankBudgetMS bounds rerank_budget_ms: one minute.
	MaxRerankBudgetMS = 60000
	// MaxQTFK3 bounds qtf_k3: at 1000 (the "large k3" of the Okapi
	// experiments) a repeated term's weight is within 0.2% of its count in
	// a query of up to a few repetitions, so larger values change nothing.
	MaxQTFK3 = 1000
)

// DegradedStages lists every stage Result.Degraded may name, in the order
// it names them (metrics create a series for each up front).
var DegradedStages = []string{DegradedDense, DegradedRerank}

// RerankKind names how the reranker scores a chunk's hold on the query
// (SPEC section 5, step 6).
type RerankKind string

const (
	// RerankOverlap is the share of the query's distinct terms the chunk
	// holds: every term counts the same.
	RerankOverlap RerankKind = "overlap"
	// RerankIDFOverlap is the share of the query's IDF mass the chunk holds,
	// with the principal's statistics scope: a rare term counts more than a
	// common one.
	RerankIDFOverlap RerankKind = "idf_overlap"
	// RerankModel is a cross-encoder's relevance score for (query, chunk
	// text), from the retriever's model reranker ([WithReranker]) within
	// the policy's latency budget; a failed or late call sheds the stage.
	RerankModel RerankKind = "model"
)

// DenseFallback says what a retrieve does when the query cannot be
// embedded with the tenant's model (the provider fails or times out).
type DenseFallback string

const (
	// FallbackNone fails the retrieve: the service answers 503.
	FallbackNone DenseFallback = "none"
	// FallbackLexical runs the retrieve with the dense side off, exactly as
	// enable_dense false does, and names "dense" in Result.Degraded. A
	// model no provider serves (embed.ErrUnknownModel) is a
	// misconfiguration and still fails.
	FallbackLexical DenseFallback = "lexical"
)

// Weights are the per-ranking RRF weights (SPEC section 5, step 5).
type Weights struct {
	BM25   float64
	Cosine float64
	// Doc weighs the document ranking, in which each fused chunk takes its
	// document's rank (SPEC section 5, "Document evidence"); 0 leaves it
	// out, and the store does not rank documents.
	Doc float64
}

// DefaultWeights weighs both rankings 1 (classic RRF) and leaves the
// document ranking out.
func DefaultWeights() Weights { return Weights{BM25: 1, Cosine: 1} }

// Policy tunes one retrieval.
type Policy struct {
	// MaxStaleTicks, when set, removes visible chunks whose document is older
	// than now_tick - MaxStaleTicks.
	MaxStaleTicks *int64
	EnableRerank  bool
	// EnableDense false turns the dense side off: the store ranks no
	// chunk by cosine (the query is not embedded), fusion sees the lexical
	// ranking alone, and the policy without the model overlay ranks
	// (Query.ModelPolicy applies only when the dense side used the
	// tenant's model).
	EnableDense bool
	// DenseFallback is what happens when the query cannot be embedded.
	DenseFallback DenseFallback
	MinScore      float64
	TopN          int
	RerankDepth   int
	RRFK          int64
	Limit         int
	// RRFWeights weigh the lexical and dense rankings in fusion.
	RRFWeights Weights
	// Rerank picks the rerank score's overlap measure.
	Rerank RerankKind
	// RerankBlend in [0, 1] mixes the chunk's BM25 score, relative to the
	// best one, into its rerank score; 0 is the overlap (or the model's
	// score) alone.
	RerankBlend float64
	// RerankDense in [0, 1] (RerankBlend + RerankDense <= 1) mixes the
	// chunk's cosine, relative to the best one in the dense ranking, into
	// its rerank score: the overlap then weighs 1 - RerankBlend -
	// RerankDense. 0 leaves SPEC's formula.
	RerankDense float64
	// RerankProximity in [0, 1] mixes the chunk's phrase proximity (the
	// share of the query's adjacent token pairs the chunk holds adjacent)
	// into its rerank score: (1 - p) * score + p * proximity. 0 leaves the
	// score as it is.
	RerankProximity float64
	// RerankDoc in [0, 1] mixes the chunk's document evidence (its
	// document's score in the document ranking, relative to the best) into
	// its rerank score, after RerankProximity: (1 - v) * score + v * share.
	// It reads the document ranking, which the store ranks only when
	// RRFWeights.Doc > 0; otherwise, and at 0, the score is left as it is.
	RerankDoc float64
	// StemWeight in [0, 1] weighs the query's stem terms (analysis.Stem)
	// in the lexical ranking: each distinct stem of the query's terms is
	// added after them with StemWeight times the weight of the first term
	// with that stem, so a chunk of a tenant under the English analyzer
	// scores for another form of a query word ("contribution" for
	// "contribute") and more for the exact form, which matches both terms.
	// It decides what the store ranks; a tenant under the exact analyzer
	// holds no stem terms, so they score nothing there. 0 adds none
	// (SPEC's ranking). The overlap rerankers then count a query term
	// found only in another form as StemWeight of a match.
	StemWeight float64
	// FieldWeight in [0, MaxFieldWeight] weighs the field terms
	// (analysis.AppendFieldTerms) of the request's terms in the lexical
	// ranking: after the query's terms and their stem terms, each of them
	// is added once more as a field term, weighted FieldWeight times its
	// own weight, so a chunk whose document title or section heading holds
	// a query word scores for it too. It decides what the store ranks; a
	// tenant without field terms scores nothing for them. 0 adds none
	// (SPEC's ranking).
	FieldWeight float64
	// BM25F scores each query word's exact form, its other forms
	// (StemWeight: a token of another form counts StemWeight, one as
	// written 1 - StemWeight) and its field terms (FieldWeight) as one
	// term, saturated once with the stem term's idf (SPEC section 4,
	// "Combined terms"), instead of adding them as separate terms. It
	// decides what the store ranks.
	BM25F bool
	// RerankMinScore is the "model" kind's relevance floor on the model's
	// score (MinScore is the overlap kinds'): any finite number, since
	// providers' scales differ.
	RerankMinScore float64
	// RerankBudgetMS (1 to MaxRerankBudgetMS) bounds the "model" kind's
	// call, in milliseconds; the stage is shed when the model has not
	// answered by then.
	RerankBudgetMS int
	// MaxChunksPerDoc, when > 0, keeps at most that many chunks of one
	// document in the result (the best-placed ones), before the limit: ten
	// results then cover more documents. 0 is no cap.
	MaxChunksPerDoc int
	// PRFDocs, when > 0, expands the query by pseudo-relevance feedback
	// from the first PRFDocs chunks of the principal's own lexical ranking
	// (see [Expand]); 0 is off. PRFTerms (>= 1) is how many terms may be
	// added, PRFWeight in [0, 1] the BM25 weight of the best added term.
	PRFDocs   int
	PRFTerms  int
	PRFWeight float64
	// QTFK3, when > 0, weighs a query term the query repeats by
	// [QueryTermWeights] with k3 = QTFK3 in the lexical ranking; 0 (SPEC
	// section 4) counts every distinct term once.
	QTFK3 float64
	// IDF is the idf formula the lexical ranking scores with:
	// bm25.IDFPlusOne (SPEC section 4) or bm25.IDFRSJ, which gives a term
	// in half the chunks or more almost no weight. The idf_overlap
	// reranker and query expansion keep SPEC's idf, so the relevance floor
	// means what it did (in a tenant of one chunk every term it holds is
	// in half the chunks).
	IDF bm25.IDFKind
	// StopWords names the query stop list ("" or "none": off; "english":
	// [EnglishStopWords]): its words are dropped from the query's terms
	// before ranking, unless every term is one ([Stop]). The reduced terms
	// are the query's everywhere terms are read (lexical and document
	// rankings, query-term weights, the overlap rerankers, query
	// expansion); the dense side embeds the full text.
	StopWords StopWords
}

// DefaultPolicy returns SPEC section 5's defaults (the seed profile): rerank
// on, min_score 0.2, top_n 50, rerank_depth 20, rrf_k 60, limit 5, both RRF
// weights 1, the overlap reranker with no BM25 blend, no freshness contract,
// no query expansion (prf_terms 10 and prf_weight 0.5 once it is on), the
// dense side on with no fallback (dense_fallback "none"), and
// for the model reranker a floor of 0 and a budget of 300 ms.
func DefaultPolicy() Policy {
	return Policy{
		EnableRerank:   true,
		EnableDense:    true,
		DenseFallback:  FallbackNone,
		MinScore:       DefaultMinScore,
		TopN:           DefaultTopN,
		RerankDepth:    DefaultRerankDepth,
		RRFK:           fusion.DefaultK,
		Limit:          DefaultLimit,
		RRFWeights:     DefaultWeights(),
		Rerank:         RerankOverlap,
		PRFTerms:       DefaultPRFTerms,
		PRFWeight:      DefaultPRFWeight,
		IDF:            bm25.IDFPlusOne,
		RerankMinScore: DefaultRerankMinScore,
		RerankBudgetMS: DefaultRerankBudgetMS,
	}
}

// ServicePolicy is the default profile of the HTTP service and of
// `cordon query`: the policy a request's absent fields take. SPEC's seed
// profile ([DefaultPolicy]) stays the default of replay scripts; the service
// profile was chosen on the development split of docs/quality.md's query
// sets and confirmed on their test split, and every field can still be set
// per request. Against the seed it:
//
//   - fuses with rrf_k 10 and the lexical ranking weighted 2: with the
//     hashed dense side, BM25 is the stronger ranking, and rrf_k 60 let
//     every chunk both sides found outrank every chunk only BM25 found;
//   - reranks by idf_overlap blended 0.9 with the chunk's BM25 relative to
//     the best: the overlap floor still refuses what shares no rare word,
//     the blend keeps BM25's order among what passes;
//   - lowers the floor to 0.1, since idf_overlap is 0 for a chunk without
//     the query's words whatever the floor;
//   - keeps one chunk per document (max_chunks_per_doc 1), so five results
//     are five documents; set it to 0 for several passages of one document.
//   - weighs a query term the query repeats (qtf_k3 8): sentence-like
//     queries say their subject more than once, and that is evidence BM25
//     over distinct terms drops;
//   - ranks with the Robertson-Spärck Jones idf (idf "rsj"): a word in
//     half the chunks or more weighs almost nothing instead of up to ln 2,
//     which long queries full of such words need;
//   - fuses in the document ranking weighted 1 (rrf_weights.doc): a
//     document whose chunks each hold some of the query's words is a better
//     answer than its best chunk alone says, most of all for queries that
//     paraphrase the page;
//   - mixes phrase proximity into the rerank score (rerank_proximity
//     0.25): a chunk that holds the query's words next to each other, in
//     the query's order, is the better answer to a query quoted or
//     half-remembered from the page;
//   - mixes document evidence into the rerank score (rerank_doc 0.1): the
//     document ranking otherwise only orders the reranker's input, and a
//     sentence the index lacks is answered best by the page that holds
//     most of its words, wherever they are;
//   - scores each query word's forms and fields as one BM25F term
//     (bm25f): a token of another form of the word counts 0.5 of one as
//     written (stem_weight), so a tenant under the English analyzer finds
//     "contribute" for "contribution" and the exact form still ranks
//     first; a query word in the chunk's document title or section
//     headings counts as 4 * 4 / n occurrences in its text (field_weight
//     4), n the length of that field, so a one-word title that names the
//     query's word outweighs a page that repeats it. SciFact train with
//     titles as the documents' titles, nDCG@10 0.671 to 0.700 (bm25f,
//     field_weight 1), 0.699 now; PostgreSQL's manual, "what does the X
//     command do", MRR@10 0.606 to 0.725 on dev (docs/quality.md).
func ServicePolicy() Policy {
	p := DefaultPolicy()
	p.RRFK = 10
	p.RRFWeights = Weights{BM25: 2, Cosine: 1, Doc: 1}
	p.Rerank = RerankIDFOverlap
	p.RerankBlend = 0.9
	p.MinScore = 0.1
	p.MaxChunksPerDoc = 1
	p.QTFK3 = 8
	p.IDF = bm25.IDFRSJ
	p.RerankProximity = 0.25
	p.RerankDoc = 0.1
	p.StemWeight = 0.5
	p.FieldWeight = 4
	p.BM25F = true
	return p
}

// ModelDefaults is the service profile's overlay for a tenant whose
// embedding model is not hashing: a sentence encoder's cosine carries
// meaning the words do not, so fusion weighs the two rankings alike and
// the rerank score mixes in the cosine: rrf_weights {"bm25": 1, "cosine":
// 1}, rerank_blend 0.75, rerank_dense 0.15 (measured in docs/embeddings.md;
// with hashing the same overlay loses, so it applies to models only). A
// request's patch is applied over the profile with this overlay, so its own
// values win. It sets only fields of the tail of the pipeline, never one
// that decides what the store ranks.
func ModelDefaults() *PolicyPatch {
	bm25, cos, blend, dense := 1.0, 1.0, 0.75, 0.15
	return &PolicyPatch{RRFWeights: &WeightsPatch{BM25: &bm25, Cosine: &cos}, RerankBlend: &blend, RerankDense: &dense}
}

// Limits bound the policy fields whose values set how much work one
// retrieve does: the candidates kept per ranking (top_n), the chunks the
// reranker reads (rerank_depth), the chunks returned (limit), and query
// expansion's feedback chunks (prf_docs) and added terms (prf_terms). They
// protect the HTTP service from one caller's costly requests, so the
// service applies them to each request's policy ([Limits.Check]), taking
// them from cordon serve's --max-* flags. The retriever does not: replay
// scripts and cordon-lab eval are an operator's tools and keep SPEC
// section 9's ranges, where top_n 100000 is valid.
type Limits struct {
	TopN        int
	RerankDepth int
	Limit       int
	PRFDocs     int
	PRFTerms    int
}

// The default limits, from the measured cost of one retrieve with each
// field raised (docs/benchmarks.md, "What one retrieve may cost"): at these
// values each field alone costs at most about 6 default retrieves, all of
// them together about 12. MaxLimit bounds every limit a deployment may set.
const (
	DefaultMaxTopN        = 200
	DefaultMaxRerankDepth = 200
	// DefaultMaxLimit is twice DefaultMaxTopN: the fused list holds at
	// most top_n chunks of each ranking, so no valid policy's list is cut
	// by the limit alone.
	DefaultMaxLimit    = 2 * DefaultMaxTopN
	DefaultMaxPRFDocs  = 50
	DefaultMaxPRFTerms = 50
	MaxLimit           = 10000
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{TopN: DefaultMaxTopN, RerankDepth: DefaultMaxRerankDepth, Limit: DefaultMaxLimit,
		PRFDocs: DefaultMaxPRFDocs, PRFTerms: DefaultMaxPRFTerms}
}

// Validate checks that every limit is in [1, MaxLimit].
func (l Limits) Validate() error {
	for _, f := range l.fields(Policy{}) {
		if f.max < 1 || f.max > MaxLimit {
			return fmt.Errorf("%w: the limit of %s, %d, must be in [1, %d]", ErrInvalidPolicy, f.name, f.max, MaxLimit)
		}
	}
	return nil
}

// Check returns a [*LimitError] naming the first field of p over its limit,
// in the order top_n, rerank_depth, limit, prf_docs, prf_terms, or nil when
// none is. It checks nothing else: [Policy.Validate] checks the ranges.
func (l Limits) Check(p Policy) error {
	for _, f := range l.fields(p) {
		if f.v > f.max {
			return &LimitError{Field: f.name, Value: f.v, Max: f.max}
		}
	}
	return nil
}

// limited is a policy field a limit bounds: its name, p's value and the
// limit.
type limited struct {
	name   string
	v, max int
}

// fields lists the bounded fields of p, in the order they are checked.
func (l Limits) fields(p Policy) []limited {
	return []limited{{"top_n", p.TopN, l.TopN}, {"rerank_depth", p.RerankDepth, l.RerankDepth}, {"limit", p.Limit, l.Limit},
		{"prf_docs", p.PRFDocs, l.PRFDocs}, {"prf_terms", p.PRFTerms, l.PRFTerms}}
}

// Validate checks every field's range (SPEC section 9's, and the Cordon
// extensions'), for a retriever without a model reranker, where rerank
// "model" is an error; [Retriever.Validate] checks for the retriever at
// hand. The service's cost limits are not ranges: [Limits.Check].
func (p Policy) Validate() error { return p.validate(false) }

// validate checks every field's range; model says whether a model reranker
// can serve rerank "model".
func (p Policy) validate(model bool) error {
	switch {
	case p.Limit < 1:
		return fmt.Errorf("%w: limit %d must be >= 1", ErrInvalidPolicy, p.Limit)
	case p.TopN < 1:
		return fmt.Errorf("%w: top_n %d must be >= 1", ErrInvalidPolicy, p.TopN)
	case p.RerankDepth < 1:
		return fmt.Errorf("%w: rerank_depth %d must be >= 1", ErrInvalidPolicy, p.RerankDepth)
	case p.RRFK < 1:
		return fmt.Errorf("%w: rrf_k %d must be >= 1", ErrInvalidPolicy, p.RRFK)
	case !(p.MinScore >= 0 && p.MinScore <= 1):
		return fmt.Errorf("%w: min_score %v must be in [0, 1]", ErrInvalidPolicy, p.MinScore)
	case p.MaxStaleTicks != nil && *p.MaxStaleTicks < 0:
		return fmt.Errorf("%w: max_stale_ticks %d must be >= 0", ErrInvalidPolicy, *p.MaxStaleTicks)
	case !weightOK(p.RRFWeights.BM25):
		return fmt.Errorf("%w: rrf_weights.bm25 %v must be a finite number >= 0", ErrInvalidPolicy, p.RRFWeights.BM25)
	case !weightOK(p.RRFWeights.Cosine):
		return fmt.Errorf("%w: rrf_weights.cosine %v must be a finite number >= 0", ErrInvalidPolicy, p.RRFWeights.Cosine)
	case !weightOK(p.RRFWeights.Doc):
		return fmt.Errorf("%w: rrf_weights.doc %v must be a finite number >= 0", ErrInvalidPolicy, p.RRFWeights.Doc)
	case p.Rerank == RerankModel && !model:
		return fmt.Errorf("%w: rerank %q needs a model reranker, and this retriever has none: start the server with --reranker-url (cordon-lab eval takes it too)", ErrInvalidPolicy, p.Rerank)
	case p.Rerank != RerankOverlap && p.Rerank != RerankIDFOverlap && p.Rerank != RerankModel:
		if !model {
			// The kinds this retriever serves (replay scripts pin the
			// wording).
			return fmt.Errorf("%w: rerank %q must be %q or %q", ErrInvalidPolicy, p.Rerank, RerankOverlap, RerankIDFOverlap)
		}
		return fmt.Errorf("%w: rerank %q must be %q, %q or %q", ErrInvalidPolicy, p.Rerank, RerankOverlap, RerankIDFOverlap, RerankModel)
	case !(p.RerankBlend >= 0 && p.RerankBlend <= 1):
		return fmt.Errorf("%w: rerank_blend %v must be in [0, 1]", ErrInvalidPolicy, p.RerankBlend)
	case !(p.RerankDense >= 0 && p.RerankDense <= 1 && p.RerankBlend+p.RerankDense <= 1):
		return fmt.Errorf("%w: rerank_dense %v must be in [0, 1] with rerank_blend + rerank_dense <= 1", ErrInvalidPolicy, p.RerankDense)
	case !(p.RerankProximity >= 0 && p.RerankProximity <= 1):
		return fmt.Errorf("%w: rerank_proximity %v must be in [0, 1]", ErrInvalidPolicy, p.RerankProximity)
	case !(p.RerankDoc >= 0 && p.RerankDoc <= 1):
		return fmt.Errorf("%w: rerank_doc %v must be in [0, 1]", ErrInvalidPolicy, p.RerankDoc)
	case p.MaxChunksPerDoc < 0:
		return fmt.Errorf("%w: max_chunks_per_doc %d must be >= 0 (0: no cap)", ErrInvalidPolicy, p.MaxChunksPerDoc)
	case p.PRFDocs < 0:
		return fmt.Errorf("%w: prf_docs %d must be >= 0 (0: no query expansion)", ErrInvalidPolicy, p.PRFDocs)
	case p.PRFTerms < 1:
		return fmt.Errorf("%w: prf_terms %d must be >= 1", ErrInvalidPolicy, p.PRFTerms)
	case !(p.StemWeight >= 0 && p.StemWeight <= 1):
		return fmt.Errorf("%w: stem_weight %v must be in [0, 1]", ErrInvalidPolicy, p.StemWeight)
	case !(p.FieldWeight >= 0 && p.FieldWeight <= MaxFieldWeight):
		return fmt.Errorf("%w: field_weight %v must be in [0, %d]", ErrInvalidPolicy, p.FieldWeight, MaxFieldWeight)
	case !(p.PRFWeight >= 0 && p.PRFWeight <= 1):
		return fmt.Errorf("%w: prf_weight %v must be in [0, 1]", ErrInvalidPolicy, p.PRFWeight)
	case p.IDF != bm25.IDFPlusOne && p.IDF != bm25.IDFRSJ:
		return fmt.Errorf("%w: idf %q must be %q or %q", ErrInvalidPolicy, p.IDF, bm25.IDFPlusOne, bm25.IDFRSJ)
	case !(p.QTFK3 >= 0 && p.QTFK3 <= MaxQTFK3):
		return fmt.Errorf("%w: qtf_k3 %v must be in [0, %v] (0: every distinct query term counts once)", ErrInvalidPolicy, p.QTFK3, float64(MaxQTFK3))
	case math.IsNaN(p.RerankMinScore) || math.IsInf(p.RerankMinScore, 0):
		return fmt.Errorf("%w: rerank_min_score %v must be a finite number", ErrInvalidPolicy, p.RerankMinScore)
	case p.RerankBudgetMS < 1 || p.RerankBudgetMS > MaxRerankBudgetMS:
		return fmt.Errorf("%w: rerank_budget_ms %d must be in [1, %d]", ErrInvalidPolicy, p.RerankBudgetMS, MaxRerankBudgetMS)
	case !p.StopWords.valid():
		return fmt.Errorf("%w: stop_words %q must be %q, %q or %q", ErrInvalidPolicy, p.StopWords, "", StopNone, StopEnglish)
	case p.DenseFallback != FallbackNone && p.DenseFallback != FallbackLexical:
		return fmt.Errorf("%w: dense_fallback %q must be %q or %q", ErrInvalidPolicy, p.DenseFallback, FallbackNone, FallbackLexical)
	}
	return nil
}

func weightOK(w float64) bool { return w >= 0 && !math.IsInf(w, 1) }
