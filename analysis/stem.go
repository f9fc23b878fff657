package analysis

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/kljensen/snowball/english"
)

// Analyzers: how a tenant's chunks are indexed beyond their tokens.
const (
	// AnalyzerExact indexes each token as it is (SPEC section 1): the
	// terms of a chunk are its distinct tokens.
	AnalyzerExact = "exact"
	// AnalyzerEnglish indexes each token as it is and, for a token of
	// ASCII letters only, its English stem as a second term: StemPrefix
	// followed by the Snowball English (Porter2) stem. A chunk's stem
	// term counts every token of the chunk with that stem; the chunk's
	// length stays its number of tokens.
	AnalyzerEnglish = "english"
)

// StemPrefix starts every stem term. It is not a token rune, so no token
// is ever a stem term.
const StemPrefix = "~"

// StemmerVersion names the stemmer's rules: github.com/kljensen/snowball's
// English stemmer at the version go.mod pins. Bump it with that module.
const StemmerVersion = "porter2-snowball-0.10.0"

// Version is what a tenant records as its tokenizer version
// (cordon.tenants.tokenizer_version) under analyzer, with or without field
// terms: TokenizerVersion, then "/english-" and StemmerVersion for the
// English analyzer, then "/" and FieldsVersion when the tenant indexes
// field terms ([AppendFieldTerms]). A binary serves only the versions it
// produces, so one without the English analyzer, another stemmer or other
// field rules refuses such a tenant instead of indexing it differently.
func Version(analyzer string, fields bool) string {
	if !fields {
		return version(analyzer, "")
	}
	return version(analyzer, FieldsVersion)
}

// RulesVersion is the version of a tenant under analyzer indexed with
// field terms under the field rules named rules: "" for the current
// rules ([FieldsVersion]), else [FieldsPathVersion] or
// [FieldsSectionVersion], which this binary still serves and writes as a
// tenant was indexed.
func RulesVersion(analyzer, rules string) string {
	if rules == "" {
		rules = FieldsVersion
	}
	return version(analyzer, rules)
}

// olderRules are the field rules this binary serves besides FieldsVersion.
var olderRules = []string{FieldsPathVersion, FieldsSectionVersion}

// ValidRules reports whether rules names field rules this binary serves:
// "" (the current ones) or one of the older ones.
func ValidRules(rules string) bool { return rules == "" || slices.Contains(olderRules, rules) }

func version(analyzer, fields string) string {
	v := TokenizerVersion
	if analyzer == AnalyzerEnglish {
		v += "/english-" + StemmerVersion
	}
	if fields != "" {
		v += "/" + fields
	}
	return v
}

// AnalyzerOf is the analyzer of a recorded tokenizer version, whether it
// indexes field terms and under which field rules ("" for the current
// ones, else [FieldsPathVersion] or [FieldsSectionVersion]); ok is false
// when this binary does not produce that version.
func AnalyzerOf(v string) (analyzer string, fields bool, rules string, ok bool) {
	for _, a := range []string{AnalyzerExact, AnalyzerEnglish} {
		switch v {
		case Version(a, false):
			return a, false, "", true
		case Version(a, true):
			return a, true, "", true
		}
		for _, r := range olderRules {
			if v == version(a, r) {
				return a, true, r, true
			}
		}
	}
	return "", false, "", false
}

// Versions lists every tokenizer version this binary serves.
func Versions() []string {
	var out []string
	for _, a := range []string{AnalyzerExact, AnalyzerEnglish} {
		out = append(out, Version(a, false), Version(a, true))
		for _, r := range olderRules {
			out = append(out, version(a, r))
		}
	}
	return out
}

// ValidateAnalyzer checks an analyzer's name.
func ValidateAnalyzer(a string) error {
	if a != AnalyzerExact && a != AnalyzerEnglish {
		return fmt.Errorf("analyzer %q: want %q or %q", a, AnalyzerExact, AnalyzerEnglish)
	}
	return nil
}

// IsStemTerm reports whether term is a stem term.
func IsStemTerm(term string) bool { return len(term) > 0 && term[0] == StemPrefix[0] }

// Stem returns the stem term of tok, a token: StemPrefix and the Snowball
// English (Porter2) stem of tok, stop words stemmed like any word, when
// tok is made of the ASCII letters a-z only; ok is false for any other
// token (one with a digit or a letter outside a-z), which has no stem
// term.
func Stem(tok string) (term string, ok bool) {
	if !stemmable(tok) {
		return "", false
	}
	sh := &stemShards[maphash.String(stemSeed, tok)%stemShardCount]
	sh.mu.RLock()
	term, ok = sh.m[tok]
	sh.mu.RUnlock()
	if ok {
		return term, true
	}
	term = StemPrefix + english.Stem(tok, true)
	sh.mu.Lock()
	if len(sh.m) >= stemShardMax {
		clear(sh.m)
	}
	if sh.m == nil {
		sh.m = make(map[string]string)
	}
	// The key is a copy: a token may be a slice of a whole document.
	sh.m[strings.Clone(tok)] = term
	sh.mu.Unlock()
	return term, true
}

// The process's stems, remembered: Stem is a pure function of the token
// and the stemmer costs microseconds a word, while prose repeats its
// words. The cache is split into shards, each with its own lock, and a
// shard holding stemShardMax tokens is emptied (at most about 256k tokens
// in all, some tens of MB).
const stemShardCount = 64

var (
	stemShardMax = 4096 // a variable for the tests
	stemSeed     = maphash.MakeSeed()
	stemShards   [stemShardCount]struct {
		mu sync.RWMutex
		m  map[string]string
	}
)

