package rerank

import (
	"context"
	"errors"
	"time"
)

// Reranker scores passages against a query.
type Reranker interface {
	// Score returns one finite score per text, in the order of texts
	// (higher is more relevant), or an error. It returns within ctx's
	// deadline; it does not retry.
	Score(ctx context.Context, query string, texts []string) ([]float64, error)
	// Name names the provider's wire format ("tei", "cohere"), for audit
	// records and logs.
	Name() string
	// Model names the model that scores (may be empty when the operator
	// did not name it), for audit records.
	Model() string
}

// Outcome classifies one Score call for metrics and audit records.
type Outcome string

// The outcomes of a call.
const (
	// OK: the model scored every passage.
	OK Outcome = "ok"
	// Timeout: the call's context ran out (its budget) first.
	Timeout Outcome = "timeout"
	// Error: the model server failed or answered something malformed.
	Error Outcome = "error"
	// BreakerOpen: the circuit breaker refused the call without sending it.
	BreakerOpen Outcome = "breaker_open"
)

// Outcomes lists every outcome, in a fixed order (metrics create a series
// for each).
var Outcomes = []Outcome{OK, Timeout, Error, BreakerOpen}

// OutcomeOf classifies the error a Score call returned.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrBreakerOpen):
		return BreakerOpen
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Error
}

// Observe returns r with report called after every Score call with its
// outcome and duration (from a monotonic clock). report must be safe for
// concurrent use.
func Observe(r Reranker, report func(Outcome, time.Duration)) Reranker {
	return &observed{Reranker: r, report: report}
}

type observed struct {
	Reranker
	report func(Outcome, time.Duration)
}

func (o *observed) Score(ctx context.Context, query string, texts []string) ([]float64, error) {
	start := time.Now()
	scores, err := o.Reranker.Score(ctx, query, texts)
	o.report(OutcomeOf(err), time.Since(start))
	return scores, err
}
