package bm25

import (
	"fmt"
	"math"
)

// Okapi BM25 parameter defaults (SPEC section 4).
const (
	DefaultK1 = 1.5
	DefaultB  = 0.75
)

// Params are the BM25 free parameters: K1 >= 0 controls term-frequency
// saturation, B in [0, 1] controls length normalisation.
type Params struct {
	K1 float64
	B  float64
}

// DefaultParams returns k1 = 1.5, b = 0.75.
func DefaultParams() Params { return Params{K1: DefaultK1, B: DefaultB} }

// Validate checks k1 >= 0 and 0 <= b <= 1 (and that neither is NaN).
func (p Params) Validate() error {
	if !(p.K1 >= 0) || math.IsInf(p.K1, 1) {
		return fmt.Errorf("%w: k1 %v must be a finite number >= 0", ErrInvalidParams, p.K1)
	}
	if !(p.B >= 0 && p.B <= 1) {
		return fmt.Errorf("%w: b %v must be in [0, 1]", ErrInvalidParams, p.B)
	}
	return nil
}

// IDF is the clamped inverse document frequency:
// 0 when n == 0, else max(0, ln((n - df + 0.5) / (df + 0.5) + 1)).
//
// Guard 1 (n == 0) covers an empty tenant; the +1 keeps the argument above 1
// for df <= n; the clamp is belt and braces. A negative IDF would rank a chunk
// containing the user's term below one that does not.
func IDF(n, df int64) float64 {
	if n == 0 {
		return 0
	}
	x := float64(float64(float64(n-df)+0.5)/float64(float64(df)+0.5)) + 1
	v := Log(x)
	if v < 0 {
		return 0
	}
	return v
}

// IDFKind names an inverse document frequency formula: [IDFPlusOne]
// (SPEC section 4) or [IDFRSJ]. Where a zero value can occur
// (retrieval.RankRequest), "" means [IDFPlusOne].
type IDFKind string

const (
	// IDFPlusOne is SPEC section 4's ln((n - df + 0.5) / (df + 0.5) + 1)
	// ([IDF]), Lucene's smoothing of the Robertson-Spärck Jones weight:
	// never negative, and a term in every chunk still weighs up to ln 2.
	IDFPlusOne IDFKind = "plus1"
	// IDFRSJ is the Robertson-Spärck Jones weight itself,
	// ln((n - df + 0.5) / (df + 0.5)), floored at [RSJFloor] ([RSJ]): a
	// term in half the chunks or more weighs almost nothing, as in SQLite
	// FTS5's bm25().
	IDFRSJ IDFKind = "rsj"
)

// RSJFloor is [RSJ]'s floor for a term in half the chunks or more: positive,
// so a chunk holding only such terms still scores above 0 (SQLite FTS5's
// bm25() floors at the same 1e-6).
const RSJFloor = 1e-6

// RSJ is 0 when n == 0, else max(RSJFloor, ln((n - df + 0.5) / (df + 0.5)))
// with the portable [Log], every operation rounded as in [IDF].
func RSJ(n, df int64) float64 {
	if n == 0 {
		return 0
	}
	x := float64(float64(n-df)+0.5) / float64(float64(df)+0.5)
	if !(x > 1) {
		return RSJFloor // ln(x) <= 0
	}
	v := Log(x)
	if v < RSJFloor {
		return RSJFloor
	}
	return v
}

// IDFs holds a ranking's idf values, one per query term: IDF is SPEC's
// ([IDF]: what a ranking reports, and what rerankers and query expansion
// weigh with), Lex the lexical ranking's, of the request's [IDFKind]. They
// are one slice unless the kind is [IDFRSJ].
type IDFs struct {
	kind     IDFKind
	IDF, Lex []float64
}

// NewIDFs returns the idf values of terms terms ranked with kind, all 0.
func NewIDFs(kind IDFKind, terms int) IDFs {
	w := IDFs{kind: kind, IDF: make([]float64, terms)}
	w.Lex = w.IDF
	if kind == IDFRSJ {
		w.Lex = make([]float64, terms)
	}
	return w
}

// Set gives term i its values for a document frequency of df among n
// chunks.
func (w IDFs) Set(i int, n, df int64) {
	w.IDF[i] = IDF(n, df)
	if w.kind == IDFRSJ {
		w.Lex[i] = RSJ(n, df)
	}
}

// AvgDL is float64(sum of lengths) / float64(n), or 0 for an empty tenant.
func AvgDL(sumLen, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(sumLen) / float64(n)
}

// Term is one term's contribution to a chunk's score:
// idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / avgdl)),
// evaluated left to right as written, with no fused multiply-add.
// A caller skips terms with tf == 0.
func Term(idf float64, tf, dl int64, avgdl float64, p Params) float64 {
	return TermNorm(idf, tf, LengthNorm(dl, avgdl, p), p)
}

// LengthNorm is Term's length normalisation, 1 - b + b * dl / avgdl, in
// Term's operation order. A scorer may compute it once per distinct length.
func LengthNorm(dl int64, avgdl float64, p Params) float64 {
	return float64(float64(1-p.B) + float64(float64(p.B*float64(dl))/avgdl))
}

// TermNorm is Term with its length normalisation given: the same operations
// in the same order, so Term(idf, tf, dl, avgdl, p) ==
// TermNorm(idf, tf, LengthNorm(dl, avgdl, p), p) bit for bit.
func TermNorm(idf float64, tf int64, norm float64, p Params) float64 {
	return TermNormF(idf, float64(tf), norm, p)
}

// TermNormF is TermNorm for a term frequency that is not a whole number
// (a combined term's pseudo-frequency, SPEC section 4, "Combined terms"):
// TermNormF(idf, float64(tf), norm, p) == TermNorm(idf, tf, norm, p) bit
// for bit.
func TermNormF(idf, ftf, norm float64, p Params) float64 {
	denom := float64(ftf + float64(p.K1*norm))
	num := float64(idf * float64(ftf*float64(p.K1+1)))
	return float64(num / denom)
}
