package eval

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

// Pipeline names one of the four retrieval pipelines compared.
type Pipeline string

// The pipelines, in report order.
const (
	BM25Only     Pipeline = "bm25"
	DenseOnly    Pipeline = "dense"
	HybridRRF    Pipeline = "hybrid_rrf"
	HybridRerank Pipeline = "hybrid_rrf_rerank"
)

// Pipelines lists every pipeline in report order.
var Pipelines = []Pipeline{BM25Only, DenseOnly, HybridRRF, HybridRerank}

// Tenant is the one tenant an evaluation index uses. Every document is public
// and the principal holds clearance restricted: the evaluation measures
// ranking, not entitlement.
const Tenant = "eval"

// Document is one corpus document.
type Document struct {
	ID   string
	Text string
}

// Options configure one evaluation.
type Options struct {
	// Settings are the index settings (chunk sizes, BM25 parameters, dims).
	Settings index.Settings
	// Strategy says how text reaches the chunker; default Structured.
	Strategy Strategy
	// DropSections are section names removed from every document before
	// indexing (see [DropSections]).
	DropSections []string
	// Policy is the hybrid pipelines' policy; EnableRerank is set per
	// pipeline. [DefaultPolicy] is SPEC's default with Limit = [K].
	Policy retrieval.Policy
	// Workers run queries in parallel; results do not depend on it.
	Workers int
	// PerQuery keeps every query's rankings in the report.
	PerQuery bool
	// Progress, when set, is called as queries finish, never concurrently.
	Progress func(done, total int)
}

// DefaultPolicy is SPEC section 5's default policy with Limit = K, so every
// pipeline returns at most K chunks.
func DefaultPolicy() retrieval.Policy {
	p := retrieval.DefaultPolicy()
	p.Limit = K
	return p
}

// DefaultOptions evaluates with the default index settings and policy.
func DefaultOptions() Options {
	return Options{Settings: index.DefaultSettings(), Strategy: Structured, Policy: DefaultPolicy()}
}

// Report is one evaluation's result.
type Report struct {
	Documents    int      `json:"documents"`
	Chunks       int      `json:"chunks"`
	Refused      []string `json:"refused"` // documents the store refused after DropSections, as "id: reason"
	Queries      int      `json:"queries"`
	MultiRel     int      `json:"queries_with_several_relevant"`
	Strategy     Strategy `json:"strategy"`
	MaxWords     int      `json:"max_words"`
	OverlapWords int      `json:"overlap_words"`
	DropSections []string `json:"drop_sections"`
	Policy       struct {
		Limit       int     `json:"limit"`
		TopN        int     `json:"top_n"`
		RerankDepth int     `json:"rerank_depth"`
		RRFK        int64   `json:"rrf_k"`
		MinScore    float64 `json:"min_score"`
	} `json:"policy"`
	Results     []PipelineResult `json:"results"`
	Comparisons []Comparison     `json:"comparisons"`
	PerQuery    []QueryResult    `json:"per_query,omitempty"`
}

