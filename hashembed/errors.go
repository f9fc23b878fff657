package hashembed

import "errors"

// ErrInvalidDims is returned (wrapped) by [ValidateDims] when dims is
// outside 1..MaxDims.
var ErrInvalidDims = errors.New("invalid dims")

// ErrVectorBound is returned (wrapped) when a count vector has a component
// beyond [MaxCount]. Stores keep counts in float32 (pgvector's element
// type), which represents every integer up to 2^24 exactly and no longer
// does beyond it.
var ErrVectorBound = errors.New("vector component beyond the exact float32 range")
