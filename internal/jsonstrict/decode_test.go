package jsonstrict

import (
	"fmt"
	"strings"
	"testing"
)

type inner struct {
	N int `json:"n"`
}

type outer struct {
	Name  string         `json:"name"`
	Inner *inner         `json:"inner"`
	List  []inner        `json:"list"`
	Free  map[string]any `json:"free"`
	Count uint           `json:"count"`
}

// lowerOnly is a contract's own key rule: no upper-case ASCII letter.
func lowerOnly(s *Scan, key []byte, _ byte) error {
	if strings.ContainsAny(string(key), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return fmt.Errorf("upper-case key %q", s.Path())
	}
	return nil
}

// TestDecoder: the schema key rule names the path of an unknown or
// case-variant key at any depth and leaves free-form maps alone; the two
// wordings of a type error differ only as the contracts pin them.
func TestDecoder(t *testing.T) {
	tests := []struct {
		name    string
		dec     Decoder
		body    string
		wantErr string // "" means accepted
	}{
		{"accepted", Decoder{What: "x"}, `{"name": "a", "inner": {"n": 1}, "list": [{"n": 2}], "free": {"Any": {"Key": 1}}}`, ""},
		{"unknown nested", Decoder{What: "x"}, `{"inner": {"m": 1}}`, `unknown field "inner.m"`},
		{"case variant in a list", Decoder{What: "x"}, `{"list": [{"n": 1}, {"N": 2}]}`, `unknown field "list.N"`},
		{"unknown nested under a contract's own rule", Decoder{What: "x", Keys: lowerOnly}, `{"inner": {"m": 1}}`, `unknown field "inner.m"`},
		{"the contract's own rule first", Decoder{What: "x", Keys: lowerOnly}, `{"inner": {"M": 1}}`, `upper-case key "inner.M"`},
		{"a duplicate after an unknown field", Decoder{What: "x"}, `{"zz": 1, "name": "a", "name": "b"}`, `duplicate key "name"`},
		{"duplicate in free", Decoder{What: "x"}, `{"free": {"a": {"k": 1, "k": 2}}}`, `duplicate key "free.a.k"`},
		{"api wording", Decoder{What: "x"}, `{"inner": {"n": "1"}}`, `field "inner.n": a JSON string is not an integer in range (no fraction or exponent)`},
		{"api wording, an object", Decoder{What: "x"}, `{"name": {}}`, `field "name": a JSON object is not a string`},
		{"api wording, a list", Decoder{What: "x"}, `{"list": 1}`, `field "list": a JSON number is not a list`},
		{"api wording, an unsigned", Decoder{What: "x"}, `{"count": -1}`, `field "count": a JSON number -1 is not a non-negative integer in range (no fraction or exponent)`},
		{"plain wording", Decoder{What: "x", Plain: true}, `{"inner": {"n": "1"}}`, `"1" is not an integer (write integers without a fraction or exponent)`},
		{"plain list", Decoder{What: "x", Plain: true}, `{"list": {}}`, `field "list": object is not a list`},
		{"subject named", Decoder{What: "the step"}, `[]`, "the step must be a JSON object"},
		{"invalid UTF-8", Decoder{What: "the step"}, "{\"name\": \"\xff\"}", "the step is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v outer
			err := tt.dec.Decode([]byte(tt.body), &v)
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Decode(%s) = %v, want error containing %q", tt.body, err, tt.wantErr)
			}
		})
	}
}
