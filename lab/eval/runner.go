package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

// Pipeline names one retrieval pipeline compared.
type Pipeline string

// The built-in pipelines, in report order. Profiles ([Options.Profiles])
// add pipelines of their own name after them.
const (
	BM25Only     Pipeline = "bm25"
	DenseOnly    Pipeline = "dense"
	HybridRRF    Pipeline = "hybrid_rrf"
	HybridRerank Pipeline = "hybrid_rrf_rerank"
	Seed         Pipeline = "seed"
)

// Pipelines lists the built-in pipelines in report order.
var Pipelines = []Pipeline{BM25Only, DenseOnly, HybridRRF, HybridRerank, Seed}

// Mode says what a pipeline ranks with.
type Mode string

// The modes.
const (
	// Lexical is the store's BM25 ranking alone.
	Lexical Mode = "bm25"
	// Dense is the store's cosine ranking alone.
	Dense Mode = "dense"
	// Hybrid is [retrieval.Tail] over both rankings: fusion, rerank, limit.
	Hybrid Mode = "hybrid"
)

// Spec is one pipeline: its name, mode and policy (Limit [K]).
type Spec struct {
	Name   Pipeline
	Mode   Mode
	Policy retrieval.Policy
}

// Profile is a named policy run as a hybrid pipeline of its own.
type Profile struct {
	Name   Pipeline
	Policy retrieval.Policy
}

// Tenant is the one tenant an evaluation index uses. Every document is public
// and the principal holds clearance restricted: the evaluation measures
// ranking, not entitlement.
const Tenant = "eval"

// Document is one corpus document.
type Document struct {
	ID   string
	Text string
	// Title is the document's title (searched as field terms), or "".
	Title string
}

// Options configure one evaluation.
type Options struct {
	// Settings are the index settings (chunk sizes, BM25 parameters and
	// statistics scope, dims).
	Settings index.Settings
	// Strategy says how text reaches the chunker; default Structured.
	Strategy Strategy
	// DropSections are section names removed from every document before
	// indexing (see [DropSections]).
	DropSections []string
	// Policy is the service profile with Limit [K]: [HybridRerank] runs it,
	// [HybridRRF] runs it with EnableRerank false, and [BM25Only] and
	// [DenseOnly] take its TopN. [DefaultOptions] sets
	// [retrieval.ServicePolicy].
	Policy retrieval.Policy
	// SeedPolicy is what the [Seed] pipeline runs: [retrieval.DefaultPolicy]
	// with Limit [K] in [DefaultOptions].
	SeedPolicy retrieval.Policy
	// Profiles are extra hybrid pipelines, after the built-in ones.
	Profiles []Profile
	// Bootstrap is the number of paired bootstrap resamples behind the
	// reported confidence intervals (0: none); Baseline the pipeline every
	// other one is compared with ([BM25Only] when empty).
	Bootstrap int
	Baseline  Pipeline
	// Workers run queries in parallel; results do not depend on it.
	Workers int
	// PerQuery keeps every query's rankings and chunks in the report.
	PerQuery bool
	// Depth is how many documents each pipeline's document-level ranking
	// holds (its Doc metrics and its TREC run): 0 or [K] keeps K, up to
	// [MaxDepth]. Deeper than K, the ranking continues past what the
	// pipeline's own ranking holds with the same pipeline ranked deeper
	// ([DeepChunks] chunks per document asked for): the first documents,
	// and so every @10 metric, stay the pipeline's own. From [DeepK] on,
	// the Doc metrics include R@100.
	Depth int
	// Progress, when set, is called as queries finish, never concurrently.
	Progress func(done, total int)
	// Models serves Settings.Model when it is not hashing: documents are
	// embedded as they are indexed, each query once.
	Models *embed.Registry
	// Reranker, when set, serves the pipelines whose policy reranks with
	// "model" ([retrieval.WithReranker]); without it they are invalid.
	Reranker rerank.Reranker
}

// retriever is the retrieve pipeline over st with opts' model reranker.
func (opts Options) retriever(st retrieval.Store) *retrieval.Retriever {
	if opts.Reranker == nil {
		return retrieval.New(st)
	}
	return retrieval.New(st, retrieval.WithReranker(opts.Reranker))
}