// stemmable reports whether tok is non-empty and made of a-z only.
func stemmable(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// Stemmer gives stem terms, through the process's cache of them ([Stem]);
// a function taking a *Stemmer adds no stem term when it is nil. It keeps
// no memory of its own: a memo per Stemmer, beside the process's cache,
// cost more to fill than it saved (BenchmarkColdLoad, BenchmarkPrepareAnalyzers).
type Stemmer struct{}

// NewStemmer returns a Stemmer.
func NewStemmer() *Stemmer { return &Stemmer{} }

// Stem is [Stem].
func (s *Stemmer) Stem(tok string) (string, bool) { return Stem(tok) }

// AppendStems returns terms and tf, a text's distinct tokens in order of
// first occurrence with their counts, followed by their stem terms: one for
// each distinct stem of the tokens that have one, in order of the first
// token with that stem, counting every token with it. The tokens' entries
// are unchanged; with no stemmable token the slices are returned as they
// are.
func (s *Stemmer) AppendStems(terms []string, tf []int32) ([]string, []int32) {
	n := len(terms)
	var at map[string]int
	for j := range n {
		st, ok := s.Stem(terms[j])
		if !ok {
			continue
		}
		if at == nil {
			at = make(map[string]int, n)
		}
		if k, seen := at[st]; seen {
			tf[k] += tf[j]
			continue
		}
		at[st] = len(terms)
		terms = append(terms, st)
		tf = append(tf, tf[j])
	}
	return terms, tf
}

// AppendStemIDs is [Stemmer.AppendStems] over ids in v, as CountIDs
// gives them: the stem terms are numbered in v too, and each token's stem
// is computed once per Vocabulary.
func (v *Vocabulary) AppendStemIDs(ids, tf []int32) ([]int32, []int32) {
	n := len(ids)
	for j := range n {
		st := v.stemID(ids[j])
		if st < 0 {
			continue
		}
		if v.tf[st] == 0 {
			ids = append(ids, st)
		}
		v.tf[st] += tf[j]
	}
	if len(ids) == n {
		return ids, tf
	}
	for _, id := range ids[n:] {
		tf = append(tf, v.tf[id])
		v.tf[id] = 0
	}
	return ids, tf
}

// stemID returns the id of the stem term of token id, or -1 when it has
// none, computing it once per id.
func (v *Vocabulary) stemID(id int32) int32 {
	for int(id) >= len(v.stems) {
		v.stems = append(v.stems, 0)
	}
	switch s := v.stems[id]; {
	case s > 0:
		return s - 1
	case s < 0:
		return -1
	}
	st, ok := Stem(v.terms[id])
	if !ok {
		v.stems[id] = -1
		return -1
	}
	sid := v.id([]byte(st))
	v.stems[id] = sid + 1
	return sid
}

// StemMatcher finds which of a fixed list of tokens occur in a text in any
// form: whether the text holds a token with the same stem term. A token
// without a stem term (see [Stem]) is never found by it. A token of the
// text is stemmed only when its first byte is the first byte of one of
// the list's stemmable tokens: Porter2 never changes a word's first letter,
// so no other token can share a stem with them. A StemMatcher is for one
// goroutine.
type StemMatcher struct {
	slot    map[string]int // stem term -> slot
	of      []int          // tokens[i] -> its slot, -1 without a stem
	found   []bool         // per slot, for the text being matched
	first   [256]bool
	stemmer *Stemmer
	buf     []byte
}

// NewStemMatcher returns a StemMatcher for tokens (repetitions allowed).
func NewStemMatcher(tokens []string) *StemMatcher {
	m := &StemMatcher{slot: make(map[string]int, len(tokens)), of: make([]int, len(tokens)), stemmer: NewStemmer(), buf: make([]byte, 0, 32)}
	for i, t := range tokens {
		st, ok := m.stemmer.Stem(t)
		if !ok {
			m.of[i] = -1
			continue
		}
		j, seen := m.slot[st]
		if !seen {
			j = len(m.slot)
			m.slot[st] = j
		}
		m.of[i] = j
		m.first[t[0]] = true
	}
	m.found = make([]bool, len(m.slot))
	return m
}

// Scan scans s; afterwards Has(i) reports whether s holds a token with the
// stem term of the i-th token NewStemMatcher was given.
func (m *StemMatcher) Scan(s string) {
	clear(m.found)
	if len(m.found) == 0 {
		return
	}
	m.scan(s, len(m.found))
}

// scan marks the slots of the stem terms s holds, until left more are
// found.
func (m *StemMatcher) scan(s string, left int) {
	scanTokens(s, m.buf, func(tok []byte) bool {
		if !m.first[tok[0]] {
			return true
		}
		st, ok := m.stemmer.Stem(string(tok))
		if !ok {
			return true
		}
		if j, ok := m.slot[st]; ok && !m.found[j] {
			m.found[j] = true
			left--
		}
		return left > 0
	})
}

// ScanHeld is Scan of a text known to hold the i-th token NewStemMatcher
// was given, as written, wherever held(i) (a [Matcher]'s Has over the same
// tokens and text): such a token's stem term is found without a look, and
// s is scanned only while some other stem term is still missing. Has
// answers as after Scan(s).
func (m *StemMatcher) ScanHeld(s string, held func(i int) bool) {
	clear(m.found)
	left := len(m.found)
	for i, j := range m.of {
		if j >= 0 && !m.found[j] && held(i) {
			m.found[j] = true
			left--
		}
	}
	if left == 0 {
		return
	}
	m.scan(s, left)
}

// Has reports whether the text of the last Scan holds a token with the
// stem term of the i-th token NewStemMatcher was given.
func (m *StemMatcher) Has(i int) bool { return m.of[i] >= 0 && m.found[m.of[i]] }
