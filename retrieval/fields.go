package retrieval

import (
	"github.com/cordon-rag/cordon/analysis"
)

// MaxFieldWeight is the largest field_weight: a title word may count for
// a few body words, never drown them.
const MaxFieldWeight = 4

// WithFields returns a rank request's terms and weights (nil: all 1) with,
// when w > 0, the field term of each of them ([analysis.FieldPrefix] and
// the term) after them, in the same order, weighted float64(w * its
// weight). With w 0, or no terms, they are returned as they are.
func WithFields(terms []string, weights []float64, w float64) ([]string, []float64) {
	if w == 0 || len(terms) == 0 {
		return terms, weights
	}
	n := len(terms)
	out := append(make([]string, 0, 2*n), terms...)
	ow := make([]float64, n, 2*n)
	for j := range terms {
		ow[j] = weightAt(weights, j)
	}
	for j, t := range terms {
		out = append(out, analysis.FieldPrefix+t)
		ow = append(ow, float64(w*ow[j]))
	}
	return out, ow
}
