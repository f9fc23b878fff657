package analysis

import (
	"unicode"
	"unicode/utf8"
)

// TokenizerVersion identifies the tokenizer's rules and Unicode tables. Bump the
// prefix when the rules change; the suffix follows Go's tables.
var TokenizerVersion = "cordon-tok-1/unicode-" + unicode.Version

// IsSpace is the definition of whitespace used everywhere in Cordon.
func IsSpace(r rune) bool { return unicode.IsSpace(r) }

// isTokenRune reports whether r, already lower-cased, belongs to a token:
// a letter (L*) or a number (N*).
func isTokenRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// Tokenize splits s into tokens: each code point is lower-cased with its simple
// mapping, then maximal runs of letters and numbers are kept, in order, with
// repetition. "PMT-771 Hold" gives [pmt 771 hold].
func Tokenize(s string) []string {
	var out []string
	forEachToken(s, func(tok string) { out = append(out, tok) })
	return out
}

// HasToken reports whether s contains at least one token, without allocating
// the token list.
func HasToken(s string) bool {
	for _, r := range s {
		if isTokenRune(unicode.ToLower(r)) {
			return true
		}
	}
	return false
}

// CountTokens returns len(Tokenize(s)) without building the slice.
func CountTokens(s string) int {
	n := 0
	in := false
	for _, r := range s {
		if isTokenRune(unicode.ToLower(r)) {
			if !in {
				n++
			}
			in = true
		} else {
			in = false
		}
	}
	return n
}

// forEachToken calls fn for each token of s in order.
func forEachToken(s string, fn func(string)) {
	buf := make([]byte, 0, 32)
	in := false
	for _, r := range s {
		l := unicode.ToLower(r)
		if isTokenRune(l) {
			buf = utf8.AppendRune(buf, l)
			in = true
			continue
		}
		if in {
			fn(string(buf))
			buf = buf[:0]
			in = false
		}
	}
	if in {
		fn(string(buf))
	}
}

// TokenSet returns the distinct tokens of s in order of first occurrence.
func TokenSet(s string) []string {
	seen := make(map[string]struct{})
	var out []string
	forEachToken(s, func(tok string) {
		if _, ok := seen[tok]; ok {
			return
		}
		seen[tok] = struct{}{}
		out = append(out, tok)
	})
	return out
}

// EstimateTokens is the context-budget estimate of SPEC section 7:
// ceil(code points / 4).
func EstimateTokens(s string) int {
	n := utf8.RuneCountInString(s)
	return (n + 3) / 4
}
