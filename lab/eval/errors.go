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

// ErrRemoveMissing is returned by [ApplyRemovals] (and so by [Run]) when a
// held-out query's passage is not in its relevant document.
var ErrRemoveMissing = errors.New("held-out passage not in its document")

// ErrRun is wrapped by [ReadRun] for a TREC run it cannot read; the message
// names the line.
var ErrRun = errors.New("invalid TREC run")

// ErrPipeline is returned by [Run] for pipelines it cannot run together: a
// name used twice or a baseline that is not among them.
var ErrPipeline = errors.New("invalid pipelines")

// ErrBEIR is wrapped by [ReadBEIR] and its readers for a BEIR dataset they
// cannot use: bad JSON, a missing field, a repeated id, a judgment of an
// unknown query or document. The message names the file and the line.
var ErrBEIR = errors.New("invalid BEIR dataset")

// ErrDepth is returned by [Run] for an [Options.Depth] out of range.
var ErrDepth = errors.New("invalid depth")
