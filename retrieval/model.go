package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/rerank"
)

// Option configures a [Retriever].
type Option func(*Retriever)

// WithReranker gives the retriever a model reranker, which makes rerank
// "model" valid. Wrap it in a [rerank.Breaker] so that a failing model is
// not waited for on every request.
func WithReranker(m rerank.Reranker) Option {
	return func(r *Retriever) { r.reranker = m }
}

// ModelRun is what the model reranker did for one retrieval: who scored
// (the reranker's provider and model) and the call's outcome. Shed is true
// when the stage was shed (timeout, error, open breaker); Err then says why.
// Outcome is empty, and nothing was sent, when no fused chunk needed a
// score.
type ModelRun struct {
	Provider string
	Model    string
	Outcome  rerank.Outcome
	Shed     bool
	Err      error
}

// Validate checks p for this retriever: [Policy.Validate], with rerank
// "model" valid when the retriever has a model reranker.
func (r *Retriever) Validate(p Policy) error {
	return p.validate(r.reranker != nil)
}

// Finish is the end of the pipeline over the store's rankings rk for q,
// terms q's distinct tokens as in the [RankRequest] behind rk: [Tail],
// except for rerank "model" (enabled), where it first sends the query text
// and the texts of the first rerank_depth fused chunks to the model
// reranker, bounded by the policy's rerank_budget_ms and by q.Reserve
// before ctx's deadline. When the call times out, fails, is refused by a breaker, or returns other than one finite
// score per chunk, the stage is shed: the result is then exactly [Tail]'s
// with enable_rerank false ("rerank" in Degraded, fused order, no rerank
// scores). Result.Model reports the call either way.
func (r *Retriever) Finish(ctx context.Context, rk Rankings, terms []string, q Query) Result {
	p := q.Policy
	var tokens []string
	if p.RerankProximity > 0 {
		tokens = analysis.Tokenize(q.Text)
	}
	if !p.EnableRerank || p.Rerank != RerankModel || r.reranker == nil {
		return Tail(rk, terms, tokens, p)
	}
	fused := Fuse(rk, p.RRFK, p.RRFWeights)
	run := &ModelRun{Provider: r.reranker.Name(), Model: r.reranker.Model()}
	scores := []float64{} // nothing to score is not a shed
	if n := min(p.RerankDepth, len(fused)); n > 0 {
		rk.fillScored(fused[:n])
		texts := make([]string, n)
		for i := range texts {
			texts[i] = fused[i].Chunk.Text
		}
		scores = r.score(ctx, q.Text, texts, time.Duration(p.RerankBudgetMS)*time.Millisecond, q.Reserve, run)
	}
	res := tail(rk, fused, terms, tokens, p, scores)
	res.Model = run
	return res
}

// score calls the model reranker within budget, and so that it ends reserve
// before ctx's deadline, and records the outcome in run; nil when the stage
// is to be shed. When ctx's deadline leaves no time for the call, the model
// is not called and the stage is shed as a timeout.
func (r *Retriever) score(ctx context.Context, query string, texts []string, budget, reserve time.Duration, run *ModelRun) []float64 {
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok && reserve > 0 {
		var cancelReserve context.CancelFunc
		bctx, cancelReserve = context.WithDeadline(bctx, dl.Add(-reserve))
		defer cancelReserve()
		if bctx.Err() != nil {
			run.Outcome, run.Shed = rerank.Timeout, true
			run.Err = fmt.Errorf("rerank %s: not called: %w: the request's deadline leaves no time for the model", r.reranker.Name(), context.DeadlineExceeded)
			return nil
		}
	}
	scores, err := r.reranker.Score(bctx, query, texts)
	if err == nil {
		err = checkScores(scores, len(texts))
		if err != nil {
			err = fmt.Errorf("rerank %s: %w", r.reranker.Name(), err)
		}
	}
	run.Outcome = rerank.OutcomeOf(err)
	if err != nil && run.Outcome == rerank.Error && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		// The budget ran out whatever the reranker made of it.
		run.Outcome = rerank.Timeout
	}
	if err != nil {
		run.Shed, run.Err = true, err
		return nil
	}
	return scores
}

// checkScores holds a reranker to one finite score per text: a NaN would
// make the order depend on the sort's internals.
func checkScores(scores []float64, n int) error {
	if len(scores) != n {
		return fmt.Errorf("%d scores for %d chunks", len(scores), n)
	}
	for i, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return fmt.Errorf("score %d is %v, not a finite number", i, s)
		}
	}
	return nil
}
