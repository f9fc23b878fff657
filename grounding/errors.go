package grounding

import "errors"

// ErrInvalidThreshold is returned by [Check] for a threshold outside [0, 1].
var ErrInvalidThreshold = errors.New("invalid grounding threshold")
