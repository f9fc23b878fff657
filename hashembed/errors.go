package hashembed

import "errors"

// ErrInvalidDims is returned (wrapped) by [ValidateDims] when dims is
// outside 1..MaxDims.
var ErrInvalidDims = errors.New("invalid dims")
