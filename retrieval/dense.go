package retrieval

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
// it and asks again.
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

// QueryModels embeds queries for tenants whose embedding model is not
// hashing. It remembers each tenant's model as the store last reported it,
// so a query is embedded once, with the right model, in the common case;
// a tenant that changed models answers *ModelMismatchError once and the
// query is embedded again. Safe for concurrent use; share one per process.
type QueryModels struct {
	reg   *embed.Registry
	specs sync.Map // tenant -> embed.Spec
}

// NewQueryModels returns QueryModels over the providers of reg.
func NewQueryModels(reg *embed.Registry) *QueryModels { return &QueryModels{reg: reg} }

// WithModels makes r embed queries through m for tenants whose model is
// not hashing. Without it such a tenant's queries fail with an error
// naming the model.
func (r *Retriever) WithModels(m *QueryModels) *Retriever {
	r.models = m
	return r
}

// Dense is the dense query of text under spec: nil for hashing, else the
// text embedded and quantized (a zero vector when tokens, the text's
// tokens, are none, so the query matches nothing on either side).
func (m *QueryModels) Dense(ctx context.Context, spec embed.Spec, text string, tokens []string) (*DenseQuery, error) {
	// Not the registry's hashing: the store hashes the tokens itself, with
	// the tenant's dims, which are not known here before it answers
	// ([RankRequest.QueryVector]); so a hashing tenant's first query needs
	// no second attempt.
	if spec.IsHash() {
		return nil, nil
	}
	if len(tokens) == 0 {
		return &DenseQuery{Spec: spec, Vector: make([]int32, spec.Dims)}, nil
	}
	if m == nil {
		return nil, fmt.Errorf("%w: %q; configure a provider for it (cordon serve --embed-url ... --embed-model %s)", embed.ErrUnknownModel, spec.Model, spec.Model)
	}
	vs, err := m.reg.Vectors(ctx, spec, []string{text}, embed.Query)
	if err != nil {
		return nil, err
	}
	return &DenseQuery{Spec: spec, Vector: vs[0]}, nil
}

// rankDense ranks req, embedding the query text with the tenant's model:
// the one remembered, or hashing, then the one the store names when it
// refuses the first. With p's dense side off it ranks with NoDense and
// embeds nothing. When the query cannot be embedded ([canFallBack]) and p
// falls back to "lexical", it ranks with NoDense too and returns the
// embedding error as shed; otherwise that error is returned.
func (r *Retriever) rankDense(ctx context.Context, req RankRequest, text string, p Policy) (rk Rankings, version int64, _ RankRequest, shed, err error) {
	if !p.EnableDense {
		req.NoDense = true
		rk, version, err = r.rank(ctx, req)
		return rk, version, req, nil, err
	}
	tenant := req.Principal.Tenant
	spec := embed.Spec{Model: embed.Hash}
	if r.models != nil {
		if v, ok := r.models.specs.Load(tenant); ok {
			spec = v.(embed.Spec)
		}
	}
	for attempt := 1; ; attempt++ {
		if req.Dense, err = r.models.Dense(ctx, spec, text, req.Tokens); err != nil {
			if p.DenseFallback != FallbackLexical || !canFallBack(ctx, err) {
				return Rankings{}, 0, req, nil, err
			}
			req.Dense, req.NoDense = nil, true
			rk, version, rerr := r.rank(ctx, req)
			return rk, version, req, err, rerr
		}
		rk, version, err := r.rank(ctx, req)
		var mm *ModelMismatchError
		if !errors.As(err, &mm) || attempt == 3 {
			return rk, version, req, nil, err
		}
		spec = mm.Want
		if r.models != nil {
			r.models.specs.Store(tenant, spec)
		}
	}
}

// canFallBack reports whether err, from embedding a query, may be answered
// lexical-only: the provider failed (an error, a timeout, a wrong answer).
// A model no provider serves, or an invalid one, is a misconfiguration and
// not a fallback's to hide; a request out of time or canceled has no time
// for the fallback either.
func canFallBack(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, embed.ErrUnknownModel) &&
		!errors.Is(err, embed.ErrInvalidSpec) && !errors.Is(err, embed.ErrInvalidConfig)
}
