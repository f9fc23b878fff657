package analysis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkVocabulary counts texts with one Vocabulary and checks each against
// Counter: the same terms and counts in the same order, ids that name
// those terms, and one id (and one string) per distinct token across
// texts.
func checkVocabulary(t *testing.T, texts []string) *Vocabulary {
	t.Helper()
	v, c := NewVocabulary(), NewCounter()
	seen := map[string]int32{}
	for _, s := range texts {
		ids, tf := v.CountIDs(s)
		terms := v.Names(ids)
		wantTerms, wantTF := c.Count(s)
		if !slices.Equal(terms, wantTerms) || !slices.Equal(tf, wantTF) {
			t.Fatalf("%q: counted %q %v, Counter %q %v", s, terms, tf, wantTerms, wantTF)
		}
		if len(ids) != len(terms) {
			t.Fatalf("%q: %d ids for %d terms", s, len(ids), len(terms))
		}
		for j, id := range ids {
			if got := v.Terms()[id]; got != terms[j] {
				t.Fatalf("%q: id %d names %q, want %q", s, id, got, terms[j])
			}
			if prev, ok := seen[terms[j]]; ok && prev != id {
				t.Fatalf("%q: %q has ids %d and %d", s, terms[j], prev, id)
			}
			seen[terms[j]] = id
		}
	}
	if len(v.Terms()) != len(seen) {
		t.Fatalf("%d ids for %d distinct tokens", len(v.Terms()), len(seen))
	}
	return v
}

func TestVocabulary(t *testing.T) {
	checkVocabulary(t, []string{
		"", "   ", "PMT-771 Hold hold HOLD pmt", "Zürich naïve ZÜRICH",
		// 8 bytes and around it, in bytes, not runes: "zürichxy" is 9.
		"abcdefgh abcdefghi abcdefg abcdefgh ABCDEFGHI", "zürichx zürichxy zürich",
		"a\xffb a b \xff", "日本語のテキスト 日本語", "x1 1x 11 x1",
	})
	// Enough distinct tokens, short and long, to grow both tables many
	// times, repeated across texts.
	r := rand.New(rand.NewPCG(3, 4))
	var words []string
	for i := range 20_000 {
		words = append(words, fmt.Sprintf("%x", r.Uint64()>>(r.IntN(60)))+strings.Repeat("q", i%3))
	}
	var texts []string
	for range 2_000 {
		var b strings.Builder
		for range 1 + r.IntN(60) {
			b.WriteString(words[r.IntN(len(words))] + " ")
		}
		texts = append(texts, b.String())
	}
	v := checkVocabulary(t, texts)
	if len(v.short) <= vocabularyMin || len(v.table) <= vocabularyMin {
		t.Fatalf("tables of %d and %d entries: the test grows neither", len(v.short), len(v.table))
	}
}

func FuzzVocabulary(f *testing.F) {
	f.Add("PMT-771 Hold hold", "hold zürich abcdefghi")
	f.Add("", "\xff\xfe")
	f.Fuzz(func(t *testing.T, a, b string) {
		checkVocabulary(t, []string{a, b, a + " " + b})
	})
}
