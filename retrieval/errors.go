package retrieval

import (
	"errors"
	"fmt"
)

// ErrInvalidPolicy is wrapped by [Policy.Validate] (and so by
// [Retriever.Retrieve]) when a policy value is out of range.
var ErrInvalidPolicy = errors.New("invalid retrieval policy")

// LimitError is returned by [Limits.Check] when a policy field is over its
// [Limits] entry. It wraps [ErrInvalidPolicy].
type LimitError struct {
	// Field is the policy field, e.g. "top_n"; Value its value and Max
	// the limit it is over.
	Field string
	Value int
	Max   int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s %d must be at most %d (the limit on what one retrieve may cost)", ErrInvalidPolicy, e.Field, e.Value, e.Max)
}

// Unwrap returns [ErrInvalidPolicy].
func (e *LimitError) Unwrap() error { return ErrInvalidPolicy }
