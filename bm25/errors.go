package bm25

import "errors"

// ErrInvalidParams is returned by [Params.Validate].
var ErrInvalidParams = errors.New("invalid bm25 parameters")