// Validate checks p as opts' pipelines run it: rerank "model" is valid
// when opts has a reranker.
func (opts Options) Validate(p retrieval.Policy) error {
	return opts.retriever(nil).Validate(p)
}

// DefaultPolicy is the service profile ([retrieval.ServicePolicy]) with
// Limit = K, so every pipeline returns at most K chunks.
func DefaultPolicy() retrieval.Policy {
	p := retrieval.ServicePolicy()
	p.Limit = K
	return p
}

// SeedPolicy is SPEC section 5's seed profile ([retrieval.DefaultPolicy])
// with Limit = K.
func SeedPolicy() retrieval.Policy {
	p := retrieval.DefaultPolicy()
	p.Limit = K
	return p
}

// MaxDepth bounds [Options.Depth]: a deeper ranking asks for top_n and
// rerank_depth [DeepChunks] times the depth, and past the Retriever's
// default limits ([retrieval.DefaultLimits]) a pipeline with query
// expansion, which runs the whole Retriever, would be refused.
const MaxDepth = retrieval.DefaultMaxTopN / DeepChunks

// DeepChunks is how many chunks per document of the depth a deeper ranking
// asks each side for (its top_n, and rerank_depth for a hybrid pipeline):
// SciFact's abstracts are about two 200-word chunks, so twice the depth in
// chunks holds about the depth in documents. A single-side pipeline asks
// for twice as many again, as often as it needs to reach the depth.
const DeepChunks = 2

func (opts Options) depth() int {
	if opts.Depth == 0 {
		return K
	}
	return opts.Depth
}

// DefaultBootstrap is the default number of bootstrap resamples.
const DefaultBootstrap = 1000

// DefaultOptions evaluates with the default index settings, the service
// profile and the seed profile, and 1000 bootstrap resamples against BM25.
func DefaultOptions() Options {
	return Options{Settings: index.DefaultSettings(), Strategy: Structured, Policy: DefaultPolicy(),
		SeedPolicy: SeedPolicy(), Bootstrap: DefaultBootstrap, Baseline: BM25Only}
}

// Specs lists the pipelines opts runs, in report order.
func (opts Options) Specs() []Spec {
	rrf := opts.Policy
	rrf.EnableRerank = false
	out := []Spec{
		{BM25Only, Lexical, opts.Policy},
		{DenseOnly, Dense, opts.Policy},
		{HybridRRF, Hybrid, rrf},
		{HybridRerank, Hybrid, opts.Policy},
		{Seed, Hybrid, opts.SeedPolicy},
	}
	for _, p := range opts.Profiles {
		out = append(out, Spec{p.Name, Hybrid, p.Policy})
	}
	return out
}

// validate checks every pipeline's policy and that names are distinct.
func (opts Options) validate() error {
	seen := make(map[Pipeline]bool)
	for _, s := range opts.Specs() {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("%w: pipeline name %q empty or used twice", ErrPipeline, s.Name)
		}
		seen[s.Name] = true
		if err := opts.Validate(s.Policy); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if s.Policy.Limit != K || s.Policy.RerankDepth < K || s.Policy.TopN < K {
			return fmt.Errorf("%s: %w: evaluation needs limit %d, rerank_depth >= %d and top_n >= %d",
				s.Name, retrieval.ErrInvalidPolicy, K, K, K)
		}
	}
	if opts.Depth != 0 && (opts.Depth < K || opts.Depth > MaxDepth) {
		return fmt.Errorf("%w: %d: want 0 (%d), or %d to %d", ErrDepth, opts.Depth, K, K, MaxDepth)
	}
	if opts.Bootstrap > 0 && !seen[opts.baseline()] {
		return fmt.Errorf("%w: baseline %q is not a pipeline of this run", ErrPipeline, opts.baseline())
	}
	return nil
}

func (opts Options) baseline() Pipeline {
	if opts.Baseline == "" {
		return BM25Only
	}
	return opts.Baseline
}

