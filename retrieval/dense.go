package retrieval

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
)

// DenseQuery is a query's vector under one embedding model, quantized once
// per query (embed.Quantize). A store compares it only with a tenant whose
// recorded model is Spec.
type DenseQuery struct {
	Spec   embed.Spec
	Vector []int32
}

// ModelMismatchError is returned by a store when a request's dense query is
// not of the tenant's recorded model: vectors of two models are never
// compared. Want is the tenant's model; the retriever embeds the query with
// it and asks again. It is a guard: the retriever asks the store for the
// model first ([QueryEmbedder]), so only a cut-over racing a query meets it.
type ModelMismatchError struct {
	Want embed.Spec
	Got  embed.Spec
}

func (e *ModelMismatchError) Error() string {
	return fmt.Sprintf("the tenant's embedding model is %s, the query was embedded with %s", e.Want, e.Got)
}

// QueryVector is the query vector a store scores against a tenant whose
// model is spec: the zero vector when the request turns the dense side off
// (NoDense), the signed hash of Tokens for hashing (when the request
// carries no other model's vector), else the request's vector of exactly
// that model. Anything else is a *ModelMismatchError.
func (r *RankRequest) QueryVector(spec embed.Spec) ([]int32, error) {
	if r.NoDense {
		return make([]int32, spec.Dims), nil
	}
	// Hashing stays a branch here because it is part of the contract with
	// the store, not a way of embedding: its query vector needs no provider,
	// so the store makes it from the request's tokens with the dims it reads
	// in its snapshot, and a hashing tenant's query is never embedded ahead
	// (see [QueryModels.Dense]). Every other model's vector is made before
	// the snapshot, by the embedding registry, and must match exactly.
	if spec.IsHash() {
		if r.Dense == nil || r.Dense.Spec.IsHash() {
			return hashembed.Vector(r.Tokens, spec.Dims), nil
		}
		return nil, &ModelMismatchError{Want: spec, Got: r.Dense.Spec}
	}
	got := embed.Spec{Model: embed.Hash, Dims: spec.Dims}
	if r.Dense != nil {
		got = r.Dense.Spec
	}
	if got != spec || r.Dense == nil || len(r.Dense.Vector) != spec.Dims {
		return nil, &ModelMismatchError{Want: spec, Got: got}
	}
	return r.Dense.Vector, nil
}

// QueryEmbedder is a [Store] that embeds queries with each tenant's own
// model: it learns the model from the tenant lookup its reads do anyway,
// and holds the registry its writes embed documents with, so a query is
// embedded once, with the right model, before its snapshot. Every store in
// this module is one. A store that is not ranks every query as hashing.
type QueryEmbedder interface {
	// TenantModel is tenant's embedding model as the store last read it
	// (hashing for a tenant it does not know). It may be stale by a
	// re-embedding cut-over: the rank then answers [ModelMismatchError].
	TenantModel(ctx context.Context, tenant string) (embed.Spec, error)
	// EmbedQuery is the dense query of text under spec (see [EmbedQuery]).
	EmbedQuery(ctx context.Context, spec embed.Spec, text string, tokens []string) (*DenseQuery, error)
}

// EmbedQuery is the dense query of text under spec with the providers of
// reg: nil for hashing, else the text embedded and quantized (a zero vector
// when tokens, the text's tokens, are none, so the query matches nothing on
// either side). Stores implement [QueryEmbedder.EmbedQuery] with it.
func EmbedQuery(ctx context.Context, reg *embed.Registry, spec embed.Spec, text string, tokens []string) (*DenseQuery, error) {
	// Not the registry's hashing: the store hashes the tokens itself, with
	// the dims it reads in its snapshot ([RankRequest.QueryVector]).
	if spec.IsHash() {
		return nil, nil
	}
	if len(tokens) == 0 {
		return &DenseQuery{Spec: spec, Vector: make([]int32, spec.Dims)}, nil
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: %q; configure a provider for it (cordon serve --embed-url ... --embed-model %s)", embed.ErrUnknownModel, spec.Model, spec.Model)
	}
	vs, err := reg.Vectors(ctx, spec, []string{text}, embed.Query)
	if err != nil {
		return nil, err
	}
	return &DenseQuery{Spec: spec, Vector: vs[0]}, nil
}

// rankDense ranks req, embedding the query text with the tenant's model
// as the store names it ([QueryEmbedder]; hashing for a store that is
// not one). The store checks the model again in its snapshot: a tenant cut
// over to another model in between answers [ModelMismatchError], and the
// query is embedded with the model it names and ranked once more. With p's
// dense side off it ranks with NoDense and embeds nothing. When the query
// cannot be embedded ([canFallBack]) and p falls back to "lexical", it
// ranks with NoDense too and returns the embedding error as shed;
// otherwise that error is returned.
func (r *Retriever) rankDense(ctx context.Context, req RankRequest, text string, p Policy) (rk Rankings, version int64, _ RankRequest, shed, err error) {
	if !p.EnableDense {
		req.NoDense = true
		rk, version, err = r.rank(ctx, req)
		return rk, version, req, nil, err
	}
	qe, ok := r.store.(QueryEmbedder)
	if !ok {
		rk, version, err = r.rank(ctx, req)
		return rk, version, req, nil, err
	}
	spec, err := qe.TenantModel(ctx, req.Principal.Tenant)
	if err != nil {
		return Rankings{}, 0, req, nil, err
	}
	for attempt := 1; ; attempt++ {
		if req.Dense, err = qe.EmbedQuery(ctx, spec, text, req.Tokens); err != nil {
			if p.DenseFallback != FallbackLexical || !canFallBack(ctx, err) {
				return Rankings{}, 0, req, nil, err
			}
			req.Dense, req.NoDense = nil, true
			rk, version, rerr := r.rank(ctx, req)
			return rk, version, req, err, rerr
		}
		rk, version, err := r.rank(ctx, req)
		var mm *ModelMismatchError
		if !errors.As(err, &mm) || attempt == maxModelAttempts {
			return rk, version, req, nil, err
		}
		spec = mm.Want
	}
}

// maxModelAttempts bounds the rankings of one query whose tenant changes
// models while it runs: the model the store named, then the one its
// snapshot named; a third cut-over within one query is an error.
const maxModelAttempts = 2

// canFallBack reports whether err, from embedding a query, may be answered
// lexical-only: the provider failed (an error, a timeout, a wrong answer).
// A model no provider serves, or an invalid one, is a misconfiguration and
// not a fallback's to hide; a request out of time or canceled has no time
// for the fallback either.
func canFallBack(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, embed.ErrUnknownModel) &&
		!errors.Is(err, embed.ErrInvalidSpec) && !errors.Is(err, embed.ErrInvalidConfig)
}