// PipelineResult is one pipeline's averaged metrics and how many documents it
// returned.
type PipelineResult struct {
	Pipeline Pipeline `json:"pipeline"`
	Metrics
	// MeanDocs is the mean number of distinct documents returned per query
	// (at most K).
	MeanDocs float64 `json:"mean_docs"`
	// Empty counts queries for which the pipeline returned nothing.
	Empty int `json:"empty"`
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

// QueryResult is one query's document rankings and metrics per pipeline.
type QueryResult struct {
	Query    string                `json:"query"`
	Relevant []string              `json:"relevant"`
	Rankings map[Pipeline][]string `json:"rankings"`
	Metrics  map[Pipeline]Metrics  `json:"metrics"`
}

// Run indexes docs in an in-memory store under opts and runs every query
// through the four pipelines.
func Run(ctx context.Context, docs []Document, queries []Query, opts Options) (Report, error) {
	if len(queries) == 0 {
		return Report{}, ErrNoQueries
	}
	if err := opts.Policy.Validate(); err != nil {
		return Report{}, err
	}
	if opts.Policy.Limit != K || opts.Policy.RerankDepth < K || opts.Policy.TopN < K {
		return Report{}, fmt.Errorf("%w: evaluation needs limit %d, rerank_depth >= %d and top_n >= %d",
			retrieval.ErrInvalidPolicy, K, K, K)
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
	st, rep, err := build(ctx, docs, opts)
	if err != nil {
		return Report{}, err
	}
	rep.Queries = len(queries)
	for _, q := range queries {
		if len(relevantSet(q.Relevant)) > 1 {
			rep.MultiRel++
		}
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
				qr, err := runQuery(ctx, st, queries[i], opts.Policy)
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
	rep.aggregate(per)
	if opts.PerQuery {
		rep.PerQuery = per
	}
	return rep, nil
}

// build indexes docs under opts.
func build(ctx context.Context, docs []Document, opts Options) (*memory.Store, Report, error) {
	st, err := memory.New(opts.Settings)
	if err != nil {
		return nil, Report{}, err
	}
	rep := Report{
		Documents:    len(docs),
		Refused:      []string{},
		Strategy:     opts.Strategy,
		MaxWords:     opts.Settings.Chunking.MaxWords,
		OverlapWords: opts.Settings.Chunking.OverlapWords,
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

// runQuery runs one query through the four pipelines.
func runQuery(ctx context.Context, st retrieval.Store, q Query, pol retrieval.Policy) (QueryResult, error) {
	tokens := analysis.Tokenize(q.Query)
	principal := cordontype.Principal{Tenant: Tenant, Clearance: cordontype.Restricted, Barriers: []string{}}
	req := retrieval.RankRequest{
		Principal: principal,
		Tokens:    tokens,
		Terms:     analysis.TokenSet(q.Query),
		TopN:      pol.TopN,
	}
	rk, err := st.Rank(ctx, req)
	if err != nil {
		return QueryResult{}, fmt.Errorf("rank: %w", err)
	}
	qr := QueryResult{
		Query:    q.Query,
		Relevant: q.Relevant,
		Rankings: make(map[Pipeline][]string, len(Pipelines)),
		Metrics:  make(map[Pipeline]Metrics, len(Pipelines)),
	}
	qr.Rankings[BM25Only] = hitDocs(rk.Lexical)
	qr.Rankings[DenseOnly] = hitDocs(rk.Dense)
	// The hybrid pipelines are the real Retriever; it asks the store for the
	// same rankings again, which rankOnce answers without ranking twice.
	r := retrieval.New(&rankOnce{store: st, req: req, rk: rk})
	for _, p := range []Pipeline{HybridRRF, HybridRerank} {
		pp := pol
		pp.EnableRerank = p == HybridRerank
		res, err := r.Retrieve(ctx, retrieval.Query{Principal: principal, Text: q.Query, Policy: pp})
		if err != nil {
			return QueryResult{}, fmt.Errorf("%s: %w", p, err)
		}
		docs := make([]string, len(res.Chunks))
		for i, c := range res.Chunks {
			docs[i] = c.Chunk.DocID
		}
		qr.Rankings[p] = DocRanking(docs)
	}
	for _, p := range Pipelines {
		qr.Metrics[p] = Score(qr.Rankings[p], q.Relevant)
	}
	return qr, nil
}

// hitDocs is the document ranking of a store ranking's first K chunks.
func hitDocs(hits []retrieval.Hit) []string {
	hits = hits[:min(len(hits), K)]
	docs := make([]string, len(hits))
	for i, h := range hits {
		docs[i] = h.Chunk.DocID
	}
	return DocRanking(docs)
}

// aggregate fills the report's means and comparisons from per-query results,
// in query order.
func (rep *Report) aggregate(per []QueryResult) {
	rep.Results = make([]PipelineResult, 0, len(Pipelines))
	for _, p := range Pipelines {
		ms := make([]Metrics, len(per))
		res := PipelineResult{Pipeline: p}
		docs := 0
		for i, q := range per {
			ms[i] = q.Metrics[p]
			docs += len(q.Rankings[p])
			if len(q.Rankings[p]) == 0 {
				res.Empty++
			}
		}
		res.Metrics = Mean(ms)
		res.MeanDocs = float64(docs) / float64(len(per))
		rep.Results = append(rep.Results, res)
	}
	rep.Comparisons = make([]Comparison, 0, len(comparisons))
	for _, pair := range comparisons {
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
		rep.Comparisons = append(rep.Comparisons, c)
	}
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

// rankOnce is a [retrieval.Store] that answers one known request with
// rankings already computed for it and passes any other request on. Ranking
// is by far the costliest step, and every pipeline of a query needs the same
// rankings, so an evaluation ranks each query once.
type rankOnce struct {
	store retrieval.Store
	req   retrieval.RankRequest
	rk    retrieval.Rankings
	hits  int // requests answered from rk
}

func (r *rankOnce) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	if !sameRequest(req, r.req) {
		return r.store.Rank(ctx, req)
	}
	r.hits++
	out := r.rk
	out.Lexical = slices.Clone(r.rk.Lexical)
	out.Dense = slices.Clone(r.rk.Dense)
	return out, nil
}

// IDF passes on to the store.
func (r *rankOnce) IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	return r.store.IDF(ctx, p, terms)
}

func sameRequest(a, b retrieval.RankRequest) bool {
	stale := a.MaxStaleTicks == nil && b.MaxStaleTicks == nil ||
		a.MaxStaleTicks != nil && b.MaxStaleTicks != nil && *a.MaxStaleTicks == *b.MaxStaleTicks
	return stale && a.Principal.Tenant == b.Principal.Tenant && a.Principal.Clearance == b.Principal.Clearance &&
		slices.Equal(a.Principal.Barriers, b.Principal.Barriers) && slices.Equal(a.Tokens, b.Tokens) &&
		slices.Equal(a.Terms, b.Terms) && slices.Equal(a.Weights, b.Weights) && a.NowTick == b.NowTick && a.TopN == b.TopN
}
