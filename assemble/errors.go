package assemble

import "errors"

// ErrBudget is returned by [Context] when the fixed blocks alone exceed the
// budget; ErrInvalidBudget when the budget is below 1.
var (
	ErrBudget        = errors.New("token budget too small for the fixed blocks")
	ErrInvalidBudget = errors.New("invalid token budget")
)
