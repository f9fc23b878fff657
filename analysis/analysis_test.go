package analysis

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"spec example", "PMT-771 Hold", []string{"pmt", "771", "hold"}},
		{"letters and digits stay together", "tx4096", []string{"tx4096"}},
		{"empty", "", nil},
		{"punctuation only", "--- ... !!!", nil},
		{"whitespace only", " \t\r\n\u00a0\u2028", nil},
		{"precomposed Latin letters", "Ünïcödé", []string{"ünïcödé"}},
		{"combining mark (Mn) is not a letter and splits", "e\u0301te", []string{"e", "te"}},
		{"Arabic-Indic digit is a number", "\u0663", []string{"\u0663"}},
		{"Arabic-Indic digits inside a word", "رقم\u0661\u0662\u0663", []string{"رقم\u0661\u0662\u0663"}},
		{"titlecase digraph lowered", "\u01c5", []string{"\u01c6"}},
		{"dotted capital I lowers to plain i (simple mapping)", "\u0130stanbul", []string{"istanbul"}},
		{"Kelvin sign lowers to k", "\u212a", []string{"k"}},
		{"final sigma is not special", "ΣΑΣ", []string{"σασ"}},
		{"CJK and katakana with prolonged sound mark (Lm)", "東京タワー 行く", []string{"東京タワー", "行く"}},
		{"Roman numeral (Nl) lowered", "Ⅻ", []string{"ⅻ"}},
		{"vulgar fraction and superscript (No)", "½ x²", []string{"½", "x²"}},
		{"apostrophe splits", "don't", []string{"don", "t"}},
		{"underscore (Pc) splits", "snake_case", []string{"snake", "case"}},
		{"emoji splits", "ok🙂go", []string{"ok", "go"}},
		{"zero-width joiner (Cf) splits", "a\u200db", []string{"a", "b"}},
		{"no-break space and line separator split", "a\u00a0b\u2028c", []string{"a", "b", "c"}},
		{"repetition kept", "Hold hold HOLD", []string{"hold", "hold", "hold"}},
		{"invalid UTF-8 byte splits", "ab\xffcd", []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokenize(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if n := CountTokens(tt.in); n != len(tt.want) {
				t.Errorf("CountTokens(%q) = %d, want %d", tt.in, n, len(tt.want))
			}
			if h := HasToken(tt.in); h != (len(tt.want) > 0) {
				t.Errorf("HasToken(%q) = %v, want %v", tt.in, h, len(tt.want) > 0)
			}
		})
	}
}

