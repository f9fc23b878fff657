package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"unicode/utf8"
)

// Mask stands in the text for each part that held the secret.
const Mask = "[redacted]"

// Redactor hides one secret in texts. Its methods are safe for concurrent
// use; a nil Redactor, and one made for "", hide nothing.
type Redactor struct {
	forms []form
}

// form is one way the secret may appear once the text is decoded.
type form struct {
	b []byte
	// fold matches ASCII letters in either case (hex digits).
	fold bool
}

// New returns a Redactor for secret.
func New(secret string) *Redactor {
	r := &Redactor{}
	if secret == "" {
		return r
	}
	add := func(b []byte, fold bool) {
		if len(b) == 0 || slices.ContainsFunc(r.forms, func(f form) bool { return bytes.Equal(f.b, b) }) {
			return
		}
		r.forms = append(r.forms, form{b: b, fold: fold})
	}
	add([]byte(secret), false)
	add([]byte(hex.EncodeToString([]byte(secret))), true)
	// Base64 of the secret, starting at any byte offset of a longer
	// encoded text: with o bytes before it, the characters that hold only
	// the secret's bits are the same whatever those bytes and the ones after
	// it are. The first ceil(8o/6) characters hold bits of the bytes before,
	// and the last partial one bits of those after; padding is after the
	// core too.
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for o := range 3 {
			e := enc.EncodeToString(append(make([]byte, o), secret...))
			lo, hi := (8*o+5)/6, 8*(o+len(secret))/6
			if hi > lo {
				add([]byte(e[lo:hi]), false)
			}
		}
	}
	return r
}

// String returns s with every part that holds the secret, in any form the
// package documentation lists, replaced by [Mask].
//
// Each decoding layer is shorter than the one before (every escape is
// longer than what it decodes to), so the work is at most quadratic in the
// length of s; callers hide texts of bounded length (error answers' first
// few KiB).
func (r *Redactor) String(s string) string {
	if r == nil || len(r.forms) == 0 || s == "" {
		return s
	}
	spans := r.find(s)
	if len(spans) == 0 {
		return s
	}
	out := hide(s, spans)
	if len(r.find(out)) > 0 {
		// The mask and what surrounds it spell the secret again.
		return Mask
	}
	return out
}

// span is a range [start, end) of the original text.
type span struct{ start, end int }

// layer is a decoding of the original text: byte i of b came from the
// original bytes [start[i], end[i]).
type layer struct {
	b          []byte
	start, end []int
}

// maxDepth is how many nested encodings are decoded: four is more than a
// provider's echo holds (a key percent-encoded in a URL, in a JSON string,
// is two).
const maxDepth = 4

// find returns the spans of s that hold the secret, in every layer.
func (r *Redactor) find(s string) []span {
	l := layer{b: []byte(s), start: make([]int, len(s)), end: make([]int, len(s))}
	for i := range s {
		l.start[i], l.end[i] = i, i+1
	}
	spans := r.search(l, nil)
	return r.walk(l, 0, spans)
}

// walk decodes l once per kind of escape, searches each decoding that
// changed something, and walks on from it.
//
// One kind per layer, not all at once: a key may itself hold what reads as
// another kind's escape ("a%2Fb" inside an HTML-escaped echo), which must
// stay as it is while the HTML is decoded.
func (r *Redactor) walk(l layer, depth int, spans []span) []span {
	if depth == maxDepth {
		return spans
	}
	for i, esc := range escapes {
		if i == 1 && !bytes.Contains(l.b, []byte(`\\`)) {
			continue // the same reading as backslash's
		}
		next, changed := l.decode(esc)
		if !changed {
			continue
		}
		spans = r.search(next, spans)
		spans = r.walk(next, depth+1, spans)
	}
	return spans
}

// search appends the spans of every match of a form in l.
func (r *Redactor) search(l layer, spans []span) []span {
	var folded []byte
	for _, f := range r.forms {
		hay := l.b
		if f.fold {
			if folded == nil {
				folded = asciiLower(l.b)
			}
			hay = folded
		}
		for at := 0; ; {
			j := bytes.Index(hay[at:], f.b)
			if j < 0 {
				break
			}
			p := at + j
			spans = append(spans, span{l.start[p], l.end[p+len(f.b)-1]})
			at = p + 1
		}
	}
	return spans
}

// escape decodes one kind of escape at the start of b, if there is one: n
// is its length (0 for none), out what it stands for (always shorter).
type escape func(b []byte) (n int, out []byte)

// escapes are the kinds of escape decoded: JSON and C-style backslash
// escapes, percent escapes, HTML character references. Backslash escapes
// are also read once leaving "\\\\" as it is: a lone backslash before an
// escaped key ("\\" then "\\u0041...") pairs with the key's first
// backslash in a decoder's reading, and the key's escapes only line up
// without that pairing.
var escapes = []escape{backslash, backslashUnpaired, percent, charRef}

