package replaygen

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestGenerateIsDeterministicAndValid(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		a, b := Generate(seed, 30), Generate(seed, 30)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: two generations differ", seed)
		}
		var s struct {
			Steps []map[string]any `json:"steps"`
		}
		if err := json.Unmarshal(a, &s); err != nil {
			t.Fatalf("seed %d: not JSON: %v", seed, err)
		}
		if len(s.Steps) != 30 {
			t.Fatalf("seed %d: %d steps, want 30", seed, len(s.Steps))
		}
	}
	if bytes.Equal(Generate(1, 30), Generate(2, 30)) {
		t.Fatal("different seeds gave the same script")
	}
}
