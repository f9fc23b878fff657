package analysis

import (
	"slices"
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
	scanTokens(s, make([]byte, 0, 32), func([]byte) bool {
		n++
		return true
	})
	return n
}

// forEachToken calls fn for each token of s in order.
func forEachToken(s string, fn func(string)) {
	scanTokens(s, make([]byte, 0, 32), func(tok []byte) bool {
		fn(string(tok))
		return true
	})
}

// asciiToken maps an ASCII byte to itself lower-cased when it belongs to a
// token (A-Z, a-z, 0-9: the only ASCII letters and numbers), else to 0.
var asciiToken = func() (t [utf8.RuneSelf]byte) {
	for c := range byte(utf8.RuneSelf) {
		if l := unicode.ToLower(rune(c)); isTokenRune(l) {
			t[c] = byte(l)
		}
	}
	return t
}()

// scanTokens calls fn with each token of s, in order, as bytes valid until
// fn returns, until fn returns false. buf is the scratch space for a token.
// ASCII is classified by table,
// anything else as a decoded code point, which is what ranging over s
// gives (an invalid byte is U+FFFD, a separator).
func scanTokens(s string, buf []byte, fn func(tok []byte) bool) {
	buf = buf[:0]
	in := false
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			i++
			if l := asciiToken[c]; l != 0 {
				buf = append(buf, l)
				in = true
				continue
			}
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			i += n
			if l := unicode.ToLower(r); isTokenRune(l) {
				buf = utf8.AppendRune(buf, l)
				in = true
				continue
			}
		}
		if in {
			if !fn(buf) {
				return
			}
			buf = buf[:0]
			in = false
		}
	}
	if in {
		fn(buf)
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

// Matcher finds which of a fixed list of tokens occur in a text, without
// building the text's token list: each token of the text is looked up as
// it is scanned, and the scan stops once every token was found. It gives
// the same answer as testing membership in TokenSet(text). A Matcher is
// for one goroutine.
type Matcher struct {
	slot  map[string]int // distinct token -> slot
	of    []int          // tokens[i] -> its slot
	found []bool         // per slot, for the text being matched
	buf   []byte
}

// NewMatcher returns a Matcher for tokens (repetitions allowed).
func NewMatcher(tokens []string) *Matcher {
	m := &Matcher{slot: make(map[string]int, len(tokens)), of: make([]int, len(tokens))}
	for i, t := range tokens {
		j, ok := m.slot[t]
		if !ok {
			j = len(m.slot)
			m.slot[t] = j
		}
		m.of[i] = j
	}
	m.found = make([]bool, len(m.slot))
	m.buf = make([]byte, 0, 32)
	return m
}

// Scan scans s; afterwards Has(i) reports whether s contains the i-th
// token NewMatcher was given.
func (m *Matcher) Scan(s string) {
	clear(m.found)
	left := len(m.found)
	if left == 0 {
		return
	}
	scanTokens(s, m.buf, func(tok []byte) bool {
		if j, ok := m.slot[string(tok)]; ok && !m.found[j] {
			m.found[j] = true
			left--
		}
		return left > 0
	})
}

// Has reports whether the text of the last Scan contains the i-th token
// NewMatcher was given.
func (m *Matcher) Has(i int) bool { return m.found[m.of[i]] }

// Counter counts the distinct tokens of texts: it allocates a string for a
// token's first occurrence in a text and nothing for a repetition. A
// Counter is for one goroutine.
type Counter struct {
	pos map[string]int // token -> index in the current text's terms
	buf []byte
	// terms and tf are the current text's, reused: Count returns copies
	// of their exact length (two allocations, not a slice grown a token
	// at a time).
	terms []string
	tf    []int32
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{pos: map[string]int{}, buf: make([]byte, 0, 32)}
}

// Count returns the distinct tokens of s in order of first occurrence
// (TokenSet(s)) and how often each occurs.
func (c *Counter) Count(s string) (terms []string, tf []int32) {
	clear(c.pos)
	c.terms, c.tf = c.terms[:0], c.tf[:0]
	scanTokens(s, c.buf, func(tok []byte) bool {
		if j, ok := c.pos[string(tok)]; ok {
			c.tf[j]++
			return true
		}
		name := string(tok)
		c.pos[name] = len(c.terms)
		c.terms = append(c.terms, name)
		c.tf = append(c.tf, 1)
		return true
	})
	if len(c.terms) == 0 {
		return nil, nil
	}
	terms, tf = slices.Clone(c.terms), slices.Clone(c.tf)
	clear(c.terms) // drop the references to this text's strings
	return terms, tf
}
