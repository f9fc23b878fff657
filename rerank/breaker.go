package rerank

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Breaker defaults.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCoolDown = 10 * time.Second
)

// BreakerConfig configures a [Breaker].
type BreakerConfig struct {
	// Failures is how many consecutive failed calls open the breaker
	// (default [DefaultBreakerFailures]).
	Failures int
	// CoolDown is how long it stays open before one probe may pass
	// (default [DefaultBreakerCoolDown]).
	CoolDown time.Duration
	// OnStateChange, when set, is called on every change of state
	// ("closed", "open", "half-open"), for logs.
	OnStateChange func(from, to string)
}

// Breaker is a [Reranker] that stops calling a failing one: a circuit
// breaker (github.com/sony/gobreaker). Closed, it passes calls and counts
// consecutive failures; Failures of them open it. Open, it refuses every
// call at once with [ErrBreakerOpen] for CoolDown. Then it is half-open: one
// call passes as a probe (others are refused meanwhile); the probe's success
// closes the breaker, its failure opens it again.
//
// A failure is any error except a cancelled context (the caller gave up,
// which says nothing of the model); a budget that ran out (a deadline) is a
// failure, since a model that keeps missing it is one to stop waiting for.
type Breaker struct {
	r   Reranker
	cfg BreakerConfig
	cb  *gobreaker.CircuitBreaker[[]float64]
}

var _ Reranker = (*Breaker)(nil)

// NewBreaker wraps r in a circuit breaker.
func NewBreaker(r Reranker, cfg BreakerConfig) (*Breaker, error) {
	if cfg.Failures == 0 {
		cfg.Failures = DefaultBreakerFailures
	}
	if cfg.CoolDown == 0 {
		cfg.CoolDown = DefaultBreakerCoolDown
	}
	switch {
	case cfg.Failures < 1:
		return nil, fmt.Errorf("%w: breaker failures %d: want >= 1", ErrConfig, cfg.Failures)
	case cfg.CoolDown < 0:
		return nil, fmt.Errorf("%w: breaker cool-down %v: want > 0", ErrConfig, cfg.CoolDown)
	}
	b := &Breaker{r: r, cfg: cfg}
	st := gobreaker.Settings{
		Name:        r.Name(),
		MaxRequests: 1, // one half-open probe
		Timeout:     cfg.CoolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(cfg.Failures) },
		IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
	}
	if f := cfg.OnStateChange; f != nil {
		st.OnStateChange = func(_ string, from, to gobreaker.State) { f(from.String(), to.String()) }
	}
	b.cb = gobreaker.NewCircuitBreaker[[]float64](st)
	return b, nil
}

// Name returns the wrapped reranker's name.
func (b *Breaker) Name() string { return b.r.Name() }

// Model returns the wrapped reranker's model.
func (b *Breaker) Model() string { return b.r.Model() }

// State returns "closed", "open" or "half-open".
func (b *Breaker) State() string { return b.cb.State().String() }

// Score calls the wrapped reranker unless the breaker refuses. A call with
// no texts sends nothing and does not count.
func (b *Breaker) Score(ctx context.Context, query string, texts []string) ([]float64, error) {
	if len(texts) == 0 {
		return []float64{}, nil
	}
	scores, err := b.cb.Execute(func() ([]float64, error) { return b.r.Score(ctx, query, texts) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, fmt.Errorf("rerank %s: %w (after %d consecutive failures; it lets one probe through %v after opening)",
			b.r.Name(), ErrBreakerOpen, b.cfg.Failures, b.cfg.CoolDown)
	}
	return scores, err
}
