package bm25

import (
	"math"
	"testing"
)

// TestTermNormMatchesTerm: splitting out the length normalisation keeps every
// bit, across parameters, lengths and frequencies.
func TestTermNormMatchesTerm(t *testing.T) {
	for _, p := range []Params{{1.5, 0.75}, {0, 0}, {1.2, 1}, {2.75, 0.3}, {1e6, 0.5}} {
		for _, avgdl := range []float64{1, 7.3, 142.857, 1e4 / 3} {
			for dl := int64(0); dl < 400; dl += 7 {
				for tf := int64(1); tf < 30; tf += 3 {
					idf := IDF(1000, dl%997+1)
					a := Term(idf, tf, dl, avgdl, p)
					b := TermNorm(idf, tf, LengthNorm(dl, avgdl, p), p)
					if math.Float64bits(a) != math.Float64bits(b) {
						t.Fatalf("p=%v avgdl=%v dl=%d tf=%d: Term %v, TermNorm %v", p, avgdl, dl, tf, a, b)
					}
				}
			}
		}
	}
}
