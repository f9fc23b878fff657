package replay_test

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkLines asserts SPEC section 9's output shape: one line per step, each a
// JSON object with an "op" key, ending in a newline.
func checkLines(t *testing.T, script, out []byte) {
	t.Helper()
	var sc struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(script, &sc); err != nil {
		t.Fatalf("Run accepted a script json.Unmarshal rejects: %v", err)
	}
	if len(out) == 0 {
		if len(sc.Steps) != 0 {
			t.Fatalf("got no output, want %d lines", len(sc.Steps))
		}
		return
	}
	if out[len(out)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	lines := bytes.Split(out[:len(out)-1], []byte("\n"))
	if len(lines) != len(sc.Steps) {
		t.Fatalf("got %d output lines, want one per step: %d", len(lines), len(sc.Steps))
	}
	for i, l := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(l, &obj); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %s", i+1, err, l)
		}
		if _, ok := obj["op"]; !ok {
			t.Fatalf("line %d has no \"op\": %s", i+1, l)
		}
	}
}
