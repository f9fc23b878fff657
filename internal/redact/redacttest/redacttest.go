// Package redacttest lists the encodings a server may echo a secret in, for
// tests that check a secret does not reach an error or a log in any of them.
package redacttest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strconv"
	"strings"
)

// Encoding is one way a server may echo a secret.
type Encoding struct {
	Name string
	// Opaque encodings (base64, hex) are recognised only when applied to
	// the secret itself (or to text around it): an escape applied to their
	// output keeps them recognisable, but not the other way round.
	Opaque bool
	Encode func(string) string
}

// Encodings are the encodings package redact recognises, among them JSON's
// escapes, percent-encoding, quoting, HTML, base64 and hex.
var Encodings = []Encoding{
	{"literal", false, func(s string) string { return s }},
	{"JSON string", false, JSONString},
	{"JSON with \\/", false, func(s string) string { return strings.ReplaceAll(JSONString(s), "/", `\/`) }},
	{"JSON \\u every byte", false, func(s string) string { return eachByte(s, `\u%04x`) }},
	{"JSON \\U every byte", false, func(s string) string { return eachByte(s, `\u%04X`) }},
	{"JSON with + as \\u002b", false, func(s string) string { return strings.ReplaceAll(JSONString(s), "+", `\u002b`) }},
	{"Go quoted", false, func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }},
	{"\\x every byte", false, func(s string) string { return eachByte(s, `\x%02x`) }},
	{"query escaped", false, url.QueryEscape},
	{"path escaped", false, url.PathEscape},
	{"percent every byte", false, func(s string) string { return eachByte(s, "%%%02X") }},
	{"percent every byte, lower case", false, func(s string) string { return eachByte(s, "%%%02x") }},
	{"HTML escaped", false, html.EscapeString},
	{"HTML decimal", false, func(s string) string { return eachByte(s, "&#%d;") }},
	{"HTML hex", false, func(s string) string { return eachByte(s, "&#x%X;") }},
	{"HTML named", false, func(s string) string {
		return strings.NewReplacer("/", "&sol;", "+", "&plus;", "=", "&equals;", ".", "&period;").Replace(html.EscapeString(s))
	}},
	{"base64", true, func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
	{"base64 URL, unpadded", true, func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }},
	{"base64 of the header", true, func(s string) string { return base64.StdEncoding.EncodeToString([]byte("Bearer " + s)) }},
	{"base64 of Basic credentials", true, func(s string) string { return base64.StdEncoding.EncodeToString([]byte("api:" + s)) }},
	{"base64 of the key and more", true, func(s string) string { return base64.StdEncoding.EncodeToString([]byte("k=" + s + "&x=1")) }},
	{"hex", true, func(s string) string { return hex.EncodeToString([]byte(s)) }},
	{"HEX", true, func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }},
}

// JSONString is s as the inside of a JSON string.
func JSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func eachByte(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// Leak returns the first of secret's encodings (its name and text) that s
// holds; ok is false when s holds none. The base64 forms of the secret
// inside longer texts are checked as the secret's own base64, so a test
// names a leak only when that much is there.
func Leak(s, secret string) (name, form string, ok bool) {
	for _, e := range Encodings {
		form := e.Encode(secret)
		if strings.Contains(s, form) {
			return e.Name, form, true
		}
	}
	return "", "", false
}
