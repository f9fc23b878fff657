package analysis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kljensen/snowball/english"
)

func TestStem(t *testing.T) {
	for _, tt := range []struct {
		tok, want string
		ok        bool
	}{
		// Porter2 (Snowball English) vectors.
		{"contribution", "~contribut", true},
		{"contribute", "~contribut", true},
		{"provided", "~provid", true},
		{"provide", "~provid", true},
		{"running", "~run", true},
		{"generously", "~generous", true},
		{"happiness", "~happi", true},
		{"dying", "~die", true}, // a special word: the stem differs after the first letter
		{"news", "~news", true},
		{"the", "~the", true}, // stop words are stemmed like any word
		{"a", "~a", true},
		// No stem term: a digit, or a letter outside a-z.
		{"pmt771", "", false},
		{"771", "", false},
		{"café", "", false},
		{"данные", "", false},
		{"", "", false},
	} {
		got, ok := Stem(tt.tok)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Stem(%q) = %q, %v; want %q, %v", tt.tok, got, ok, tt.want, tt.ok)
		}
		if ok && (!IsStemTerm(got) || HasToken(got[:1])) {
			t.Errorf("Stem(%q) = %q: not a stem term, or its prefix is a token", tt.tok, got)
		}
	}
}

func TestAppendStems(t *testing.T) {
	terms, tf := NewCounter().Count("Contribution contributes to the contributor's 771 contribution")
	exact := slices.Clone(terms)
	terms, tf = NewStemmer().AppendStems(terms, tf)
	// contribution 2 + contributes 1; contributor stems to contributor.
	wantTerms := []string{"contribution", "contributes", "to", "the", "contributor", "s", "771",
		"~contribut", "~to", "~the", "~contributor", "~s"}
	wantTF := []int32{2, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1}
	if !slices.Equal(terms, wantTerms) || !slices.Equal(tf, wantTF) {
		t.Fatalf("AppendStems = %q %v, want %q %v", terms, tf, wantTerms, wantTF)
	}
	if !slices.Equal(terms[:len(exact)], exact) {
		t.Fatalf("the tokens' entries changed")
	}
}

// TestVocabularyStemsAsStemmer: a Vocabulary's stem ids name the same
// terms with the same counts as a Stemmer's, text after text (the stems
// remembered from earlier texts included).
func TestVocabularyStemsAsStemmer(t *testing.T) {
	v := NewVocabulary()
	st := NewStemmer()
	c := NewCounter()
	for _, text := range []string{
		"Running runs ran; the runner's run",
		"provided providing provides PROVIDE 42 x9",
		"running ahead: contributions contribute",
		"",
		"данные café run",
	} {
		ids, tf := v.CountIDs(text)
		ids, tf = v.AppendStemIDs(ids, tf)
		terms, wtf := c.Count(text)
		terms, wtf = st.AppendStems(terms, wtf)
		if got := v.Names(ids); !slices.Equal(got, terms) || !slices.Equal(tf, wtf) {
			t.Fatalf("%q: vocabulary %q %v, stemmer %q %v", text, got, tf, terms, wtf)
		}
	}
}

func TestStemMatcher(t *testing.T) {
	m := NewStemMatcher([]string{"contribution", "771", "provided", "dying", "contribution"})
	// 771 has no stem term; dying is one of Porter2's special words (~die).
	m.Scan("They contribute what the study provides; 771 died, the man dying.")
	want := []bool{true, false, true, true, true}
	for i, w := range want {
		if m.Has(i) != w {
			t.Errorf("Has(%d) = %v, want %v", i, m.Has(i), w)
		}
	}
	m.Scan("nothing here")
	for i := range want {
		if m.Has(i) {
			t.Errorf("after another scan Has(%d) = true", i)
		}
	}
}

// TestStemCacheConcurrent: stems read from the process's cache, by many
// goroutines at once (run with -race), are the stemmer's own, including
// after the cache's shards have been emptied.
func TestStemCacheConcurrent(t *testing.T) {
	old := stemShardMax
	stemShardMax = 16
	defer func() { stemShardMax = old }()
	words := []string{"contribution", "contributes", "running", "generously", "the", "a", "lamins", "migraines"}
	for i := range 3000 {
		words = append(words, fmt.Sprintf("w%sx", strings.Repeat("q", i%40))+strings.Repeat("z", i/40))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range len(words) {
				w := words[(k*(g+1))%len(words)]
				got, ok := Stem(w)
				want, wantOK := "", stemmable(w)
				if wantOK {
					want = StemPrefix + english.Stem(w, true)
				}
				if got != want || ok != wantOK {
					errs <- fmt.Sprintf("Stem(%q) = %q, %v; want %q, %v", w, got, ok, want, wantOK)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestStemMatcherScanHeld: on random texts and queries of inflected words,
// ScanHeld with a Matcher's Has over the same text answers Has exactly as
// Scan does, for every query token.
func TestStemMatcherScanHeld(t *testing.T) {
	words := strings.Fields(`contribute contributes contribution contributions contributed provide provided providers
		dying die dies lying lie skies sky happy happiness run running runs ran 771 x9 generous generously cell cells`)
	rng := rand.New(rand.NewPCG(11, 29))
	pick := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[rng.IntN(len(words))]
		}
		return out
	}
	for trial := range 3000 {
		query := pick(1 + rng.IntN(6))
		text := strings.Join(pick(rng.IntN(40)), " ")
		exact, stems, held := NewMatcher(query), NewStemMatcher(query), NewStemMatcher(query)
		exact.Scan(text)
		stems.Scan(text)
		held.ScanHeld(text, exact.Has)
		for i := range query {
			if stems.Has(i) != held.Has(i) {
				t.Fatalf("trial %d: query %q, text %q: token %d: Scan %t, ScanHeld %t", trial, query, text, i, stems.Has(i), held.Has(i))
			}
		}
		// A reused matcher forgets the last text.
		held.ScanHeld("", func(int) bool { return false })
		for i := range query {
			if held.Has(i) {
				t.Fatalf("trial %d: token %d still found after an empty text", trial, i)
			}
		}
	}
}
