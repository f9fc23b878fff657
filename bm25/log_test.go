package bm25

import (
	"math"
	"runtime"
	"testing"
)

// TestLogMatchesMathLogOnIDFArguments checks the portable ln against Go's
// math.Log for every IDF argument with N <= 2000. math.Log is the reference on
// amd64 only: on other architectures it may differ, which is why Log exists,
// so there the test checks Log against the amd64 results recorded as a digest.
func TestLogMatchesMathLogOnIDFArguments(t *testing.T) {
	const maxN = 2000
	mismatches := 0
	var digest uint64
	for n := int64(1); n <= maxN; n++ {
		for df := int64(0); df <= n; df++ {
			x := float64(float64(float64(n-df)+0.5)/float64(float64(df)+0.5)) + 1
			got := Log(x)
			digest = digest*1099511628211 ^ math.Float64bits(got)
			if runtime.GOARCH == "amd64" {
				if want := math.Log(x); math.Float64bits(got) != math.Float64bits(want) {
					mismatches++
					if mismatches < 5 {
						t.Errorf("Log(%v) (N=%d df=%d) = %v, math.Log = %v", x, n, df, got, want)
					}
				}
			}
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d mismatches against math.Log", mismatches)
	}
	// The digest pins every result bit for bit; it was recorded on amd64
	// (where each value also equals math.Log) and must hold on every GOARCH,
	// e.g. GOARCH=arm64 under qemu-user-static.
	if digest != idfLogDigest {
		t.Fatalf("digest of Log over IDF arguments = %#x, want %#x (recorded on amd64)", digest, idfLogDigest)
	}
}

func TestLogSpecialCases(t *testing.T) {
	tests := []struct {
		name string
		x    float64
		want float64
	}{
		{"one", 1, 0},
		{"e", math.E, 1},
		{"zero", 0, math.Inf(-1)},
		{"inf", math.Inf(1), math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Log(tt.x); got != tt.want {
				t.Errorf("Log(%v) = %v, want %v", tt.x, got, tt.want)
			}
		})
	}
	if !math.IsNaN(Log(-1)) || !math.IsNaN(Log(math.NaN())) {
		t.Errorf("Log of a negative or NaN must be NaN")
	}
}