func TestTokenSet(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"first occurrence order", "b a B c A", []string{"b", "a", "c"}},
		{"case folded before dedup", "Hold HOLD hold", []string{"hold"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TokenSet(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("TokenSet(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"one", "a", 1},
		{"four", "abcd", 1},
		{"five", "abcde", 2},
		{"code points not bytes", "éééé", 1},
		{"code points not UTF-16 units", "🙂🙂🙂🙂🙂", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateTokens(tt.in); got != tt.want {
				t.Errorf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestIsSpace(t *testing.T) {
	tests := []struct {
		name string
		r    rune
		want bool
	}{
		{"space", ' ', true},
		{"tab", '\t', true},
		{"carriage return", '\r', true},
		{"no-break space", '\u00a0', true},
		{"next line", '\u0085', true},
		{"line separator", '\u2028', true},
		{"ideographic space", '\u3000', true},
		{"zero-width space is not whitespace", '\u200b', false},
		{"BOM is not whitespace", '\ufeff', false},
		{"letter", 'a', false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsSpace(tt.r); got != tt.want {
				t.Errorf("IsSpace(%U) = %v, want %v", tt.r, got, tt.want)
			}
		})
	}
}

// TestTokenizerVersion pins the Unicode tables the statistics were built with.
func TestTokenizerVersion(t *testing.T) {
	want := "cordon-tok-1/unicode-" + unicode.Version
	if TokenizerVersion != want {
		t.Errorf("TokenizerVersion = %q, want %q", TokenizerVersion, want)
	}
	if !strings.HasSuffix(TokenizerVersion, "15.0.0") {
		t.Errorf("TokenizerVersion = %q, want Unicode 15.0.0 tables (Go 1.26, SPEC section 1)", TokenizerVersion)
	}
}

// TestLowerIsIdempotentAndKeepsClass checks, over every code point, the two
// facts FuzzTokenize relies on: lower-casing a lower-cased code point changes
// nothing, and lower-casing never moves a code point in or out of the token
// classes. If a future Unicode table breaks either, tokens stop being a fixed
// point of Tokenize and this test says so first.
func TestLowerIsIdempotentAndKeepsClass(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		l := unicode.ToLower(r)
		if ll := unicode.ToLower(l); ll != l {
			t.Fatalf("ToLower(ToLower(%U)) = %U, want %U", r, ll, l)
		}
		if got, want := isTokenRune(l), unicode.IsLetter(r) || unicode.IsNumber(r); got != want {
			t.Fatalf("isTokenRune(ToLower(%U)) = %v, want %v", r, got, want)
		}
	}
}

// refTokenize is an independent statement of SPEC section 1: lower-case every
// code point, then split at everything that is not a letter or a number.
func refTokenize(s string) []string {
	rs := []rune(s)
	for i, r := range rs {
		rs[i] = unicode.ToLower(r)
	}
	return strings.FieldsFunc(string(rs), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

func checkTokenize(t *testing.T, s string) {
	t.Helper()
	toks := Tokenize(s)
	if want := refTokenize(s); !slices.Equal(toks, want) {
		t.Fatalf("Tokenize(%q) = %q, want %q", s, toks, want)
	}
	for _, tok := range toks {
		if tok == "" {
			t.Fatalf("Tokenize(%q) has an empty token: %q", s, toks)
		}
		for _, r := range tok {
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
				t.Fatalf("Tokenize(%q): token %q has %U, want letters and numbers only", s, tok, r)
			}
		}
		if l := strings.ToLower(tok); l != tok {
			t.Fatalf("Tokenize(%q): token %q lower-cases to %q, want a fixed point", s, tok, l)
		}
	}
	if got := Tokenize(strings.Join(toks, " ")); !slices.Equal(got, toks) {
		t.Fatalf("Tokenize(join(Tokenize(%q))) = %q, want %q", s, got, toks)
	}
	if got := CountTokens(s); got != len(toks) {
		t.Fatalf("CountTokens(%q) = %d, want %d", s, got, len(toks))
	}
	if got := HasToken(s); got != (len(toks) > 0) {
		t.Fatalf("HasToken(%q) = %v, want %v", s, got, len(toks) > 0)
	}
	set := TokenSet(s)
	var want []string
	for _, tok := range toks {
		if !slices.Contains(want, tok) {
			want = append(want, tok)
		}
	}
	if !slices.Equal(set, want) {
		t.Fatalf("TokenSet(%q) = %q, want %q", s, set, want)
	}
	checkMatcher(t, s, toks)
	checkCounter(t, s, toks)
}

// checkCounter checks Counter.Count against the token list, on a fresh
// Counter and on one that counted other texts (and s) before.
func checkCounter(t *testing.T, s string, toks []string) {
	t.Helper()
	var wantTF []int32
	want := TokenSet(s)
	for _, term := range want {
		wantTF = append(wantTF, int32(len(slices.DeleteFunc(slices.Clone(toks), func(x string) bool { return x != term }))))
	}
	used := NewCounter()
	used.Count("payment hold PMT 771 " + s)
	used.Count("")
	for _, c := range []*Counter{NewCounter(), used} {
		terms, tf := c.Count(s)
		if !slices.Equal(terms, want) || !slices.Equal(tf, wantTF) {
			t.Fatalf("Count(%q) = %q %v, want %q %v", s, terms, tf, want, wantTF)
		}
	}
}

// checkMatcher checks a Matcher against membership in toks (s's tokens),
// for every other token of s, with repetitions, tokens s does not hold, a
// prefix of one it holds and the empty token, scanning s, then a text
// without tokens, then s again.
func checkMatcher(t *testing.T, s string, toks []string) {
	t.Helper()
	var query []string
	for i, tok := range toks {
		if i%2 == 0 {
			query = append(query, tok, tok+"x")
		}
		if len(tok) > 1 && i%3 == 0 {
			query = append(query, tok[:len(tok)-1])
		}
	}
	query = append(query, "zz9", "")
	if len(toks) > 0 {
		query = append(query, toks[len(toks)-1], toks[0])
	}
	m := NewMatcher(query)
	for round, text := range []string{s, " -- ", s} {
		m.Scan(text)
		for i, q := range query {
			want := round != 1 && slices.Contains(toks, q)
			if got := m.Has(i); got != want {
				t.Fatalf("Matcher(%q).Scan(%q).Has(%d: %q) = %v, want %v", query, text, i, q, got, want)
			}
		}
	}
}

func TestMatcher(t *testing.T) {
	for _, s := range []string{
		"", "PMT-771 Hold on PMT-771", "payment hold, payment released", "Ünïcödé ÜNÏCÖDÉ", "a b a b c",
		strings.Repeat("wire transfer ", 100) + "sanctions",
	} {
		checkTokenize(t, s)
	}
	m := NewMatcher([]string{"hold", "pmt", "hold", "771", "absent"})
	m.Scan("PMT-771 is on HOLD.")
	var got []bool
	for i := range 5 {
		got = append(got, m.Has(i))
	}
	if want := []bool{true, true, true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("Has = %v, want %v", got, want)
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", "PMT-771 Hold", "tx4096", "Ünïcödé", "e\u0301te", "\u0663", "\u01c5", "\u0130",
		"東京タワー", "a\u00a0b\u2028c", "ab\xffcd", "\xed\xa0\x80", "ΣΑΣ", "½x²Ⅻ", "🙂", "a_b-c.d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkTokenize(t, s)
	})
}

func BenchmarkMatcher(b *testing.B) {
	text := strings.Repeat("Payment PMT-771 is on hold pending sanctions review; release requires two approvals. ", 50)
	m := NewMatcher([]string{"payment", "hold", "wire", "771"})
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m.Scan(text)
	}
}

func BenchmarkTokenize(b *testing.B) {
	text := strings.Repeat("Payment PMT-771 is on hold pending sanctions review; release requires two approvals. ", 50)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Tokenize(text)
	}
}
