package retrieval_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

func TestStop(t *testing.T) {
	tests := []struct {
		name  string
		query string
		list  retrieval.StopWords
		want  []string
	}{
		{"off", "the hold of the payment", "", []string{"the", "hold", "of", "the", "payment"}},
		{"none", "the hold of the payment", retrieval.StopNone, []string{"the", "hold", "of", "the", "payment"}},
		{"english", "the hold of the payment", retrieval.StopEnglish, []string{"hold", "payment"}},
		{"repetition kept", "hold the hold", retrieval.StopEnglish, []string{"hold", "hold"}},
		{"case folds in the tokenizer", "THE Hold, Of The PAYMENT", retrieval.StopEnglish, []string{"hold", "payment"}},
		{"tokens, not words", "it's a no-op", retrieval.StopEnglish, []string{"s", "op"}},
		{"a word holding a stop word stays", "into-the theory", retrieval.StopEnglish, []string{"theory"}},
		{"only stop words: all kept", "To be or not to be", retrieval.StopEnglish, []string{"to", "be", "or", "not", "to", "be"}},
		{"empty", "", retrieval.StopEnglish, nil},
		{"no stop word", "wire cut-off", retrieval.StopEnglish, []string{"wire", "cut", "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retrieval.Stop(analysis.Tokenize(tt.query), tt.list); !slices.Equal(got, tt.want) {
				t.Fatalf("Stop(%q, %q) = %q, want %q", tt.query, tt.list, got, tt.want)
			}
		})
	}
}

// TestEnglishStopWords: the list is lower-case ASCII tokens, sorted, with
// no repetition, so each word is one token the tokenizer can give.
func TestEnglishStopWords(t *testing.T) {
	w := retrieval.EnglishStopWords
	if len(w) != 33 || !slices.IsSorted(w) || len(slices.Compact(slices.Clone(w))) != len(w) {
		t.Fatalf("EnglishStopWords %q: want 33 sorted distinct words", w)
	}
	for _, s := range w {
		if got := analysis.Tokenize(s); len(got) != 1 || got[0] != s || strings.ToLower(s) != s {
			t.Fatalf("stop word %q tokenizes to %q", s, got)
		}
	}
}

func TestStopWordsValidate(t *testing.T) {
	for _, s := range []string{"", "none", "english"} {
		p := retrieval.DefaultPolicy()
		p.StopWords = retrieval.StopWords(s)
		if err := p.Validate(); err != nil {
			t.Errorf("stop_words %q: %v", s, err)
		}
	}
	for _, s := range []string{"English", "french", " english", "snowball"} {
		p := retrieval.DefaultPolicy()
		p.StopWords = retrieval.StopWords(s)
		err := p.Validate()
		if !errors.Is(err, retrieval.ErrInvalidPolicy) || !strings.Contains(err.Error(), "stop_words") {
			t.Errorf("stop_words %q: got %v, want an invalid policy naming stop_words", s, err)
		}
	}
}

