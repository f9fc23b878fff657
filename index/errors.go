package index

import "github.com/cordon-rag/cordon/hashembed"

// ErrVectorBound is returned by [Prepare] when a chunk's count vector has a
// component beyond MaxCount: it is [hashembed.ErrVectorBound], which the
// embedding registry's built-in hashing returns too.
var ErrVectorBound = hashembed.ErrVectorBound
