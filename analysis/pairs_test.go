package analysis

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// pairCount is PairMatcher.Count written the slow way: the distinct
// adjacent pairs of query, and how many of them are adjacent pairs of
// Tokenize(text).
func pairCount(query []string, text string) (pairs, found int) {
	want := map[[2]string]bool{}
	for i := 1; i < len(query); i++ {
		want[[2]string{query[i-1], query[i]}] = false
	}
	toks := Tokenize(text)
	for i := 1; i < len(toks); i++ {
		k := [2]string{toks[i-1], toks[i]}
		if seen, ok := want[k]; ok && !seen {
			want[k] = true
			found++
		}
	}
	return len(want), found
}

// TestPairMatcher: on random token sequences and texts (repetitions,
// reversed pairs, case and punctuation between tokens, non-ASCII), Count
// and Pairs agree with the slow definition.
func TestPairMatcher(t *testing.T) {
	words := []string{"payment", "hold", "Hold", "tx4096", "über", "a", "the", "PMT-771"}
	seps := []string{" ", "  ", ", ", ". ", "\n", " - "}
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	for i := range 2000 {
		query := Tokenize(text(r.IntN(6)))
		m := NewPairMatcher(query)
		for range 3 {
			s := text(r.IntN(20))
			pairs, found := pairCount(query, s)
			if m.Pairs() != pairs {
				t.Fatalf("case %d: %q: %d pairs, want %d", i, query, m.Pairs(), pairs)
			}
			if got := m.Count(s); got != found {
				t.Fatalf("case %d: %q in %q: %d pairs found, want %d", i, query, s, got, found)
			}
		}
	}
}

func BenchmarkPairMatcher(b *testing.B) {
	m := NewPairMatcher(Tokenize("how to hold a payment for review"))
	text := strings.Repeat("the payment was placed on hold for a review of the account and ", 20)
	b.ReportAllocs()
	for b.Loop() {
		m.Count(text)
	}
}
