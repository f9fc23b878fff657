// Package bm25 is Cordon's lexical scoring (SPEC section 4): Okapi BM25 with
// clamped IDF, pinned operation order, and a portable natural logarithm.
//
// # Why the arithmetic is pinned
//
// Every store must give bit-identical scores. Floating-point addition is not
// associative, and a fused multiply-add rounds once where a multiply then an add
// round twice, so the expressions here are written with explicit float64(...)
// conversions (which the Go spec says prevent fusion) and summed in the order
// SPEC section 4 fixes: distinct query terms in order of first occurrence.
//
// # Why our own ln
//
// Go's math.Log is assembly on amd64 and a different routine on arm64, and
// glibc's log (what SQL's ln() calls) differs from both in the last bit for
// some arguments. [Log] is the fdlibm algorithm written in plain Go with every
// rounding explicit, so IDF is the same on every machine and in every store.
//
// # Defaults
//
// k1 = 1.5 and b = 0.75 are the Okapi defaults used by the design notes
// (Robertson et al.; Lucene uses 1.2/0.75).
package bm25
