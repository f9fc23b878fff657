package index

import "errors"

// ErrVectorBound is returned by [Prepare] when a chunk's count vector has a
// component beyond MaxCount. Stores keep counts in float32 (pgvector's
// element type), which represents every integer up to 2^24 exactly and no
// longer does beyond it.
var ErrVectorBound = errors.New("vector component beyond the exact float32 range")
