package redact

import (
	"net/url"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/internal/redact/redacttest"
)

// testKey has the characters encodings treat specially: "/" (JSON's "\/"),
// "+" and "=" (base64 and forms), "~" and "." (kept by URL escaping).
const testKey = "rk-Ab9/x+Yz=q_~.7Kp"

// TestStringEveryEncoding: the key echoed in each encoding, alone and
// nested in another, is hidden, and the text around it kept.
func TestStringEveryEncoding(t *testing.T) {
	r := New(testKey)
	for _, outer := range redacttest.Encodings {
		for _, inner := range redacttest.Encodings {
			if outer.Opaque && inner.Name != "literal" {
				continue
			}
			name := outer.Name
			if inner.Name != "literal" {
				name = outer.Name + " of " + inner.Name
			}
			t.Run(name, func(t *testing.T) {
				echoed := outer.Encode(inner.Encode(testKey))
				text := `{"error":"invalid key Bearer ` + echoed + ` (check it)"}`
				got := r.String(text)
				if strings.Contains(got, echoed) || strings.Contains(got, testKey) {
					t.Fatalf("String(%q) = %q: the key survives", text, got)
				}
				if !strings.HasPrefix(got, `{"error":"invalid key `) || !strings.HasSuffix(got, ` (check it)"}`) || !strings.Contains(got, Mask) {
					t.Fatalf("String(%q) = %q, want the text around the key kept and %s in its place", text, got, Mask)
				}
			})
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name, key, text, want string
	}{
		{"no key", testKey, `{"error":"rate limited"}`, `{"error":"rate limited"}`},
		{"no secret", "", "Bearer " + testKey, "Bearer " + testKey},
		{"twice", "sk-123456", "sk-123456 and sk-123456", Mask + " and " + Mask},
		{"overlapping", "abab", "ababab", Mask},
		{"JSON escape kept whole", "a/b", `x a\/b y`, "x " + Mask + " y"},
		{"percent escape kept whole", "a/b", "x a%2fb y", "x " + Mask + " y"},
		{"nested percent", "a/b", "x a%252Fb y", "x " + Mask + " y"},
		{"JSON of percent", "a/b", `x a\u00252Fb y`, "x " + Mask + " y"},
		{"surrogate pair decoded", "a\U0001F600b", `x a\ud83d\ude00b y`, "x " + Mask + " y"},
		{"an unfinished escape is text", "ab", `\u00 ab %4`, `\u00 ` + Mask + ` %4`},
		{"close but not the key", "sk-123456", "sk-12345 sk-1234567", "sk-12345 " + Mask + "7"},
		// The mask and its neighbours spell the key again: nothing is kept.
		{"key within the mask", "ed]x", "ed]xx", Mask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.key).String(tt.text); got != tt.want {
				t.Fatalf("String(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
	var none *Redactor
	if got := none.String(testKey); got != testKey {
		t.Fatalf("a nil Redactor: got %q, want the text unchanged", got)
	}
}

// FuzzString: a key of at least 8 printable ASCII bytes, echoed in any
// encoding above or in two or three nested (the text around it encoded
// with it, as a provider's echo is), with any text before and after the
// whole, does not survive in the result in any of those encodings.
//
//	go test ./internal/redact -fuzz FuzzString
func FuzzString(f *testing.F) {
	f.Add(testKey, `{"error":"invalid key Bearer `, `"}`, "", "", uint16(0))
	f.Add("sk-0123456789abcdef", `invalid key `, ``, `\`, "%", uint16(3|5<<5|9<<10))
	f.Add("a%2Fb&#47;c\\u00", "&#", ";", "", "", uint16(12|2<<5))
	f.Add(`q"\'/+=~.:`, `\\`, `\u0`, `\`, `&`, uint16(7|6<<5|13<<10))
	f.Fuzz(func(t *testing.T, key, before, after, outerBefore, outerAfter string, pick uint16) {
		if len(key) < 8 || strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Skip("the clients take keys of printable ASCII without spaces")
		}
		// Three encodings, innermost first; base64 and hex only innermost.
		echoed, text := key, before+key+after
		var names []string
		for i := range 3 {
			e := redacttest.Encodings[int(pick>>(5*i)&31)%len(redacttest.Encodings)]
			if e.Opaque && i > 0 {
				continue
			}
			echoed, text = e.Encode(echoed), e.Encode(text)
			names = append(names, e.Name)
		}
		text = outerBefore + text + outerAfter
		var forms []string
		if strings.Contains(text, echoed) {
			forms = append(forms, echoed)
		}
		for _, e := range redacttest.Encodings {
			forms = append(forms, e.Encode(key))
		}
		for _, form := range forms {
			if strings.Contains(Mask, form) {
				t.Skip("the key is part of the mask")
			}
		}
		got := New(key).String(text)
		for _, form := range forms {
			if strings.Contains(got, form) {
				t.Fatalf("key %q as %s: String(%q) = %q still holds %q", key, strings.Join(names, " of "), text, got, form)
			}
		}
	})
}

// BenchmarkString hides a key in 4 KiB of nested escapes of every kind, the
// most an error answer is read for.
func BenchmarkString(b *testing.B) {
	unit := `\u0025\\x41%5C&#92;&amp;` + url.QueryEscape(redacttest.JSONString(testKey)) + " "
	text := strings.Repeat(unit, 4096/len(unit))
	r := New(testKey)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if got := r.String(text); strings.Contains(got, testKey) {
			b.Fatal("the key survives")
		}
	}
}
