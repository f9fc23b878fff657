package retrieval

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
)

// Query expansion by pseudo-relevance feedback (docs/decisions.md, "Query
// expansion"): the first chunks of the principal's own lexical ranking,
// already filtered for entitlement and freshness, suggest terms; each is
// valued by how much of those chunks it makes up and by its idf under the
// principal's statistics scope; the best are added to the query with BM25
// weights below 1 and the lexical side is ranked again. Nothing the
// principal may not see takes part (under the entitled scope), so the
// expansion is as safe as the ranking it came from. All arithmetic is
// float64 with explicit rounding, so every store gives the same bits.

// shortlistPerTerm is how many candidates per wanted expansion term are
// shortlisted by feedback weight before their idf is asked for: enough for
// idf to reorder them, few enough for one cheap store call.
const shortlistPerTerm = 4

// Feedback is a candidate expansion term and its feedback weight: the sum,
// over the feedback chunks in ranking order, of the term's share of the
// chunk's tokens.
type Feedback struct {
	Term   string
	Weight float64
}

// FeedbackTerms returns the tokens of docs' texts that are not among query,
// with their feedback weight fw(t) = sum over docs, in order, of
// float64(tf(t, c)) / float64(c.Length) (chunks of length 0 are skipped),
// sorted by weight descending, then term ascending (byte order).
func FeedbackTerms(docs []Hit, query []string) []Feedback {
	skip := make(map[string]struct{}, len(query))
	for _, t := range query {
		skip[t] = struct{}{}
	}
	fw := make(map[string]float64)
	for _, h := range docs {
		if h.Chunk.Length == 0 {
			continue
		}
		tf := make(map[string]int)
		for _, t := range analysis.Tokenize(h.Chunk.Text) {
			if _, ok := skip[t]; !ok {
				tf[t]++
			}
		}
		// Each term's sum runs over the chunks in ranking order; map order
		// within one chunk does not matter, since every term gets one
		// addend per chunk.
		for t, c := range tf {
			fw[t] += float64(float64(c) / float64(h.Chunk.Length))
		}
	}
	out := make([]Feedback, 0, len(fw))
	for t, w := range fw {
		out = append(out, Feedback{Term: t, Weight: w})
	}
	slices.SortFunc(out, func(a, b Feedback) int {
		switch {
		case a.Weight > b.Weight:
			return -1
		case a.Weight < b.Weight:
			return 1
		}
		return strings.Compare(a.Term, b.Term)
	})
	return out
}

// Expansion is the terms query expansion adds, best first, with their BM25
// weights (same index).
type Expansion struct {
	Terms   []string
	Weights []float64
}

// ChooseExpansion values each candidate s(t) = float64(fw(t) * idf(t)) (idf
// same index as cands; missing entries count 0), keeps the n best by s
// descending, then term ascending, dropping s == 0, and weighs each
// float64(weight * float64(s(t) / s_max)), s_max the best kept s: the best
// term weighs weight, the others in proportion.
func ChooseExpansion(cands []Feedback, idf []float64, n int, weight float64) Expansion {
	type valued struct {
		term string
		s    float64
	}
	vs := make([]valued, 0, len(cands))
	for i, c := range cands {
		var v float64
		if i < len(idf) {
			v = float64(c.Weight * idf[i])
		}
		if v != 0 {
			vs = append(vs, valued{term: c.Term, s: v})
		}
	}
	slices.SortFunc(vs, func(a, b valued) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		return strings.Compare(a.term, b.term)
	})
	if n < len(vs) {
		vs = vs[:n]
	}
	var e Expansion
	for _, v := range vs {
		e.Terms = append(e.Terms, v.term)
		e.Weights = append(e.Weights, float64(weight*float64(v.s/vs[0].s)))
	}
	return e
}

// shortlistLen is min(shortlistPerTerm * terms, n) without overflowing for
// a huge terms.
func shortlistLen(terms, n int) int {
	if terms <= n/shortlistPerTerm {
		return shortlistPerTerm * terms
	}
	return n
}

// expand runs query expansion after the first pass rk of req under p: it
// returns the second pass's request and the added terms, or ok false when
// nothing is added (the first pass stands).
func (r *Retriever) expand(ctx context.Context, req RankRequest, rk Rankings, p Policy) (RankRequest, []string, bool, error) {
	docs := rk.Lexical[:min(p.PRFDocs, len(rk.Lexical))]
	rk.FillTexts(docs)
	// The stop list's words are never added back, as the query's own
	// terms are not.
	cands := FeedbackTerms(docs, append(slices.Clip(req.Terms), p.StopWords.words()...))
	cands = cands[:shortlistLen(p.PRFTerms, len(cands))]
	if len(cands) == 0 {
		return req, nil, false, nil
	}
	terms := make([]string, len(cands))
	for i, c := range cands {
		terms[i] = c.Term
	}
	idf, err := r.store.IDF(ctx, req.Principal, terms)
	if err != nil {
		return req, nil, false, fmt.Errorf("expansion idf: %w", err)
	}
	e := ChooseExpansion(cands, idf, p.PRFTerms, p.PRFWeight)
	if len(e.Terms) == 0 {
		return req, nil, false, nil
	}
	out := req
	out.Terms = append(slices.Clip(req.Terms), e.Terms...)
	out.Weights = make([]float64, len(req.Terms), len(out.Terms))
	for i := range out.Weights {
		out.Weights[i] = req.Weight(i) // the query's own terms keep their weights
	}
	out.Weights = append(out.Weights, e.Weights...)
	out.Combined = req.Combined.Append(len(req.Terms), e.Weights)
	return out, e.Terms, true, nil
}
