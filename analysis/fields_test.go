package analysis

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
		// The headings' part is what follows the title.
		h := HeadingText(c.title, c.path, c.section)
		joined := c.title
		if c.title != "" && h != "" {
			joined += "\n"
		}
		if joined += h; joined != c.want || strings.HasPrefix(h, "\n") {
			t.Errorf("HeadingText(%q, %q, %q) = %q: with the title %q, want %q", c.title, c.path, c.section, h, joined, c.want)
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

// TestAppendFieldTerms is docs/spec.md's example under the rules before
// length normalisation: the field terms follow the terms given, tokens
// first, then (with a stemmer) their stem terms, each prefixed by
// FieldPrefix and counted; the Vocabulary form gives the same terms.
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

// TestAppendNormFieldTerms is docs/spec.md's example under the current
// rules: the title "Creating a Cluster" (3 tokens) and the headings
// "Administration" and "Clusters" (2 tokens) are two fields; a term's
// frequency is FieldTF of its count in each field where it occurs, summed
// (64/3 = 21.3 and 64/2 = 32; ~cluster 21 + 32).
func TestAppendNormFieldTerms(t *testing.T) {
	title, path, section := "Creating a Cluster", JoinPath([]string{"Administration"}), "Clusters"
	headings := HeadingText(title, path, section)
	if headings != "Administration\nClusters" {
		t.Fatalf("HeadingText = %q", headings)
	}
	for _, c := range []struct {
		stemmer *Stemmer
		terms   []string
		tf      []int32
	}{
		{nil, []string{"x", "#creating", "#a", "#cluster", "#administration", "#clusters"}, []int32{3, 21, 21, 21, 32, 32}},
		{NewStemmer(), []string{"x", "#creating", "#a", "#cluster", "#administration", "#clusters", "#~creat", "#~a", "#~cluster", "#~administr"}, []int32{3, 21, 21, 21, 32, 32, 21, 21, 53, 32}},
	} {
		terms, tf := AppendNormFieldTerms([]string{"x"}, []int32{3}, title, headings, NewCounter(), c.stemmer)
		if !slices.Equal(terms, c.terms) || !slices.Equal(tf, c.tf) {
			t.Errorf("stemmer %t: %q %v, want %q %v", c.stemmer != nil, terms, tf, c.terms, c.tf)
		}
		v := NewVocabulary()
		ids, tf := v.CountIDs("x x x")
		ids, tf = v.AppendNormFieldIDs(ids, tf, title, headings, NewCounter(), c.stemmer)
		if got := v.Names(ids); !slices.Equal(got, c.terms) || !slices.Equal(tf, c.tf) {
			t.Errorf("stemmer %t, vocabulary: %q %v, want %q %v", c.stemmer != nil, got, tf, c.terms, c.tf)
		}
	}
	// One field alone: its own length. "Guide" is 1 token: 64.
	if terms, tf := AppendNormFieldTerms(nil, nil, "Guide", "", NewCounter(), NewStemmer()); !slices.Equal(terms, []string{"#guide", "#~guid"}) || !slices.Equal(tf, []int32{64, 64}) {
		t.Errorf("a title alone: %q %v", terms, tf)
	}
	if terms, tf := AppendNormFieldTerms(nil, nil, "", "Install\nLinux", NewCounter(), nil); !slices.Equal(terms, []string{"#install", "#linux"}) || !slices.Equal(tf, []int32{32, 32}) {
		t.Errorf("headings alone: %q %v", terms, tf)
	}
	if terms, tf := AppendNormFieldTerms(nil, nil, " ,. ", "", NewCounter(), NewStemmer()); terms != nil || tf != nil {
		t.Errorf("no token: %q %v, want nothing", terms, tf)
	}
}

// TestAppendNormFieldTermsReference: on random titles and headings the
// terms are those AppendFieldTerms gives for the field text, in its
// order, and each frequency is the sum over the two fields of FieldTF of
// the term's count there, computed plainly from the tokens.
func TestAppendNormFieldTermsReference(t *testing.T) {
	words := []string{"cluster", "clusters", "clustered", "index", "indexes", "a", "the", "x1", "guide", "guides", "Install"}
	rng := rand.New(rand.NewPCG(7, 43))
	pick := func(n int) string {
		var out []string
		for range n {
			out = append(out, words[rng.IntN(len(words))])
		}
		return strings.Join(out, " ")
	}
	for range 3000 {
		title := pick(rng.IntN(4))
		var hs []string
		for range rng.IntN(3) {
			hs = append(hs, pick(1+rng.IntN(3)))
		}
		headings := strings.Join(hs, "\n")
		for _, stemmer := range []*Stemmer{nil, NewStemmer()} {
			terms, tf := AppendNormFieldTerms(nil, nil, title, headings, NewCounter(), stemmer)
			text := title
			if title != "" && headings != "" {
				text += "\n"
			}
			text += headings
			want, _ := AppendFieldTerms(nil, nil, text, NewCounter(), stemmer)
			if !slices.Equal(terms, want) {
				t.Fatalf("%q / %q: terms %q, want %q", title, headings, terms, want)
			}
			count := func(field, term string) (c, n int32) {
				for _, tok := range Tokenize(field) {
					n++
					if st, _ := Stem(tok); FieldPrefix+tok == term || (stemmer != nil && FieldPrefix+st == term) {
						c++
					}
				}
				return c, n
			}
			for i, term := range terms {
				var f int32
				for _, field := range []string{title, headings} {
					if c, n := count(field, term); c > 0 {
						f += FieldTF(c, n)
					}
				}
				if tf[i] != f {
					t.Fatalf("%q / %q: tf(%q) = %d, want %d", title, headings, term, tf[i], f)
				}
			}
		}
	}
}

// TestFieldTF: count * 64 / n rounded half up, in integers, never below 1;
// the same as the float form wherever that is exact.
func TestFieldTF(t *testing.T) {
	for _, c := range []struct{ count, n, want int32 }{
		{1, 1, 64}, {2, 1, 128}, {1, 2, 32}, {1, 3, 21}, {2, 3, 43}, {1, 5, 13}, {1, 128, 1}, {1, 129, 1} /* 0.496, at least 1 */, {1, 1000, 1},
		{3, 128, 2}, // 1.5 rounds up
		{1 << 30, 1, 1<<31 - 1},
	} {
		if got := FieldTF(c.count, c.n); got != c.want {
			t.Errorf("FieldTF(%d, %d) = %d, want %d", c.count, c.n, got, c.want)
		}
	}
	for n := int32(1); n <= 300; n++ {
		for count := int32(1); count <= n; count++ {
			want := int32(math.Floor(float64(count)*FieldScale*FieldRefLength/float64(n) + 0.5))
			if got := FieldTF(count, n); got != max(want, 1) {
				t.Fatalf("FieldTF(%d, %d) = %d, want %d", count, n, got, max(want, 1))
			}
		}
	}
}

// TestVersions: every analyzer and field setting has its own tokenizer
// version, which AnalyzerOf reads back, and so do the field rules before
// section paths; the exact analyzer without fields is TokenizerVersion
// itself (what tenants created before analyzers record).
func TestVersions(t *testing.T) {
	seen := map[string]bool{}
	check := func(v, a string, f bool, rules string) {
		t.Helper()
		if seen[v] {
			t.Fatalf("%s: twice", v)
		}
		seen[v] = true
		if ga, gf, gr, ok := AnalyzerOf(v); !ok || ga != a || gf != f || gr != rules {
			t.Errorf("AnalyzerOf(%q) = %q %t %q %t, want %q %t %q", v, ga, gf, gr, ok, a, f, rules)
		}
		if !slices.Contains(Versions(), v) {
			t.Errorf("Versions() lacks %q", v)
		}
	}
	for _, a := range []string{AnalyzerExact, AnalyzerEnglish} {
		for _, f := range []bool{false, true} {
			check(Version(a, f), a, f, "")
		}
		if RulesVersion(a, "") != Version(a, true) {
			t.Errorf("RulesVersion(%q, \"\") = %q, want the current rules", a, RulesVersion(a, ""))
		}
		check(RulesVersion(a, FieldsPathVersion), a, true, FieldsPathVersion)
		check(RulesVersion(a, FieldsSectionVersion), a, true, FieldsSectionVersion)
	}
	if len(Versions()) != len(seen) {
		t.Errorf("Versions() = %q, want the %d checked", Versions(), len(seen))
	}
	if Version(AnalyzerExact, false) != TokenizerVersion || Version(AnalyzerEnglish, false) != TokenizerVersion+"/english-"+StemmerVersion {
		t.Errorf("the versions without fields changed: %q, %q", Version(AnalyzerExact, false), Version(AnalyzerEnglish, false))
	}
	// What tenants of the releases before section paths and before
	// length-normalised field frequencies recorded.
	if got := RulesVersion(AnalyzerEnglish, FieldsSectionVersion); got != TokenizerVersion+"/english-"+StemmerVersion+"/fields-title-section-1" {
		t.Errorf("RulesVersion(english, section) = %q", got)
	}
	if got := RulesVersion(AnalyzerEnglish, FieldsPathVersion); got != TokenizerVersion+"/english-"+StemmerVersion+"/fields-title-path-2" {
		t.Errorf("RulesVersion(english, path) = %q", got)
	}
	for _, r := range []string{"", FieldsPathVersion, FieldsSectionVersion} {
		if !ValidRules(r) {
			t.Errorf("ValidRules(%q) = false", r)
		}
	}
	if ValidRules(FieldsVersion) || ValidRules("fields-0") {
		t.Error("ValidRules takes a name that is not an older rule set")
	}
	if _, _, _, ok := AnalyzerOf(TokenizerVersion + "/fields-0"); ok {
		t.Error("an unknown version is known")
	}
}

// BenchmarkFieldTerms measures a chunk's field terms under the English
// analyzer: counted over the field text (the older rules) and
// length-normalised per field (the current ones), for a title alone and
// for a title with a section path.
func BenchmarkFieldTerms(b *testing.B) {
	title, path, section := "Creating a Database Cluster", JoinPath([]string{"Server Setup and Operation", "Creating a Database Cluster"}), "Use of Network File Systems"
	for _, c := range []struct{ name, path, section string }{{"title", "", "body"}, {"title+headings", path, section}} {
		text, headings := FieldText(title, c.path, c.section), HeadingText(title, c.path, c.section)
		counter, stemmer := NewCounter(), NewStemmer()
		b.Run(c.name+"/counts", func(b *testing.B) {
			for b.Loop() {
				AppendFieldTerms(nil, nil, text, counter, stemmer)
			}
		})
		b.Run(c.name+"/normalised", func(b *testing.B) {
			for b.Loop() {
				AppendNormFieldTerms(nil, nil, title, headings, counter, stemmer)
			}
		})
	}
}