// TestStopWordsRanking: with the english list a query ranks lexically as
// the query without its stop words does, bit for bit, while the dense side
// keeps the full query; a query of only stop words ranks by them all; off
// ("" and "none") is the seed's ranking.
func TestStopWordsRanking(t *testing.T) {
	st := newStore(t,
		doc("w", "a", cordontype.Public, 100, "the hold of the payment is on the desk"),
		doc("w", "b", cordontype.Public, 100, "payment release for wires"),
		doc("w", "c", cordontype.Public, 100, "the the of the to be"),
	)
	p := principal("w", cordontype.Public)
	run := func(text string, stop retrieval.StopWords, rerank bool) retrieval.Result {
		return retrieve(t, st, query(p, text, func(pol *retrieval.Policy) {
			pol.StopWords, pol.EnableRerank, pol.Limit = stop, rerank, 10
		}))
	}
	key := func(r retrieval.Result) []string {
		var out []string
		for _, c := range r.Chunks {
			bm, cos := "-", "-"
			if c.BM25 != nil {
				bm = strconv.FormatFloat(*c.BM25, 'g', -1, 64)
			}
			if c.Cosine != nil {
				cos = strconv.FormatFloat(*c.Cosine, 'g', -1, 64)
			}
			out = append(out, c.Chunk.DocID+" "+bm+" "+cos)
		}
		return out
	}
	full, reduced := "the payment of the wires", "payment wires"
	on, bare := run(full, retrieval.StopEnglish, false), run(reduced, "", false)
	for i, c := range on.Chunks {
		var want *float64
		for _, b := range bare.Chunks {
			if b.Chunk.ChunkID == c.Chunk.ChunkID {
				want = b.BM25
			}
		}
		if (c.BM25 == nil) != (want == nil) || c.BM25 != nil && *c.BM25 != *want {
			t.Fatalf("chunk %d (%s): bm25 %v, want the reduced query's %v", i, c.Chunk.DocID, c.BM25, want)
		}
	}
	off := run(full, "", false)
	if got, want := key(run(full, retrieval.StopNone, false)), key(off); !slices.Equal(got, want) {
		t.Fatalf("none %q, want off's %q", got, want)
	}
	// The dense side embeds the full query: the cosines are off's.
	cos := func(r retrieval.Result) map[string]float64 {
		m := map[string]float64{}
		for _, c := range r.Chunks {
			if c.Cosine != nil {
				m[c.Chunk.ChunkID] = *c.Cosine
			}
		}
		return m
	}
	if got, want := cos(on), cos(off); len(got) != len(want) || func() bool {
		for k, v := range want {
			if got[k] != v {
				return true
			}
		}
		return false
	}() {
		t.Fatalf("cosines with the list %v, want off's %v", got, want)
	}
	// c holds only stop words: with the list the lexical side cannot find
	// it for the full query, but a query of only stop words keeps them.
	for _, c := range on.Chunks {
		if c.Chunk.DocID == "c" && c.BM25 != nil {
			t.Fatalf("c ranked lexically (%v) for %q with the list", *c.BM25, full)
		}
	}
	only := run("the of", retrieval.StopEnglish, false)
	if got, want := key(only), key(run("the of", "", false)); !slices.Equal(got, want) {
		t.Fatalf("only stop words: %q, want off's %q", got, want)
	}
	// The overlap reranker reads the reduced terms: a holds one of two.
	rr := run("the hold of the wires", retrieval.StopEnglish, true)
	for _, c := range rr.Chunks {
		if c.Chunk.DocID == "a" && (c.Rerank == nil || *c.Rerank != 0.5) {
			t.Fatalf("a's rerank %v, want 0.5 (hold of hold, wires)", c.Rerank)
		}
	}
}

// TestStopWordsExpansion: query expansion never adds a listed word when the
// list is on, and may without it.
func TestStopWordsExpansion(t *testing.T) {
	st := newStore(t,
		doc("w", "a", cordontype.Public, 100, "The officer reviews the hold and the payment, then the release."),
		doc("w", "b", cordontype.Public, 100, "The hold on the payment is released by the officer."),
		doc("w", "c", cordontype.Public, 100, "Branch opening hours on weekends."),
	)
	p := principal("w", cordontype.Public)
	run := func(stop retrieval.StopWords) []string {
		return retrieve(t, st, query(p, "officer", func(pol *retrieval.Policy) {
			pol.StopWords, pol.PRFDocs, pol.PRFTerms = stop, 2, 5
		})).Expansion
	}
	if off := run(""); !slices.Contains(off, "the") {
		t.Fatalf("expansion without the list %q: want it to hold \"the\" (the test's premise)", off)
	}
	on := run(retrieval.StopEnglish)
	if len(on) == 0 {
		t.Fatal("no expansion with the list")
	}
	for _, w := range on {
		if slices.Contains(retrieval.EnglishStopWords, w) {
			t.Fatalf("expansion with the list %q adds the listed %q", on, w)
		}
	}
}
