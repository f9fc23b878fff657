package retrieval

import (
	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
)

// Member is one term of a [TermGroup]: the request's term Term, whose
// frequency counts Coef times in the group's text (Field false) or field
// (Field true) pseudo-frequency; Stem says it is a stem term.
type Member struct {
	Term        int
	Coef        float64
	Field, Stem bool
}

// TermGroup is one query word's combined term (SPEC section 4, "Combined
// terms"): its members' frequencies make one pseudo-frequency, saturated
// once, with the idf of the request's term IDF, weighed Weight.
type TermGroup struct {
	Members []Member
	IDF     int
	Weight  float64
}

// Combined is a rank request's combined terms (the policy's bm25f): the
// lexical ranking and the document ranking score its groups, in order,
// instead of the request's terms one by one. FieldWeight scales the field
// pseudo-frequency.
type Combined struct {
	Groups      []TermGroup
	FieldWeight float64
}

// CombinedTerms returns the groups of a request whose terms and weights
// WithStems(terms, weights, stem) then WithFields(..., field) made, for
// the first q of them (the query's own terms): word i's group holds the
// word (coefficient 1 - stem when it has a stem term, else 1), its stem
// term (stem), its field term (1 - stem or 1) and its field stem term
// (stem), those present in all, and takes the stem term's idf when it has
// one, else the word's; it weighs the word's weight.
func CombinedTerms(all []string, weights []float64, q int, stem, field float64) *Combined {
	at := make(map[string]int, len(all))
	for i, t := range all {
		if _, ok := at[t]; !ok {
			at[t] = i
		}
	}
	c := &Combined{Groups: make([]TermGroup, q), FieldWeight: field}
	for i := range q {
		u := all[i]
		g := TermGroup{IDF: i, Weight: weightAt(weights, i)}
		st, hasStem := "", false
		if stem > 0 {
			if s, ok := analysis.Stem(u); ok {
				if _, in := at[s]; in {
					st, hasStem = s, true
				}
			}
		}
		word := 1.0
		if hasStem {
			word = float64(1 - stem)
		}
		g.Members = append(g.Members, Member{Term: i, Coef: word})
		if hasStem {
			g.IDF = at[st]
			g.Members = append(g.Members, Member{Term: at[st], Coef: stem, Stem: true})
		}
		if field > 0 {
			if j, ok := at[analysis.FieldPrefix+u]; ok {
				g.Members = append(g.Members, Member{Term: j, Coef: word, Field: true})
			}
			if hasStem {
				if j, ok := at[analysis.FieldPrefix+st]; ok {
					g.Members = append(g.Members, Member{Term: j, Coef: stem, Field: true, Stem: true})
				}
			}
		}
		c.Groups[i] = g
	}
	return c
}

// ForTenant is c as a tenant scores it: under the exact analyzer
// (stemmed false) no chunk holds a stem term, so each group drops its stem
// members, its word counts 1 and it takes the word's idf; with
// length-normalised field frequencies (normFields: analysis.FieldTF) the
// field weight is divided by analysis.FieldScale, exactly (a power of
// two). A nil c is nil.
func (c *Combined) ForTenant(stemmed, normFields bool) *Combined {
	if c == nil || (stemmed && !normFields) {
		return c
	}
	out := &Combined{Groups: c.Groups, FieldWeight: c.FieldWeight}
	if normFields {
		out.FieldWeight = c.FieldWeight / analysis.FieldScale
	}
	if stemmed {
		return out
	}
	out.Groups = make([]TermGroup, len(c.Groups))
	for i, g := range c.Groups {
		ng := TermGroup{IDF: g.Members[0].Term, Weight: g.Weight}
		for _, m := range g.Members {
			if !m.Stem {
				ng.Members = append(ng.Members, Member{Term: m.Term, Coef: 1, Field: m.Field})
			}
		}
		out.Groups[i] = ng
	}
	return out
}

// Append returns c with a group of one member for each of terms, first at
// index first of the request's terms, weighed by weights (query
// expansion's added terms). A nil c is nil.
func (c *Combined) Append(first int, weights []float64) *Combined {
	if c == nil {
		return nil
	}
	out := &Combined{Groups: append(c.Groups[:len(c.Groups):len(c.Groups)], make([]TermGroup, 0, len(weights))...), FieldWeight: c.FieldWeight}
	for k, w := range weights {
		out.Groups = append(out.Groups, TermGroup{Members: []Member{{Term: first + k, Coef: 1}}, IDF: first + k, Weight: w})
	}
	return out
}

// PseudoTF is group g's pseudo-frequency in a chunk (or document) of
// length normalisation norm, tf(i) the frequency there of the request's
// term i: text = the sum, from 0 in member order, of float64(coef *
// float64(tf)) over its text members; field the same over its field
// members; then text when field is 0, else text + float64(FieldWeight *
// field) * norm. A member whose tf is 0 adds nothing.
func (c *Combined) PseudoTF(g *TermGroup, tf func(int) int64, norm float64) float64 {
	var text, field float64
	for _, m := range g.Members {
		n := tf(m.Term)
		if n == 0 {
			continue
		}
		if m.Field {
			field += float64(m.Coef * float64(n))
		} else {
			text += float64(m.Coef * float64(n))
		}
	}
	return c.Combine(text, field, norm)
}

// Combine is PseudoTF's last step from the text and field sums.
func (c *Combined) Combine(text, field, norm float64) float64 {
	if field == 0 {
		return text
	}
	return float64(text + float64(float64(c.FieldWeight*field)*norm))
}

// Score is a chunk's (or document's) lexical score under c: the sum, from
// 0 in group order, of float64(Weight * bm25.TermNormF(idf[g.IDF], tf~,
// norm, p)) over the groups whose pseudo-frequency tf~ is above 0.
func (c *Combined) Score(idf []float64, tf func(int) int64, norm float64, p bm25.Params) float64 {
	var score float64
	for gi := range c.Groups {
		g := &c.Groups[gi]
		if ptf := c.PseudoTF(g, tf, norm); ptf > 0 {
			score += float64(g.Weight * bm25.TermNormF(idf[g.IDF], ptf, norm, p))
		}
	}
	return score
}

// LexicalTerms returns a rank request's terms, weights and combined terms
// for a query's terms (distinct, after the stop list) and its kept tokens,
// under p's qtf_k3, stem_weight, field_weight and bm25f: the terms and
// weights of [WithStems] then [WithFields], and, under bm25f, their
// [CombinedTerms] (nil otherwise).
func LexicalTerms(kept, terms []string, p Policy) ([]string, []float64, *Combined) {
	q := len(terms)
	all, weights := WithStems(terms, QueryTermWeights(kept, terms, p.QTFK3), p.StemWeight)
	all, weights = WithFields(all, weights, p.FieldWeight)
	if !p.BM25F {
		return all, weights, nil
	}
	return all, weights, CombinedTerms(all, weights, q, p.StemWeight, p.FieldWeight)
}
