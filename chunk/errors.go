package chunk

import "errors"

// ErrInvalidOptions is returned by [Options.Validate] and [Split] when the
// window sizes break 0 <= OverlapWords < MaxWords.
var ErrInvalidOptions = errors.New("invalid chunking options")
