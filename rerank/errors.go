package rerank

import "errors"

// ErrConfig is wrapped by [New] and [NewBreaker] when a setting is invalid.
var ErrConfig = errors.New("invalid reranker configuration")

// ErrStatus is wrapped by [Client.Score] when the model server answers with
// a status other than 200; the error names the status.
var ErrStatus = errors.New("reranker answered with an error status")

// ErrBadResponse is wrapped by [Client.Score] when the model server's
// answer breaks the wire contract: not JSON, too large, a missing,
// duplicate or out-of-range index, a missing or non-finite score, or not
// one result per passage.
var ErrBadResponse = errors.New("malformed reranker response")

// ErrBreakerOpen is wrapped by [Breaker.Score] when the breaker refuses a
// call: it is open after consecutive failures, or half-open with its one
// probe already in flight.
var ErrBreakerOpen = errors.New("reranker circuit breaker is open")
