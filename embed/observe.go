package embed

import (
	"context"
	"errors"
	"time"
)

// Outcome classifies one [HTTP.Embed] call for metrics.
type Outcome string

const (
	// OutcomeOK: every vector came back.
	OutcomeOK Outcome = "ok"
	// OutcomeTimeout: no answer in time, from --embed-timeout on the last
	// attempt or from the caller's deadline.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeError: the provider failed otherwise (refused, unreachable,
	// a wrong answer).
	OutcomeError Outcome = "error"
	// OutcomeCanceled: the caller gave up first.
	OutcomeCanceled Outcome = "canceled"
)

// Outcomes lists every outcome, in a fixed order (metrics create a series
// for each at start).
var Outcomes = []Outcome{OutcomeOK, OutcomeTimeout, OutcomeError, OutcomeCanceled}

// OutcomeOf classifies the error an Embed call returned.
func OutcomeOf(err error) Outcome {
	var te interface{ Timeout() bool }
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &te) && te.Timeout():
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	}
	return OutcomeError
}

// Observer is told what an [HTTP] provider does, so that a caller can keep
// metrics (the service does; this package imports no metrics library).
// Its methods are called on the calling goroutines, concurrently: they
// must be safe for that, and quick.
type Observer interface {
	// Begin reports the start of one Embed call of n texts.
	Begin(n int)
	// Call reports one Embed call: its outcome and how long it took, every
	// batch, retry and wait included.
	Call(o Outcome, d time.Duration)
	// Batch reports one request of n texts, once however often it is
	// attempted.
	Batch(n int)
	// Embedded reports one request answered with its n vectors.
	Embedded(n int)
	// Retry reports one retry of a request.
	Retry()
}

// observable is an embedder that reports to an Observer.
type observable interface {
	Observe(o Observer)
}

// Observe makes every provider of r that reports what it does ([HTTP],
// and a [Cache] over one) report to o from now on.
func (r *Registry) Observe(o Observer) {
	if r == nil {
		return
	}
	for _, e := range r.models {
		if ob, ok := e.(observable); ok {
			ob.Observe(o)
		}
	}
}

// Observe makes h report every Embed call, request and retry to o; nil
// stops the reports.
func (h *HTTP) Observe(o Observer) {
	if o == nil {
		h.observer.Store(nil)
		return
	}
	h.observer.Store(&o)
}

// obs is h's observer, nil when none.
func (h *HTTP) obs() Observer {
	if p := h.observer.Load(); p != nil {
		return *p
	}
	return nil
}

// Observe passes o to the cached embedder when it reports what it does:
// texts the cache answers reach no provider and are not reported.
func (c *Cache) Observe(o Observer) {
	if ob, ok := c.e.(observable); ok {
		ob.Observe(o)
	}
}

// timeoutError marks a provider error whose last attempt got no answer in
// time, for [OutcomeOf]; its message is the error's.
type timeoutError struct{ error }

func (e timeoutError) Unwrap() error { return e.error }
func (e timeoutError) Timeout() bool { return true }
