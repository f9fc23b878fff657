package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
	"github.com/cordon-rag/cordon/retrieval"
)

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"ok", `{"query": "hold", "now_tick": 5, "policy": {"limit": 2}}`, ""},
		{"whitespace around", " \n{\"query\": \"x\"}\n ", ""},
		{"unknown field", `{"query": "x", "tenant": "retail"}`, `unknown field "tenant"`},
		{"unknown policy field", `{"query": "x", "policy": {"limits": 3}}`, `unknown field "policy.limits"`},
		{"unknown nested policy field", `{"query": "x", "policy": {"rrf_weights": {"dense": 1}}}`, `unknown field "policy.rrf_weights.dense"`},
		{"case-variant key", `{"QUERY": "x"}`, "unknown field"},
		{"kelvin sign folding", `{"query": "x", "policy": {"top_\u212a": 1}}`, "unknown field"},
		{"duplicate key", `{"query": "x", "query": "y"}`, "duplicate key"},
		{"nested duplicate", `{"policy": {"limit": 1, "limit": 1}}`, `duplicate key "policy.limit"`},
		{"trailing object", `{"query": "x"}{"query": "y"}`, "trailing data"},
		{"trailing garbage", `{"query": "x"} x`, ""},
		{"invalid UTF-8", "{\"query\": \"\xc3\x28\"}", "UTF-8"},
		{"lone low surrogate", `{"query": "\udc00"}`, "UTF-8"},
		{"surrogate pair ok", `{"query": "\ud83d\ude00"}`, ""},
		{"escaped backslash then u", `{"query": "\\ud800"}`, ""},
		{"array", `[1]`, "JSON object"},
		{"null", `null`, "JSON object"},
		{"empty", ``, "complete JSON"},
		{"float for int", `{"now_tick": 1.0}`, "now_tick"},
		{"exponent for int", `{"now_tick": 1e3}`, "now_tick"},
		{"overflow", `{"now_tick": 99999999999999999999}`, "now_tick"},
		{"string for int", `{"now_tick": "1"}`, `field "now_tick": a JSON string is not an integer in range (no fraction or exponent)`},
		{"string for a policy int", `{"policy": {"limit": "3"}}`, `field "policy.limit": a JSON string is not an integer in range (no fraction or exponent)`},
		{"object for a string", `{"query": {}}`, `field "query": a JSON object is not a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req RetrieveRequest
			err := DecodeStrict([]byte(tt.body), &req)
			if tt.name == "trailing garbage" {
				if err == nil {
					t.Fatalf("DecodeStrict(%q) = nil, want an error", tt.body)
				}
				return
			}
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("DecodeStrict(%q) = %v, want error containing %q", tt.body, err, tt.wantErr)
			}
		})
	}
	var doc DocumentRequest
	if err := DecodeStrict([]byte(`{"text": "x", "classification": "public", "metadata": {"Owner": {"A": 1, "a": [1, {"B": 2}]}}}`), &doc); err != nil {
		t.Fatalf("free-form metadata keys rejected: %v", err)
	}
	if err := DecodeStrict([]byte(`{"text": "x", "metadata": {"k": 1, "k": 2}}`), &doc); err == nil {
		t.Fatalf("duplicate metadata keys accepted")
	}
}

// FuzzDecodeStrict: the decoders never panic, and whatever they accept is
// valid UTF-8 all the way down and survives a re-encode round trip.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"query": "hold", "now_tick": 5, "policy": {"limit": 2, "max_stale_ticks": 0}}`,
		`{"text": "x", "classification": "public", "barriers": ["a"], "metadata": {"k": [1, {"z": null}]}}`,
		`{"claims": ["a."], "chunk_ids": ["d::0"], "threshold": 0.5}`,
		`{"question": "q", "chunk_ids": [], "budget_tokens": 3}`,
		`{"query": "\ud83d\ude00 \\u0000"}`,
		"{\"query\": \"\xff\"}",
		`{"a": {"a": {"a": [[[[]]]]}}}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range deepAndWide() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		targets := []any{&RetrieveRequest{}, &DocumentRequest{}, &GroundRequest{}, &AssembleRequest{}, &CreateTenantRequest{}}
		for _, v := range targets {
			if err := DecodeStrict(data, v); err != nil {
				continue
			}
			if !utf8.Valid(data) {
				t.Fatalf("accepted invalid UTF-8: %q", data)
			}
			if d := nestingDepth(data); d > MaxJSONDepth {
				t.Fatalf("accepted %d levels of nesting, over MaxJSONDepth %d", d, MaxJSONDepth)
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("accepted %q but cannot re-encode: %v", data, err)
			}
			if !utf8.Valid(out) || strings.Contains(string(out), "\ufffd") && !strings.Contains(string(data), "\ufffd") && !strings.Contains(strings.ToLower(string(data)), `\ufffd`) {
				t.Fatalf("accepted %q and repaired it into %q", data, out)
			}
		}
	})
}

func TestIdentityFromClaims(t *testing.T) {
	tests := []struct {
		name    string
		c       Claims
		wantErr bool
	}{
		{"minimal", Claims{RegisteredClaims: regSub("a")}, false},
		{"full", Claims{RegisteredClaims: regSub("a"), Tenant: "t", Clearance: "restricted", Barriers: []string{"b", "a"}, Roles: []string{"reader", "auditor", "reader"}}, false},
		{"no sub", Claims{}, true},
		{"bad tenant", Claims{RegisteredClaims: regSub("a"), Tenant: "T"}, true},
		{"bad clearance", Claims{RegisteredClaims: regSub("a"), Clearance: "secret"}, true},
		{"bad barrier", Claims{RegisteredClaims: regSub("a"), Barriers: []string{"a b"}}, true},
		{"unknown role ignored", Claims{RegisteredClaims: regSub("a"), Roles: []string{"root", "offline_access"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := IdentityFromClaims(tt.c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("IdentityFromClaims = %+v, %v; want error %v", id, err, tt.wantErr)
			}
			if tt.name == "full" && (len(id.Roles) != 2 || id.Barriers[0] != "a" || !id.Has(RoleAuditor) || id.Has(RoleWriter)) {
				t.Fatalf("identity = %+v", id)
			}
			if tt.name == "unknown role ignored" && len(id.Roles) != 0 {
				t.Fatalf("roles = %q, want none", id.Roles)
			}
			if tt.name == "minimal" && id.Clearance.String() != "public" {
				t.Fatalf("default clearance = %v, want public", id.Clearance)
			}
		})
	}
}

func regSub(s string) jwt.RegisteredClaims { return jwt.RegisteredClaims{Subject: s} }

// FuzzReadLine: NDJSON framing gives back exactly the input's lines, and a
// line over the limit is reported, never truncated silently.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("{\"a\": 1}\n{\"b\": 2}"), 8)
	f.Add([]byte("\n\n\n"), 1)
	f.Add([]byte(strings.Repeat("x", 70000)+"\ny"), 100000)
	for _, s := range deepAndWide() {
		f.Add([]byte(s+"\n"+s), 1<<20)
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 1 || limit > 1<<20 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		var got [][]byte
		for {
			line, err := readLine(br, int64(limit))
			if err == nil || errors.Is(err, io.EOF) {
				// What a batch does with the line: never a panic or a crash,
				// never more than MaxJSONDepth levels accepted.
				var doc DocumentRequest
				if DecodeStrict(bytes.TrimSpace(line), &doc) == nil && nestingDepth(line) > MaxJSONDepth {
					t.Fatalf("a line of %d levels was accepted", nestingDepth(line))
				}
			}
			if errors.Is(err, errLineTooLong) {
				for _, l := range bytes.Split(data, []byte("\n")) {
					if len(l) > limit {
						return
					}
				}
				t.Fatalf("line too long reported, but no line of %q is over %d", data, limit)
			}
			got = append(got, line)
			if err != nil {
				break
			}
		}
		if want := bytes.Split(data, []byte("\n")); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("readLine split %q into %q, want %q", data, got, want)
		}
	})
}

// deepAndWide are fuzz seeds at the edges of the decoders' cost: nesting far
// past MaxJSONDepth, exactly at it and one over, and wide arrays and objects.
func deepAndWide() []string {
	// deep is past encoding/json's own limit of 10,000 levels too.
	const deep = 12_000
	// nested is a DocumentRequest with n levels in all.
	nested := func(n int) string {
		return `{"text": "x", "classification": "public", "metadata": {"a": ` +
			strings.Repeat("[", n-2) + strings.Repeat("]", n-2) + `}}`
	}
	var wideObject strings.Builder
	wideObject.WriteString(`{"text": "x", "classification": "public", "metadata": {`)
	for i := range 2000 {
		fmt.Fprintf(&wideObject, `"k%d": %d, `, i, i)
	}
	wideObject.WriteString(`"k0": 0}}`)
	return []string{
		strings.Repeat("[", deep),
		strings.Repeat("[", deep) + strings.Repeat("]", deep),
		strings.Repeat(`{"a":`, deep),
		`{"query": ` + strings.Repeat("[", deep),
		nested(MaxJSONDepth),
		nested(MaxJSONDepth + 1),
		`{"text": "` + strings.Repeat("[", deep) + `", "classification": "public"}`,
		`{"text": "x", "classification": "public", "metadata": {"a": [` + strings.Repeat("0,", 10_000) + `0]}}`,
		wideObject.String(),
	}
}

// nestingDepth is the deepest nesting of arrays and objects in data outside
// strings: a reference for the decoders' limit.
func nestingDepth(data []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// TestDecodeDepth: MaxJSONDepth levels decode, one more is refused with a
// message naming the limit; brackets inside strings do not count.
func TestDecodeDepth(t *testing.T) {
	seeds := deepAndWide()
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"at the limit", seeds[4], ""},
		{"one over", seeds[5], fmt.Sprintf("deeper than %d levels", MaxJSONDepth)},
		{"brackets in a string", seeds[6], ""},
		{"deep arrays", seeds[1], "deeper than 64 levels"},
		{"deep objects", seeds[2], "deeper than 64 levels"},
		{"wide array", seeds[7], ""},
		{"wide object with a duplicate", seeds[8], `duplicate key "metadata.k0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc DocumentRequest
			err := DecodeStrict([]byte(tt.body), &doc)
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("DecodeStrict = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzWalkJSON: the single-pass scan agrees with encoding/json on what is
// one valid JSON object, and adds exactly the depth limit and the duplicate
// key check.
func FuzzWalkJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a": [1, -0.5e+3, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"]}`,
		`{"a": 1, "a": 2}`, `{"\u0061": 1, "a": 2}`, `{"a": 01}`, `{"a": 1.}`, `{"a": -}`, `{"a": tru}`,
		`{"a": [1,]}`, `{"a": 1,}`, `{"a" 1}`, `{"a": 1} {}`, "{\"a\": \"\x01\"}", `[]`, `"x"`, ` { } `,
	} {
		f.Add([]byte(s))
	}
	for _, s := range deepAndWide() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsonstrict.ValidUTF8(data) {
			return // callers check UTF-8 first
		}
		err := jsonstrict.Walk(data, "the body", nil)
		want := json.Valid(data) && bytes.TrimSpace(data)[0] == '{' && nestingDepth(data) <= MaxJSONDepth && !duplicateKeys(data)
		if (err == nil) != want {
			t.Fatalf("jsonstrict.Walk(%q) = %v, want accepted %v", data, err, want)
		}
	})
}

// duplicateKeys reports whether some object in valid JSON repeats a key,
// by encoding/json's tokens.
func duplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		seen      map[string]bool
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.seen != nil && top.expectKey {
			if top.seen[k] {
				return true
			}
			top.seen[k] = true
			top.expectKey = false
			continue
		}
		if top != nil && top.seen != nil {
			top.expectKey = true // a value ends (or opens) here; the next string is a key
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{seen: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// BenchmarkDecodeStrict measures what a hostile or a large body costs the
// strict decoder (docs/security.md, "Request decoding limits"; its figures
// are in docs/benchmarks.md, "Request decoding"):
//
//	go test ./server/ -run '^$' -bench BenchmarkDecodeStrict -benchmem
func BenchmarkDecodeStrict(b *testing.B) {
	const mib = 1 << 20
	// fill is a DocumentRequest of about size bytes whose metadata "a" is
	// open, then repeats unit, then close.
	fill := func(size int, open, unit, close string) []byte {
		head := `{"text": "x", "classification": "public", "metadata": {"a": ` + open
		n := (size - len(head) - len(close) - 2) / len(unit)
		return []byte(head + strings.Repeat(unit, n) + close + `}}`)
	}
	var wideObject bytes.Buffer
	wideObject.WriteString(`{"text": "x", "classification": "public", "metadata": {"a": {`)
	for i := 0; wideObject.Len() < mib-16; i++ {
		fmt.Fprintf(&wideObject, `"k%d": %d, `, i, i)
	}
	wideObject.WriteString(`"z": 0}}}`)
	text, _ := json.Marshal(strings.Repeat("Treasury approves the PMT-771 hold release. ", mib/45))
	tests := []struct {
		name string
		body []byte
	}{
		{"deep [ 1MiB", bytes.Repeat([]byte("["), mib)},
		{"deep {\"a\": 1MiB", bytes.Repeat([]byte(`{"a":`), mib/5)},
		{"deep [ in metadata 6MB", fill(6_000_000, "", "[", "")},
		{"wide array 1MiB", fill(mib, "[", "0,", "0]")},
		{"wide array 6MB", fill(6_000_000, "[", "0,", "0]")},
		{"wide object 1MiB", wideObject.Bytes()},
		{"text 1MiB", []byte(`{"text": ` + string(text) + `, "classification": "public"}`)},
	}
	for _, tt := range tests {
		// DecodeStrict in all, then its scan alone (UTF-8 check and
		// walkJSON: what runs before encoding/json allocates anything).
		b.Run(tt.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(tt.body)))
			b.ReportAllocs()
			for b.Loop() {
				var doc DocumentRequest
				_ = DecodeStrict(tt.body, &doc)
			}
		})
		b.Run(tt.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(tt.body)))
			b.ReportAllocs()
			for b.Loop() {
				if jsonstrict.ValidUTF8(tt.body) {
					_ = jsonstrict.Walk(tt.body, "the body", bodyKey)
				}
			}
		})
	}
}

// BenchmarkDecodeRetrieve measures the strict decoding of a retrieve body
// that sends a whole policy, as the service bench's clients do:
//
//	go test ./server/ -run '^$' -bench BenchmarkDecodeRetrieve -benchmem
func BenchmarkDecodeRetrieve(b *testing.B) {
	q := "settlement hold PMT-771 release approval"
	body, err := json.Marshal(RetrieveRequest{Query: &q, Policy: retrieval.ServicePolicy().Patch()})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req RetrieveRequest
		if err := DecodeStrict(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
