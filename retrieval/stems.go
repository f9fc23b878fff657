package retrieval

import (
	"github.com/cordon-rag/cordon/analysis"
)

// WithStems returns a query's distinct terms, with their weights (nil: all
// 1), followed by their stem terms when w > 0: one for each distinct stem
// of the terms that have one ([analysis.Stem]), in order of the first term
// with that stem, weighted float64(w * weight of that term). With w 0, or
// no term with a stem, terms and weights are returned as they are.
func WithStems(terms []string, weights []float64, w float64) ([]string, []float64) {
	if w == 0 {
		return terms, weights
	}
	var out []string
	var ow []float64
	seen := make(map[string]bool)
	for i, t := range terms {
		st, ok := analysis.Stem(t)
		if !ok || seen[st] {
			continue
		}
		if out == nil {
			out = append(make([]string, 0, 2*len(terms)), terms...)
			ow = make([]float64, len(terms), 2*len(terms))
			for j := range terms {
				ow[j] = weightAt(weights, j)
			}
		}
		seen[st] = true
		out = append(out, st)
		ow = append(ow, float64(w*weightAt(weights, i)))
	}
	if out == nil {
		return terms, weights
	}
	return out, ow
}

// weightAt is weights[i], or 1 when weights does not reach i.
func weightAt(weights []float64, i int) float64 {
	if i < len(weights) {
		return weights[i]
	}
	return 1
}

// queryTerms is the number of a rank request's terms that are the query's
// own (not stem or field terms): the stem and field terms come after them.
func queryTerms(terms []string) int {
	for i, t := range terms {
		if analysis.IsStemTerm(t) || analysis.IsFieldTerm(t) {
			return i
		}
	}
	return len(terms)
}
