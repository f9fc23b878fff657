package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"ok", `{"query": "hold", "now_tick": 5, "policy": {"limit": 2}}`, ""},
		{"whitespace around", " \n{\"query\": \"x\"}\n ", ""},
		{"unknown field", `{"query": "x", "tenant": "retail"}`, "unknown field"},
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
		{"string for int", `{"now_tick": "1"}`, "now_tick"},
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
	f.Fuzz(func(t *testing.T, data []byte) {
		targets := []any{&RetrieveRequest{}, &DocumentRequest{}, &GroundRequest{}, &AssembleRequest{}, &CreateTenantRequest{}}
		for _, v := range targets {
			if err := DecodeStrict(data, v); err != nil {
				continue
			}
			if !utf8.Valid(data) {
				t.Fatalf("accepted invalid UTF-8: %q", data)
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
		{"bad role", Claims{RegisteredClaims: regSub("a"), Roles: []string{"root"}}, true},
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
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 1 || limit > 1<<20 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		var got [][]byte
		for {
			line, err := readLine(br, int64(limit))
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