// PolicyInfo is a policy in SPEC section 9's shape, for reports.
type PolicyInfo struct {
	EnableRerank bool    `json:"enable_rerank"`
	MinScore     float64 `json:"min_score"`
	TopN         int     `json:"top_n"`
	RerankDepth  int     `json:"rerank_depth"`
	RRFK         int64   `json:"rrf_k"`
	Limit        int     `json:"limit"`
	RRFWeights   struct {
		BM25   float64 `json:"bm25"`
		Cosine float64 `json:"cosine"`
		Doc    float64 `json:"doc,omitempty"`
	} `json:"rrf_weights"`
	Rerank          retrieval.RerankKind `json:"rerank"`
	RerankBlend     float64              `json:"rerank_blend"`
	RerankProximity float64              `json:"rerank_proximity,omitempty"`
	RerankDoc       float64              `json:"rerank_doc,omitempty"`
	StemWeight      float64              `json:"stem_weight,omitempty"`
	FieldWeight     float64              `json:"field_weight,omitempty"`
	BM25F           bool                 `json:"bm25f,omitempty"`
	// The model reranker's floor and budget, given for rerank "model"
	// only.
	RerankMinScore *float64 `json:"rerank_min_score,omitempty"`
	RerankBudgetMS int      `json:"rerank_budget_ms,omitempty"`
}

func policyInfo(p retrieval.Policy) PolicyInfo {
	in := PolicyInfo{EnableRerank: p.EnableRerank, MinScore: p.MinScore, TopN: p.TopN, RerankDepth: p.RerankDepth,
		RRFK: p.RRFK, Limit: p.Limit, Rerank: p.Rerank, RerankBlend: p.RerankBlend,
		RerankProximity: p.RerankProximity, RerankDoc: p.RerankDoc, StemWeight: p.StemWeight, FieldWeight: p.FieldWeight, BM25F: p.BM25F}
	in.RRFWeights.BM25, in.RRFWeights.Cosine, in.RRFWeights.Doc = p.RRFWeights.BM25, p.RRFWeights.Cosine, p.RRFWeights.Doc
	if p.Rerank == retrieval.RerankModel {
		floor := p.RerankMinScore
		in.RerankMinScore, in.RerankBudgetMS = &floor, p.RerankBudgetMS
	}
	return in
}

// PipelineInfo describes one pipeline of a report.
type PipelineInfo struct {
	Name   Pipeline   `json:"name"`
	Mode   Mode       `json:"mode"`
	Policy PolicyInfo `json:"policy"`
}

// Report is one evaluation's result.
type Report struct {
	Documents int      `json:"documents"`
	Chunks    int      `json:"chunks"`
	Refused   []string `json:"refused"` // documents the store refused after DropSections, as "id: reason"
	Removed   int      `json:"removed_passages"`
	Queries   int      `json:"queries"`
	MultiRel  int      `json:"queries_with_several_relevant"`
	// Depth is the documents of each pipeline's document-level ranking
	// ([Options.Depth]).
	Depth        int      `json:"depth"`
	Strategy     Strategy `json:"strategy"`
	MaxWords     int      `json:"max_words"`
	OverlapWords int      `json:"overlap_words"`
	BM25K1       float64  `json:"bm25_k1"`
	BM25B        float64  `json:"bm25_b"`
	Statistics   string   `json:"bm25_statistics"`
	// Model is the dense side's embedding model and dimensions.
	Model        string   `json:"model"`
	DropSections []string `json:"drop_sections"`
	// Policy is the service profile's main fields.
	Policy struct {
		Limit       int     `json:"limit"`
		TopN        int     `json:"top_n"`
		RerankDepth int     `json:"rerank_depth"`
		RRFK        int64   `json:"rrf_k"`
		MinScore    float64 `json:"min_score"`
	} `json:"policy"`
	Pipelines   []PipelineInfo   `json:"pipelines"`
	Results     []PipelineResult `json:"results"`
	Comparisons []Comparison     `json:"comparisons"`
	Intervals   []Interval       `json:"intervals,omitempty"`
	Kinds       []KindResult     `json:"kinds,omitempty"`
	PerQuery    []QueryResult    `json:"per_query,omitempty"`
}

// PipelineResult is one pipeline's averaged metrics and how many documents it
// returned.
type PipelineResult struct {
	Pipeline Pipeline `json:"pipeline"`
	// Metrics are chunk-level: over the documents of the first K chunks.
	Metrics
	// Doc are document-level: over the first K (or [Options.Depth])
	// distinct documents of the pipeline's whole ranking (its limit
	// lifted).
	Doc Metrics `json:"doc"`
	// MeanDocs is the mean number of distinct documents returned per query
	// (at most K).
	MeanDocs float64 `json:"mean_docs"`
	// Empty counts queries for which the pipeline returned nothing.
	Empty int `json:"empty"`
	// ModelShed counts queries whose model rerank was shed (a timeout, an
	// error, an open breaker): their rankings are the fused order.
	ModelShed int `json:"model_shed,omitempty"`
}

