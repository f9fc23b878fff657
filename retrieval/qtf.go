package retrieval

// QueryTermWeights weighs each distinct query term by how often the query
// repeats it, with the saturation of Robertson's BM25 query-term
// component: a term occurring qtf times in tokens weighs
//
//	float64(float64(k3+1) * float64(qtf)) / float64(k3+float64(qtf))
//
// so 1 for a term said once, rising towards qtf as k3 grows. terms are the
// distinct tokens in order of first occurrence; the weights are parallel
// to them, for [RankRequest.Weights]. With k3 == 0 (SPEC section 4: every
// distinct term counts once), or when no term repeats, it returns nil: the
// store's unweighted sum, bit for bit.
//
// A query that says a word twice ("the hold of a hold notice") stresses it;
// on long, sentence-like queries this is the evidence that plain BM25 over
// distinct terms drops (docs/quality.md, "Query term frequency and idf").
func QueryTermWeights(tokens, terms []string, k3 float64) []float64 {
	if k3 == 0 || len(tokens) == len(terms) {
		return nil
	}
	count := make(map[string]int, len(terms))
	for _, t := range tokens {
		count[t]++
	}
	w := make([]float64, len(terms))
	for i, t := range terms {
		qtf := float64(count[t])
		w[i] = float64(float64(k3+1)*qtf) / float64(k3+qtf)
	}
	return w
}
