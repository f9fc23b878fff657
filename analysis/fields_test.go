package analysis

import (
	"slices"
	"testing"
)

// TestFieldText: the title, a newline and the section name; the section
// names body and untitled add nothing, an empty title no newline.
func TestFieldText(t *testing.T) {
	for _, c := range []struct{ title, section, want string }{
		{"Creating a Cluster", "Clusters", "Creating a Cluster\nClusters"},
		{"", "Clusters", "Clusters"},
		{"T", "body", "T"},
		{"T", "untitled", "T"},
		{"", "body", ""},
		{"T", "Body", "T\nBody"},
	} {
		if got := FieldText(c.title, c.section); got != c.want {
			t.Errorf("FieldText(%q, %q) = %q, want %q", c.title, c.section, got, c.want)
		}
	}
}

// TestAppendFieldTerms is docs/spec.md's example: the field terms follow
// the terms given, tokens first, then (with a stemmer) their stem terms,
// each prefixed by FieldPrefix; the Vocabulary form gives the same terms.
func TestAppendFieldTerms(t *testing.T) {
	text := FieldText("Creating a Cluster", "Clusters")
	for _, c := range []struct {
		stemmer *Stemmer
		terms   []string
		tf      []int32
	}{
		{nil, []string{"x", "#creating", "#a", "#cluster", "#clusters"}, []int32{3, 1, 1, 1, 1}},
		{NewStemmer(), []string{"x", "#creating", "#a", "#cluster", "#clusters", "#~creat", "#~a", "#~cluster"}, []int32{3, 1, 1, 1, 1, 1, 1, 2}},
	} {
		terms, tf := AppendFieldTerms([]string{"x"}, []int32{3}, text, NewCounter(), c.stemmer)
		if !slices.Equal(terms, c.terms) || !slices.Equal(tf, c.tf) {
			t.Errorf("stemmer %t: %q %v, want %q %v", c.stemmer != nil, terms, tf, c.terms, c.tf)
		}
		v := NewVocabulary()
		ids, tf := v.CountIDs("x x x")
		ids, tf = v.AppendFieldIDs(ids, tf, text, NewCounter(), c.stemmer)
		if got := v.Names(ids); !slices.Equal(got, c.terms) || !slices.Equal(tf, c.tf) {
			t.Errorf("stemmer %t, vocabulary: %q %v, want %q %v", c.stemmer != nil, got, tf, c.terms, c.tf)
		}
		for _, term := range terms[1:] {
			if !IsFieldTerm(term) || IsStemTerm(term) {
				t.Errorf("%q: a field term, not a stem term", term)
			}
		}
	}
	if terms, tf := AppendFieldTerms(nil, nil, " ,. ", NewCounter(), NewStemmer()); terms != nil || tf != nil {
		t.Errorf("no token: %q %v, want nothing", terms, tf)
	}
}

// TestVersions: every analyzer and field setting has its own tokenizer
// version, which AnalyzerOf reads back; the exact analyzer without fields
// is TokenizerVersion itself (what tenants created before analyzers
// record).
func TestVersions(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range []string{AnalyzerExact, AnalyzerEnglish} {
		for _, f := range []bool{false, true} {
			v := Version(a, f)
			if seen[v] {
				t.Fatalf("%s: twice", v)
			}
			seen[v] = true
			if ga, gf, ok := AnalyzerOf(v); !ok || ga != a || gf != f {
				t.Errorf("AnalyzerOf(%q) = %q %t %t, want %q %t", v, ga, gf, ok, a, f)
			}
		}
	}
	if Version(AnalyzerExact, false) != TokenizerVersion || Version(AnalyzerEnglish, false) != TokenizerVersion+"/english-"+StemmerVersion {
		t.Errorf("the versions without fields changed: %q, %q", Version(AnalyzerExact, false), Version(AnalyzerEnglish, false))
	}
	if _, _, ok := AnalyzerOf(TokenizerVersion + "/fields-0"); ok {
		t.Error("an unknown version is known")
	}
}