// decode returns the next layer: every escape of one kind in l decoded, in
// one pass. changed is false when l holds none.
func (l layer) decode(esc escape) (next layer, changed bool) {
	next = layer{b: make([]byte, 0, len(l.b)), start: make([]int, 0, len(l.b)), end: make([]int, 0, len(l.b))}
	for i := 0; i < len(l.b); {
		n, out := esc(l.b[i:])
		if n == 0 {
			next.b, next.start, next.end = append(next.b, l.b[i]), append(next.start, l.start[i]), append(next.end, l.end[i])
			i++
			continue
		}
		for _, c := range out {
			next.b, next.start, next.end = append(next.b, c), append(next.start, l.start[i]), append(next.end, l.end[i+n-1])
		}
		i += n
		changed = true
	}
	return next, changed
}

// backslash decodes JSON's escapes ("\/", "\u002b", surrogate pairs
// included) and C's "\xHH" and "\'".
func backslash(b []byte) (n int, out []byte) {
	if len(b) < 2 || b[0] != '\\' {
		return 0, nil
	}
	switch c := b[1]; c {
	case '/', '\\', '"', '\'':
		return 2, []byte{c}
	case 'b':
		return 2, []byte{'\b'}
	case 'f':
		return 2, []byte{'\f'}
	case 'n':
		return 2, []byte{'\n'}
	case 'r':
		return 2, []byte{'\r'}
	case 't':
		return 2, []byte{'\t'}
	case 'x':
		if v, ok := hexValue(b[2:], 2); ok {
			return 4, []byte{byte(v)}
		}
	case 'u':
		v, ok := hexValue(b[2:], 4)
		if !ok {
			return 0, nil
		}
		n, r := 6, rune(v)
		if 0xD800 <= v && v < 0xDC00 && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hexValue(b[8:], 4); ok && 0xDC00 <= lo && lo < 0xE000 {
				n, r = 12, 0x10000+rune(v-0xD800)<<10+rune(lo-0xDC00)
			}
		}
		return n, utf8.AppendRune(nil, r)
	}
	return 0, nil
}

// backslashUnpaired is backslash but for "\\\\", left as it is.
func backslashUnpaired(b []byte) (n int, out []byte) {
	if len(b) >= 2 && b[0] == '\\' && b[1] == '\\' {
		return 0, nil
	}
	return backslash(b)
}

// percent decodes a URL's "%HH".
func percent(b []byte) (n int, out []byte) {
	if len(b) < 3 || b[0] != '%' {
		return 0, nil
	}
	if v, ok := hexValue(b[1:], 2); ok {
		return 3, []byte{byte(v)}
	}
	return 0, nil
}

// charRef decodes an HTML character reference at the start of b: numeric
// ("&#47;", "&#x2F;") or one of the named references of printable ASCII.
func charRef(b []byte) (n int, out []byte) {
	if b[0] != '&' {
		return 0, nil
	}
	semi := bytes.IndexByte(b[:min(len(b), 12)], ';')
	if semi < 2 {
		return 0, nil
	}
	body := b[1:semi]
	if body[0] != '#' {
		if c, ok := namedRefs[string(body)]; ok {
			return semi + 1, []byte{c}
		}
		return 0, nil
	}
	digits, base := body[1:], 10
	if len(digits) > 0 && (digits[0] == 'x' || digits[0] == 'X') {
		digits, base = digits[1:], 16
	}
	if len(digits) == 0 || len(digits) > 7 {
		return 0, nil
	}
	v := 0
	for _, c := range digits {
		d, ok := digitValue(c)
		if !ok || d >= base {
			return 0, nil
		}
		v = v*base + d
	}
	if v > utf8.MaxRune {
		return 0, nil
	}
	return semi + 1, utf8.AppendRune(nil, rune(v))
}

// namedRefs are HTML's named character references for printable ASCII.
var namedRefs = map[string]byte{
	"excl": '!', "quot": '"', "QUOT": '"', "num": '#', "dollar": '$', "percnt": '%', "amp": '&', "AMP": '&',
	"apos": '\'', "lpar": '(', "rpar": ')', "ast": '*', "midast": '*', "plus": '+', "comma": ',', "period": '.',
	"sol": '/', "colon": ':', "semi": ';', "lt": '<', "LT": '<', "equals": '=', "gt": '>', "GT": '>',
	"quest": '?', "commat": '@', "lsqb": '[', "lbrack": '[', "bsol": '\\', "rsqb": ']', "rbrack": ']',
	"Hat": '^', "lowbar": '_', "UnderBar": '_', "grave": '`', "DiacriticalGrave": '`', "lcub": '{', "lbrace": '{',
	"verbar": '|', "vert": '|', "VerticalLine": '|', "rcub": '}', "rbrace": '}',
}

// hexValue reads n hex digits at the start of b.
func hexValue(b []byte, n int) (int, bool) {
	if len(b) < n {
		return 0, false
	}
	v := 0
	for _, c := range b[:n] {
		d, ok := digitValue(c)
		if !ok || d >= 16 {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

// digitValue is c's value as a hex (or decimal) digit.
func digitValue(c byte) (int, bool) {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// asciiLower is b with ASCII letters in lower case (the same length, so
// positions carry over).
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// hide replaces spans of s (merged where they overlap or touch) by Mask.
func hide(s string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var out []byte
	at := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start <= cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		out = append(append(out, s[at:cur.start]...), Mask...)
		at = cur.end
	}
	return string(append(out, s[at:]...))
}
