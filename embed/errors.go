package embed

import "errors"

// ErrInvalidSpec is returned (wrapped) for a model spec that cannot be
// used: by [ValidateModel], and by [Registry.Register] and
// [Registry.Vectors] for Hash.
var ErrInvalidSpec = errors.New("invalid embedding model")

// ErrUnknownModel is returned (wrapped) by [Registry.Lookup] and
// [Registry.Vectors] when a tenant's model has no configured provider.
var ErrUnknownModel = errors.New("embedding model not configured")

// ErrDims is returned (wrapped, with ErrProvider) when a provider's vectors
// have other dimensions than the model spec says.
var ErrDims = errors.New("vector dimensions differ from the model's")

// ErrProvider is returned (wrapped) for a provider that failed or answered
// something unusable.
var ErrProvider = errors.New("embedding provider failed")

// ErrInvalidConfig is returned (wrapped) by [NewHTTP] for a provider
// configuration it cannot use.
var ErrInvalidConfig = errors.New("invalid embedding provider configuration")
