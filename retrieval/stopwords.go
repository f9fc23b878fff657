package retrieval

import "slices"

// StopWords names a query stop list, the policy's stop_words (SPEC
// section 5, "Query stop list").
type StopWords string

const (
	// StopNone (also the empty string, the default) drops no query term.
	StopNone StopWords = "none"
	// StopEnglish drops the words of [EnglishStopWords].
	StopEnglish StopWords = "english"
)

// EnglishStopWords is the "english" stop list: the 33 English function
// words of Lucene's EnglishAnalyzer (ENGLISH_STOP_WORDS_SET), the classic
// small list, lower-case ASCII as the tokenizer gives them. It is fixed:
// a change changes rankings and is a change of docs/spec.md.
var EnglishStopWords = []string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
	"no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
	"they", "this", "to", "was", "will", "with",
}

// english is EnglishStopWords as a set.
var english = func() map[string]bool {
	m := make(map[string]bool, len(EnglishStopWords))
	for _, w := range EnglishStopWords {
		m[w] = true
	}
	return m
}()

// On reports whether s drops any word: "" and "none" do not.
func (s StopWords) On() bool { return s != "" && s != StopNone }

// effective is s with "" and "none" both "none".
func (s StopWords) effective() StopWords {
	if !s.On() {
		return StopNone
	}
	return s
}

// words returns the words of list s (nil when off).
func (s StopWords) words() []string {
	if s == StopEnglish {
		return EnglishStopWords
	}
	return nil
}

// valid reports whether s names a list (or none).
func (s StopWords) valid() bool { return s == "" || s == StopNone || s == StopEnglish }

// Stop returns tokens without the words of list s, in order, repetition
// kept, unless every token is in it: then (and when s is off, or names no
// list) it returns tokens itself, so a query of only stop words still
// ranks by them and an off list changes nothing. tokens are the query's
// tokens as [analysis.Tokenize] gives them (lower-cased), compared
// exactly.
func Stop(tokens []string, s StopWords) []string {
	if s != StopEnglish {
		return tokens
	}
	kept := slices.DeleteFunc(slices.Clone(tokens), func(t string) bool { return english[t] })
	if len(kept) == 0 || len(kept) == len(tokens) {
		return tokens
	}
	return kept
}
