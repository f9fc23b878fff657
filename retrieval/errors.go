package retrieval

import "errors"

// ErrInvalidPolicy is wrapped by [Policy.Validate] (and so by
// [Retriever.Retrieve]) when a policy value is out of range.
var ErrInvalidPolicy = errors.New("invalid retrieval policy")