// KindResult is the results over the queries of one kind.
type KindResult struct {
	Kind    string           `json:"kind"`
	Queries int              `json:"queries"`
	Results []PipelineResult `json:"results"`
}

// Comparison counts, query by query, how often pipeline A's reciprocal rank
// (within K) beats, equals or trails pipeline B's, and the same for recall@K.
type Comparison struct {
	A            Pipeline `json:"a"`
	B            Pipeline `json:"b"`
	RRBetter     int      `json:"rr_better"`
	RRSame       int      `json:"rr_same"`
	RRWorse      int      `json:"rr_worse"`
	RecallBetter int      `json:"recall_better"`
	RecallSame   int      `json:"recall_same"`
	RecallWorse  int      `json:"recall_worse"`
}

// comparisons are the pairs a report compares.
var comparisons = [][2]Pipeline{
	{HybridRerank, BM25Only},
	{HybridRerank, DenseOnly},
	{HybridRRF, BM25Only},
	{HybridRRF, DenseOnly},
	{HybridRerank, HybridRRF},
}

// Hit is one returned chunk with how it was placed: each side's score and
// 1-based rank (absent when the chunk is not in that truncated ranking),
// the fused RRF score and the rerank score (hybrid pipelines). It is not
// [retrieval.ScoredJSON]: a per-query line leaves out what a pipeline did
// not compute (a single-side pipeline has no fused score) rather than
// writing null, and carries no citation span.
type Hit struct {
	ChunkID    string   `json:"chunk_id"`
	DocID      string   `json:"doc_id"`
	BM25       *float64 `json:"bm25,omitempty"`
	BM25Rank   *int     `json:"bm25_rank,omitempty"`
	Cosine     *float64 `json:"cosine,omitempty"`
	CosineRank *int     `json:"cosine_rank,omitempty"`
	Fused      *float64 `json:"fused,omitempty"`
	Rerank     *float64 `json:"rerank,omitempty"`
}

// QueryResult is one query's rankings and metrics per pipeline.
type QueryResult struct {
	ID       string                     `json:"id,omitempty"`
	Line     int                        `json:"line,omitempty"`
	Query    string                     `json:"query"`
	Kind     string                     `json:"kind,omitempty"`
	Split    string                     `json:"split,omitempty"`
	Extra    map[string]json.RawMessage `json:"extra,omitempty"`
	Relevant []string                   `json:"relevant"`
	Rankings map[Pipeline][]string      `json:"rankings"`     // documents of the first K chunks
	DocRanks map[Pipeline][]string      `json:"doc_rankings"` // first K distinct documents
	Metrics  map[Pipeline]Metrics       `json:"metrics"`
	Doc      map[Pipeline]Metrics       `json:"doc_metrics"`
	Chunks   map[Pipeline][]Hit         `json:"chunks,omitempty"`
	// ModelShed lists the pipelines whose model rerank was shed for this
	// query.
	ModelShed []Pipeline `json:"model_shed,omitempty"`
}

