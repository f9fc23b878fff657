package eval

import "errors"

// ErrQueries is wrapped by [ReadQueries] for a query file Cordon cannot
// evaluate: bad JSON, an empty query, no relevant documents, a bad doc id.
// The message names the line.
var ErrQueries = errors.New("invalid query file")

// ErrRelevantMissing is returned by [Run] when a query names a relevant
// document that is not in the corpus: the query file and the corpus do not
// belong together, and every metric would be silently wrong.
var ErrRelevantMissing = errors.New("relevant document not in the corpus")

// ErrNoQueries is returned by [Run] and [ReadQueries] when there is nothing
// to evaluate.
var ErrNoQueries = errors.New("no queries")
