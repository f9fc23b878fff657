package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest value such that at least p% of the
// values are <= it, i.e. sorted[ceil(p/100*n)-1]. It returns 0 for no values
// and does not modify xs.
func Percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p / 100 * float64(len(s))))
	k = min(max(k, 1), len(s))
	return s[k-1]
}

// RecallAt returns |got[:k] ∩ want[:k]| / |want[:k]|, and ok false when want
// is empty (recall is undefined for a query with no relevant result).
func RecallAt(got, want []string, k int) (recall float64, ok bool) {
	if len(want) > k {
		want = want[:k]
	}
	if len(got) > k {
		got = got[:k]
	}
	if len(want) == 0 {
		return 0, false
	}
	in := make(map[string]bool, len(want))
	for _, id := range want {
		in[id] = true
	}
	n := 0
	for _, id := range got {
		if in[id] {
			n++
		}
	}
	return float64(n) / float64(len(want)), true
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
