package embed

import "errors"

// ErrInvalidSpec is returned (wrapped) for a model spec that cannot be
// used: by [ValidateModel], by [Registry.Register] for Hash, and by
// [Registry.Vectors] for hashing with invalid dims.
var ErrInvalidSpec = errors.New("invalid embedding model")

// ErrUnknownModel is returned (wrapped) by [Registry.Lookup],
// [Registry.Check] and [Registry.Vectors] when a tenant's model has no configured provider.
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
