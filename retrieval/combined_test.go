package retrieval

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cordon-rag/cordon/bm25"
)

// combinedPolicy is the seed profile with the lexical fields of a combined
// request.
func combinedPolicy(stem, field float64, bf bool) Policy {
	p := DefaultPolicy()
	p.StemWeight, p.FieldWeight, p.BM25F = stem, field, bf
	return p
}

func TestCombinedTermsGroups(t *testing.T) {
	terms := []string{"contribution", "contributes", "771"}
	all, _, c := LexicalTerms(terms, terms, combinedPolicy(0.5, 0.3, true))
	wantTerms := []string{"contribution", "contributes", "771", "~contribut",
		"#contribution", "#contributes", "#771", "#~contribut"}
	if !reflect.DeepEqual(all, wantTerms) {
		t.Fatalf("terms %q, want %q", all, wantTerms)
	}
	want := &Combined{FieldWeight: 0.3, Groups: []TermGroup{
		{IDF: 3, Weight: 1, Members: []Member{{Term: 0, Coef: 0.5}, {Term: 3, Coef: 0.5, Stem: true},
			{Term: 4, Coef: 0.5, Field: true}, {Term: 7, Coef: 0.5, Field: true, Stem: true}}},
		// Both words share the stem term; each keeps its own group.
		{IDF: 3, Weight: 1, Members: []Member{{Term: 1, Coef: 0.5}, {Term: 3, Coef: 0.5, Stem: true},
			{Term: 5, Coef: 0.5, Field: true}, {Term: 7, Coef: 0.5, Field: true, Stem: true}}},
		// A number has no stem: the word counts 1 and has its own idf.
		{IDF: 2, Weight: 1, Members: []Member{{Term: 2, Coef: 1}, {Term: 6, Coef: 1, Field: true}}},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("groups\n%+v\nwant\n%+v", c, want)
	}
	exact := c.ForTenant(false, false)
	if g := exact.Groups[0]; g.IDF != 0 || !reflect.DeepEqual(g.Members, []Member{{Term: 0, Coef: 1}, {Term: 4, Coef: 1, Field: true}}) {
		t.Fatalf("under the exact analyzer group 0 is %+v", g)
	}
	if exact.FieldWeight != 0.3 {
		t.Fatalf("exact analyzer, field counts: field weight %v", exact.FieldWeight)
	}
	if c.ForTenant(true, false) != c {
		t.Fatal("ForTenant(true, false) must keep the groups")
	}
	// Length-normalised field frequencies: the field weight over 16,
	// exactly; the groups as they were.
	for _, stemmed := range []bool{true, false} {
		n := c.ForTenant(stemmed, true)
		if n.FieldWeight != 0.3/16 || n.FieldWeight*16 != 0.3 {
			t.Fatalf("stemmed %t, normalised fields: field weight %v", stemmed, n.FieldWeight)
		}
		if want := c.ForTenant(stemmed, false); !reflect.DeepEqual(n.Groups, want.Groups) {
			t.Fatalf("stemmed %t: normalised fields change the groups: %+v", stemmed, n.Groups)
		}
	}
	if _, _, flat := LexicalTerms(terms, terms, combinedPolicy(0.5, 0.3, false)); flat != nil {
		t.Fatal("without bm25f a request has no groups")
	}
	ext := c.Append(len(all), []float64{0.25})
	if n := len(ext.Groups); n != 4 || ext.Groups[3].IDF != 8 || ext.Groups[3].Weight != 0.25 || len(c.Groups) != 3 {
		t.Fatalf("Append: %+v (original %d groups)", ext.Groups, len(c.Groups))
	}
}

// flatScore is SPEC section 4's weighted sum over the request's terms.
func flatScore(weights []float64, idf []float64, tf []int64, norm float64, p bm25.Params) float64 {
	var s float64
	for i, n := range tf {
		if n > 0 {
			s += float64(weightAt(weights, i) * bm25.TermNorm(idf[i], n, norm, p))
		}
	}
	return s
}

// TestCombinedWithoutFormsIsFlat: with stem_weight and field_weight 0 every
// group is one term and the combined score has the flat sum's bits, for
// random frequencies, weights and lengths.
func TestCombinedWithoutFormsIsFlat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 43))
	p := bm25.DefaultParams()
	for range 2000 {
		terms := []string{"alpha", "beta", "gamma", "delta"}[:1+r.IntN(4)]
		kept := append([]string(nil), terms...)
		for range r.IntN(4) {
			kept = append(kept, terms[r.IntN(len(terms))])
		}
		pol := combinedPolicy(0, 0, true)
		pol.QTFK3 = []float64{0, 1, 8}[r.IntN(3)]
		all, weights, c := LexicalTerms(kept, terms, pol)
		idf := make([]float64, len(all))
		tf := make([]int64, len(all))
		for i := range all {
			idf[i] = r.Float64() * 5
			tf[i] = int64(r.IntN(4))
		}
		norm := 0.25 + r.Float64()*2
		got := c.Score(idf, func(i int) int64 { return tf[i] }, norm, p)
		want := flatScore(weights, idf, tf, norm, p)
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("terms %q tf %v: combined %v, flat %v", all, tf, got, want)
		}
	}
}

// TestCombinedSemantics: at stem_weight 1 a group is BM25 over the stem
// term; below 1 the word as written outranks another form; a field match
// counts field_weight times a text match of an average chunk.
func TestCombinedSemantics(t *testing.T) {
	p := bm25.DefaultParams()
	terms := []string{"contribution"}
	// Terms: contribution ~contribut #contribution #~contribut.
	for _, w := range []float64{0.3, 0.5, 1} {
		_, _, c := LexicalTerms(terms, terms, combinedPolicy(w, 0.5, true))
		idf := []float64{3, 1.5, 2.5, 1}
		score := func(tf []int64, norm float64) float64 {
			return c.Score(idf, func(i int) int64 { return tf[i] }, norm, p)
		}
		exact, other := score([]int64{1, 1, 0, 0}, 1), score([]int64{0, 1, 0, 0}, 1)
		if w < 1 && !(exact > other) {
			t.Fatalf("stem_weight %v: exact %v, other form %v", w, exact, other)
		}
		if w == 1 {
			if want := bm25.TermNorm(1.5, 3, 1.2, p); score([]int64{2, 3, 0, 0}, 1.2) != want || exact != other {
				t.Fatalf("stem_weight 1 is not BM25 over the stem term")
			}
		}
		// One title occurrence at norm 1 is 0.5 of a text one.
		title := score([]int64{0, 0, 1, 1}, 1)
		half := c.Score(idf, func(i int) int64 { return []int64{1, 1, 0, 0}[i] }, 1, p)
		if !(title < half) || title != float64(bm25.TermNormF(1.5, 0.5, 1, p)) {
			t.Fatalf("stem_weight %v: title-only score %v", w, title)
		}
		if score([]int64{0, 0, 0, 0}, 1) != 0 {
			t.Fatal("a chunk holding no member must score 0")
		}
	}
}