// Run indexes docs in an in-memory store under opts (each query's Remove
// passage cut out of its relevant documents first) and runs every query
// through every pipeline of opts.
func Run(ctx context.Context, docs []Document, queries []Query, opts Options) (Report, error) {
	if len(queries) == 0 {
		return Report{}, ErrNoQueries
	}
	if err := opts.validate(); err != nil {
		return Report{}, err
	}
	ids := make(map[string]bool, len(docs))
	for _, d := range docs {
		ids[d.ID] = true
	}
	for i, q := range queries {
		for _, r := range q.Relevant {
			if !ids[r] {
				return Report{}, fmt.Errorf("query %d (%q): %w: %q", i+1, queryLabel(q.Query), ErrRelevantMissing, r)
			}
		}
	}
	docs, removed, err := applyRemovals(docs, queries)
	if err != nil {
		return Report{}, err
	}
	st, rep, err := build(ctx, docs, opts, nil)
	if err != nil {
		return Report{}, err
	}
	rep.Removed = removed
	rep.Queries = len(queries)
	rep.Depth = opts.depth()
	for _, q := range queries {
		if len(relevantSet(q.Relevant)) > 1 {
			rep.MultiRel++
		}
	}
	specs := opts.Specs()
	for _, s := range specs {
		rep.Pipelines = append(rep.Pipelines, PipelineInfo{Name: s.Name, Mode: s.Mode, Policy: policyInfo(s.Policy)})
	}

	per := make([]QueryResult, len(queries))
	workers := opts.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		done    int
		firstEr error
	)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				qr, err := runQuery(ctx, opts.retriever(st), st, opts.Models, opts.Settings.Spec(), queries[i], specs, opts.PerQuery, opts.depth())
				mu.Lock()
				if err != nil && firstEr == nil {
					firstEr = fmt.Errorf("query %d (%q): %w", i+1, queryLabel(queries[i].Query), err)
				}
				per[i] = qr
				done++
				if opts.Progress != nil {
					opts.Progress(done, len(queries)) // never concurrently
				}
				mu.Unlock()
			}
		}()
	}
	for i := range queries {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	if firstEr != nil {
		return Report{}, firstEr
	}
	names := make([]Pipeline, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	rep.Results = results(names, per)
	rep.Comparisons = compare(names, per)
	if opts.Bootstrap > 0 {
		rep.Intervals = intervals(names, opts.baseline(), per, opts.Bootstrap, opts.depth() >= DeepK)
	}
	rep.Kinds = byKind(names, queries, per)
	if opts.PerQuery {
		rep.PerQuery = per
	}
	return rep, nil
}

// applyRemovals is [ApplyRemovals] that also counts the passages cut.
func applyRemovals(docs []Document, qs []Query) ([]Document, int, error) {
	out, err := ApplyRemovals(docs, qs)
	if err != nil {
		return nil, 0, err
	}
	n := 0
	for i := range out {
		if out[i].Text != docs[i].Text {
			n++
		}
	}
	return out, n, nil
}

// build indexes docs under opts; chunk, when set, sees every stored chunk.
func build(ctx context.Context, docs []Document, opts Options, chunk func(cordontype.Chunk)) (*memory.Store, Report, error) {
	st, err := memory.NewWithModels(opts.Settings, opts.Models)
	if err != nil {
		return nil, Report{}, err
	}
	rep := Report{
		Documents:    len(docs),
		Refused:      []string{},
		Strategy:     opts.Strategy,
		MaxWords:     opts.Settings.Chunking.MaxWords,
		OverlapWords: opts.Settings.Chunking.OverlapWords,
		BM25K1:       opts.Settings.BM25.K1,
		BM25B:        opts.Settings.BM25.B,
		Statistics:   string(opts.Settings.Statistics),
		Model:        opts.Settings.Spec().String(),
		DropSections: append([]string{}, opts.DropSections...),
	}
	if rep.Strategy == "" {
		rep.Strategy = Structured
	}
	rep.Policy.Limit = opts.Policy.Limit
	rep.Policy.TopN = opts.Policy.TopN
	rep.Policy.RerankDepth = opts.Policy.RerankDepth
	rep.Policy.RRFK = opts.Policy.RRFK
	rep.Policy.MinScore = opts.Policy.MinScore
	for _, d := range docs {
		text := PrepareText(d.Text, rep.Strategy, opts.DropSections)
		chunks, err := st.Put(ctx, cordontype.Document{
			Tenant:         Tenant,
			DocID:          d.ID,
			Text:           text,
			Title:          d.Title,
			Classification: cordontype.Public,
		})
		if err != nil {
			if errors.Is(err, cordontype.ErrInvalid) && len(opts.DropSections) > 0 {
				// Only a held-out section can make a loaded document
				// unindexable; it stays a (now unfindable) relevant document.
				rep.Refused = append(rep.Refused, d.ID+": "+err.Error())
				continue
			}
			return nil, Report{}, fmt.Errorf("index %s: %w", d.ID, err)
		}
		rep.Chunks += len(chunks)
		if chunk != nil {
			for _, c := range chunks {
				chunk(c)
			}
		}
	}
	return st, rep, nil
}

// PrepareText is what a document's text becomes before chunking under a
// strategy: held-out sections removed, then, for [Flat], structure
// neutralised.
func PrepareText(text string, s Strategy, drop []string) string {
	text = DropSections(text, drop)
	if s == Flat {
		text = FlattenStructure(text)
	}
	return text
}

// principal sees every evaluation chunk.
var principal = cordontype.Principal{Tenant: Tenant, Clearance: cordontype.Restricted, Barriers: []string{}}

// runQuery runs one query through every pipeline. The store ranks the query
// once per distinct top_n; the hybrid pipelines are the end of rt's
// pipeline ([retrieval.Retriever.Finish]) over those rankings, so they are
// exactly what the Retriever returns. Each pipeline's document ranking
// holds depth documents ([Options.Depth]).
func runQuery(ctx context.Context, rt *retrieval.Retriever, st retrieval.Store, models *embed.Registry, spec embed.Spec, q Query, specs []Spec, keepChunks bool, depth int) (QueryResult, error) {
	tokens := analysis.Tokenize(q.Query)
	allTerms := analysis.TokenSet(q.Query)
	dense, err := retrieval.EmbedQuery(ctx, models, spec, q.Query, tokens)
	if err != nil {
		return QueryResult{}, fmt.Errorf("embed the query: %w", err)
	}
	// The store ranks the query once per distinct (qtf_k3, idf, document
	// ranking, stop list), at the deepest top_n any pipeline asks for: a
	// shallower ranking is that one's prefix (each ranking is a total
	// order, ties broken by id, and the funnel's counts do not depend on
	// top_n), so every pipeline sees what the store gives for its own
	// top_n.
	deepest := 0
	for _, s := range specs {
		deepest = max(deepest, s.Policy.TopN)
	}
	if depth > K {
		deepest = max(deepest, DeepChunks*depth)
	}
	type rankKey struct {
		k3    float64
		idf   bm25.IDFKind
		docs  bool
		stop  retrieval.StopWords
		stem  float64
		field float64
		bm25f bool
	}
	type rankedAt struct {
		topN int
		rk   retrieval.Rankings
	}
	ranked := make(map[rankKey]rankedAt)
	// rank ranks as the Retriever does: the stop list reduces the terms
	// (and the tokens qtf weights count), the dense side keeps the query.
	rank := func(topN int, k3 float64, idf bm25.IDFKind, docs bool, stop retrieval.StopWords, stem, field float64, bf bool) (retrieval.Rankings, error) {
		key := rankKey{k3, idf, docs, stop, stem, field, bf}
		if r, ok := ranked[key]; ok && r.topN >= topN {
			return truncateRankings(r.rk, topN), nil
		}
		n := max(topN, deepest)
		kept := retrieval.Stop(tokens, stop)
		terms := retrieval.Stop(allTerms, stop)
		terms, weights, combined := retrieval.LexicalTerms(kept, terms,
			retrieval.Policy{QTFK3: k3, StemWeight: stem, FieldWeight: field, BM25F: bf})
		rk, err := st.Rank(ctx, retrieval.RankRequest{Principal: principal, Tokens: tokens, Terms: terms,
			Weights: weights, Combined: combined, IDF: idf, Dense: dense, TopN: n, Docs: docs})
		if err != nil {
			return retrieval.Rankings{}, fmt.Errorf("rank: %w", err)
		}
		ranked[key] = rankedAt{n, rk}
		return truncateRankings(rk, topN), nil
	}
	qr := QueryResult{
		ID:       q.ID,
		Line:     q.Line,
		Query:    q.Query,
		Kind:     q.Kind,
		Split:    q.Split,
		Extra:    q.Extra,
		Relevant: q.Relevant,
		Rankings: make(map[Pipeline][]string, len(specs)),
		DocRanks: make(map[Pipeline][]string, len(specs)),
		Metrics:  make(map[Pipeline]Metrics, len(specs)),
		Doc:      make(map[Pipeline]Metrics, len(specs)),
	}
	if keepChunks {
		qr.Chunks = make(map[Pipeline][]Hit, len(specs))
	}
	for _, s := range specs {
		k3, idf, withDocs, stop, stem, field, bf := s.Policy.QTFK3, s.Policy.IDF, s.Policy.RRFWeights.Doc > 0, s.Policy.StopWords, s.Policy.StemWeight, s.Policy.FieldWeight, s.Policy.BM25F
		if s.Mode != Hybrid {
			// BM25 alone is SPEC section 4's: every distinct term once,
			// the plus-one idf, no stop list, no stem or field terms.
			k3, idf, withDocs, stop, stem, field, bf = 0, bm25.IDFPlusOne, false, "", 0, 0, false
		}
		terms := retrieval.Stop(allTerms, stop)
		rk, err := rank(s.Policy.TopN, k3, idf, withDocs, stop, stem, field, bf)
		if err != nil {
			return QueryResult{}, err
		}
		// hybrid is the pipeline over the shared rankings at policy p,
		// its limit lifted: Tail truncates last, so the first K of the
		// whole fused list (at most top_n chunks of each ranking) are the
		// pipeline's.
		hybrid := func(p retrieval.Policy, rk retrieval.Rankings) (retrieval.Result, error) {
			p.Limit = 2 * p.TopN
			if p.PRFDocs > 0 {
				// Query expansion ranks again with the expanded query:
				// the whole Retriever, not the tail over shared rankings.
				res, err := rt.Retrieve(ctx, retrieval.Query{Principal: principal, Text: q.Query, Policy: p})
				if err != nil {
					return res, fmt.Errorf("retrieve with expansion: %w", err)
				}
				return res, nil
			}
			return rt.Finish(ctx, rk, terms, retrieval.Query{Principal: principal, Text: q.Query, Policy: p}), nil
		}
		var all []retrieval.Scored
		switch s.Mode {
		case Lexical:
			all = sided(rk, rk.Lexical)
		case Dense:
			all = sided(rk, rk.Dense)
		default:
			res, err := hybrid(s.Policy, rk)
			if err != nil {
				return QueryResult{}, err
			}
			all = res.Chunks
			if res.Model != nil && res.Model.Shed {
				qr.ModelShed = append(qr.ModelShed, s.Name)
			}
		}
		docs := chunkDocs(all)
		top := DocRanking(docs[:min(len(docs), K)])
		ranking := docs
		if depth > K {
			// The same pipeline ranked deeper continues the ranking past
			// what its own holds; DocRanking keeps each document at its
			// first place, so the first ones stay the pipeline's own.
			var more []string
			switch s.Mode {
			case Hybrid:
				p := s.Policy
				p.TopN = max(p.TopN, DeepChunks*depth)
				p.RerankDepth = max(p.RerankDepth, DeepChunks*depth)
				deepRK, err := rank(p.TopN, k3, idf, withDocs, stop, stem, field, bf)
				if err != nil {
					return QueryResult{}, err
				}
				res, err := hybrid(p, deepRK)
				if err != nil {
					return QueryResult{}, err
				}
				more = chunkDocs(res.Chunks)
			default:
				for n := max(s.Policy.TopN, DeepChunks*depth); ; n *= 2 {
					deepRK, err := rank(n, k3, idf, withDocs, stop, stem, field, bf)
					if err != nil {
						return QueryResult{}, err
					}
					side := deepRK.Lexical
					if s.Mode == Dense {
						side = deepRK.Dense
					}
					more = make([]string, len(side))
					for i, h := range side {
						more[i] = h.Chunk.DocID
					}
					if len(side) < n || len(DocRanking(more)) >= depth {
						break
					}
				}
			}
			ranking = append(slices.Clip(docs), more...)
		}
		deepDocs := DocRanking(ranking)
		deepDocs = deepDocs[:min(len(deepDocs), depth)]
		qr.Rankings[s.Name] = top
		qr.DocRanks[s.Name] = deepDocs
		qr.Metrics[s.Name] = q.Score(top, false)
		qr.Doc[s.Name] = q.Score(deepDocs, depth >= DeepK)
		if keepChunks {
			hits := make([]Hit, 0, min(len(all), K))
			for _, c := range all[:min(len(all), K)] {
				h := Hit{ChunkID: c.Chunk.ChunkID, DocID: c.Chunk.DocID, BM25: c.BM25, BM25Rank: c.BM25Rank,
					Cosine: c.Cosine, CosineRank: c.CosineRank, Rerank: c.Rerank}
				if s.Mode == Hybrid {
					f := c.Fused
					h.Fused = &f
				}
				hits = append(hits, h)
			}
			qr.Chunks[s.Name] = hits
		}
	}
	return qr, nil
}

// truncateRankings is rk as a store gives it for top_n n: each ranking's
// first n (clipped, so an append never writes into the deeper ranking).
func truncateRankings(rk retrieval.Rankings, n int) retrieval.Rankings {
	rk.Lexical = slices.Clip(rk.Lexical[:min(len(rk.Lexical), n)])
	rk.Dense = slices.Clip(rk.Dense[:min(len(rk.Dense), n)])
	if rk.Docs != nil {
		rk.Docs = slices.Clip(rk.Docs[:min(len(rk.Docs), n)])
	}
	return rk
}

// chunkDocs is each chunk's document id, in order.
func chunkDocs(cs []retrieval.Scored) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Chunk.DocID
	}
	return out
}

