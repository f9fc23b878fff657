package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := []time.Duration{10, 1, 9, 2, 8, 3, 7, 4, 6, 5} // 1..10, shuffled
	tests := []struct {
		name string
		xs   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single", []time.Duration{42}, 99, 42},
		{"p50 of 10", ten, 50, 5},    // ceil(5.0) = 5th
		{"p95 of 10", ten, 95, 10},   // ceil(9.5) = 10th
		{"p99 of 10", ten, 99, 10},   // ceil(9.9) = 10th
		{"p10 of 10", ten, 10, 1},    // ceil(1.0) = 1st
		{"p11 of 10", ten, 11, 2},    // ceil(1.1) = 2nd
		{"p100 of 10", ten, 100, 10}, // last
		{"p50 of 4", []time.Duration{4, 1, 3, 2}, 50, 2},
		{"p75 of 4", []time.Duration{4, 1, 3, 2}, 75, 3},
		{"p76 of 4", []time.Duration{4, 1, 3, 2}, 76, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.xs, tt.p, got, tt.want)
			}
		})
	}
	if ten[0] != 10 {
		t.Error("Percentile modified its input")
	}
}

func TestRecallAt(t *testing.T) {
	tests := []struct {
		name      string
		got, want []string
		k         int
		recall    float64
		ok        bool
	}{
		{"identical", []string{"a", "b"}, []string{"a", "b"}, 10, 1, true},
		{"half", []string{"a", "x"}, []string{"a", "b"}, 10, 0.5, true},
		{"order ignored", []string{"b", "a"}, []string{"a", "b"}, 10, 1, true},
		{"empty want", []string{"a"}, nil, 10, 0, false},
		{"empty got", nil, []string{"a"}, 10, 0, true},
		{"cut at k", []string{"a", "b", "c"}, []string{"c", "a", "b"}, 2, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := RecallAt(tt.got, tt.want, tt.k)
			if r != tt.recall || ok != tt.ok {
				t.Errorf("RecallAt = %v, %v; want %v, %v", r, ok, tt.recall, tt.ok)
			}
		})
	}
}
