package analysis

import (
	"slices"
	"testing"
)

// TestFieldText: the title, the path's names and the section name, a
// line each; the names body and untitled, a name equal to the title
// (case folded) and an empty title add nothing.
func TestFieldText(t *testing.T) {
	for _, c := range []struct{ title, path, section, want string }{
		{"Creating a Cluster", "", "Clusters", "Creating a Cluster\nClusters"},
		{"", "", "Clusters", "Clusters"},
		{"T", "", "body", "T"},
		{"T", "", "untitled", "T"},
		{"", "", "body", ""},
		{"T", "", "Body", "T\nBody"},
		{"T", "Admin", "Clusters", "T\nAdmin\nClusters"},
		{"T", JoinPath([]string{"Admin", "Servers"}), "Clusters", "T\nAdmin\nServers\nClusters"},
		{"", JoinPath([]string{"Admin", "Servers"}), "Clusters", "Admin\nServers\nClusters"},
		{"T", JoinPath([]string{"untitled", "Servers"}), "untitled", "T\nServers"},
		{"", JoinPath([]string{"body", "untitled"}), "untitled", ""},
		{"", "A", "untitled", "A"},
		{"", "A", "A", "A\nA"},
		{"Cluster Guide", "cluster guide", "Install", "Cluster Guide\nInstall"},
		{"Cluster Guide", "", "CLUSTER GUIDE", "Cluster Guide"},
		{"Cluster Guide", JoinPath([]string{"Cluster Guide", "Install"}), "Cluster guide", "Cluster Guide\nInstall"},
		{"Guide", "", "Guides", "Guide\nGuides"},
	} {
		if got := FieldText(c.title, c.path, c.section); got != c.want {
			t.Errorf("FieldText(%q, %q, %q) = %q, want %q", c.title, c.path, c.section, got, c.want)
		}
	}
}

// TestSectionFieldText: the rules before section paths, the title, a
// newline and the section name, a section equal to the title included.
func TestSectionFieldText(t *testing.T) {
	for _, c := range []struct{ title, section, want string }{
		{"Creating a Cluster", "Clusters", "Creating a Cluster\nClusters"},
		{"", "Clusters", "Clusters"},
		{"T", "body", "T"},
		{"T", "untitled", "T"},
		{"", "body", ""},
		{"T", "Body", "T\nBody"},
		{"T", "T", "T\nT"},
	} {
		if got := SectionFieldText(c.title, c.section); got != c.want {
			t.Errorf("SectionFieldText(%q, %q) = %q, want %q", c.title, c.section, got, c.want)
		}
	}
}

// TestAppendFieldTerms is docs/spec.md's example: the field terms follow
// the terms given, tokens first, then (with a stemmer) their stem terms,
// each prefixed by FieldPrefix; the Vocabulary form gives the same terms.
func TestAppendFieldTerms(t *testing.T) {
	text := FieldText("Creating a Cluster", JoinPath([]string{"Administration"}), "Clusters")
	for _, c := range []struct {
		stemmer *Stemmer
		terms   []string
		tf      []int32
	}{
		{nil, []string{"x", "#creating", "#a", "#cluster", "#administration", "#clusters"}, []int32{3, 1, 1, 1, 1, 1}},
		{NewStemmer(), []string{"x", "#creating", "#a", "#cluster", "#administration", "#clusters", "#~creat", "#~a", "#~cluster", "#~administr"}, []int32{3, 1, 1, 1, 1, 1, 1, 1, 2, 1}},
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
// version, which AnalyzerOf reads back, and so do the field rules before
// section paths; the exact analyzer without fields is TokenizerVersion
// itself (what tenants created before analyzers record).
func TestVersions(t *testing.T) {
	seen := map[string]bool{}
	check := func(v, a string, f, so bool) {
		t.Helper()
		if seen[v] {
			t.Fatalf("%s: twice", v)
		}
		seen[v] = true
		if ga, gf, gso, ok := AnalyzerOf(v); !ok || ga != a || gf != f || gso != so {
			t.Errorf("AnalyzerOf(%q) = %q %t %t %t, want %q %t %t", v, ga, gf, gso, ok, a, f, so)
		}
		if !slices.Contains(Versions(), v) {
			t.Errorf("Versions() lacks %q", v)
		}
	}
	for _, a := range []string{AnalyzerExact, AnalyzerEnglish} {
		for _, f := range []bool{false, true} {
			check(Version(a, f), a, f, false)
		}
		check(SectionFieldsVersion(a), a, true, true)
	}
	if len(Versions()) != len(seen) {
		t.Errorf("Versions() = %q, want the %d checked", Versions(), len(seen))
	}
	if Version(AnalyzerExact, false) != TokenizerVersion || Version(AnalyzerEnglish, false) != TokenizerVersion+"/english-"+StemmerVersion {
		t.Errorf("the versions without fields changed: %q, %q", Version(AnalyzerExact, false), Version(AnalyzerEnglish, false))
	}
	// What tenants of the release before section paths recorded.
	if got := SectionFieldsVersion(AnalyzerEnglish); got != TokenizerVersion+"/english-"+StemmerVersion+"/fields-title-section-1" {
		t.Errorf("SectionFieldsVersion(english) = %q", got)
	}
	if _, _, _, ok := AnalyzerOf(TokenizerVersion + "/fields-0"); ok {
		t.Error("an unknown version is known")
	}
}