// sided is one side's ranking with each chunk's score and rank on both
// sides.
func sided(rk retrieval.Rankings, hits []retrieval.Hit) []retrieval.Scored {
	type pos struct {
		score float64
		rank  int
	}
	index := func(hs []retrieval.Hit) map[string]pos {
		m := make(map[string]pos, len(hs))
		for i, h := range hs {
			m[h.Chunk.ChunkID] = pos{h.Score, i + 1}
		}
		return m
	}
	lex, dense := index(rk.Lexical), index(rk.Dense)
	out := make([]retrieval.Scored, len(hits))
	for i, h := range hits {
		out[i].Chunk = h.Chunk
		if p, ok := lex[h.Chunk.ChunkID]; ok {
			out[i].BM25, out[i].BM25Rank = &p.score, &p.rank
		}
		if p, ok := dense[h.Chunk.ChunkID]; ok {
			out[i].Cosine, out[i].CosineRank = &p.score, &p.rank
		}
	}
	return out
}

// results averages per-query results per pipeline, in query order.
func results(names []Pipeline, per []QueryResult) []PipelineResult {
	out := make([]PipelineResult, 0, len(names))
	for _, p := range names {
		ms := make([]Metrics, len(per))
		ds := make([]Metrics, len(per))
		res := PipelineResult{Pipeline: p}
		docs := 0
		for i, q := range per {
			ms[i] = q.Metrics[p]
			ds[i] = q.Doc[p]
			docs += len(q.Rankings[p])
			if len(q.Rankings[p]) == 0 {
				res.Empty++
			}
			if slices.Contains(q.ModelShed, p) {
				res.ModelShed++
			}
		}
		res.Metrics = Mean(ms)
		res.Doc = Mean(ds)
		if len(per) > 0 {
			res.MeanDocs = float64(docs) / float64(len(per))
		}
		out = append(out, res)
	}
	return out
}

