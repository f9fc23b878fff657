// Package fusion merges rankings by reciprocal rank fusion (SPEC section 5.5).
//
// RRF reads positions only, never scores: BM25 and cosine live on scales that
// cannot be compared, and any normalisation is a calibration that breaks when
// the corpus or the embedder changes. A chunk's fused score is the sum over the
// rankings it appears in of 1 / (k + rank), rank counted from 1, its
// contributions added in ascending rank order so that the result does not
// depend on the order in which the rankings are given.
package fusion