// compare counts, per pair of [comparisons] present, better/same/worse.
func compare(names []Pipeline, per []QueryResult) []Comparison {
	out := make([]Comparison, 0, len(comparisons))
	for _, pair := range comparisons {
		if !slices.Contains(names, pair[0]) || !slices.Contains(names, pair[1]) {
			continue
		}
		c := Comparison{A: pair[0], B: pair[1]}
		for _, q := range per {
			a, b := q.Metrics[pair[0]], q.Metrics[pair[1]]
			switch {
			case a.MRRAt10 > b.MRRAt10:
				c.RRBetter++
			case a.MRRAt10 < b.MRRAt10:
				c.RRWorse++
			default:
				c.RRSame++
			}
			switch {
			case a.RecallAt10 > b.RecallAt10:
				c.RecallBetter++
			case a.RecallAt10 < b.RecallAt10:
				c.RecallWorse++
			default:
				c.RecallSame++
			}
		}
		out = append(out, c)
	}
	return out
}

// byKind splits the results by query kind when the queries have more than
// one kind.
func byKind(names []Pipeline, queries []Query, per []QueryResult) []KindResult {
	var kinds []string
	groups := make(map[string][]QueryResult)
	for i, q := range queries {
		if _, ok := groups[q.Kind]; !ok {
			kinds = append(kinds, q.Kind)
		}
		groups[q.Kind] = append(groups[q.Kind], per[i])
	}
	if len(kinds) < 2 {
		return nil
	}
	out := make([]KindResult, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, KindResult{Kind: k, Queries: len(groups[k]), Results: results(names, groups[k])})
	}
	return out
}

// Result returns the report's result for pipeline p.
func (rep Report) Result(p Pipeline) PipelineResult {
	for _, r := range rep.Results {
		if r.Pipeline == p {
			return r
		}
	}
	return PipelineResult{Pipeline: p}
}
