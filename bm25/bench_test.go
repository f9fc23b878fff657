package bm25

import "testing"

// IDF runs once per query term (its portable Log is the expensive part);
// Term once per posting, see BenchmarkTerm.

func BenchmarkIDF(b *testing.B) {
	b.ReportAllocs()
	var s float64
	for i := 0; b.Loop(); i++ {
		s += IDF(100_000, int64(i%5000+1))
	}
	_ = s
}

func BenchmarkLog(b *testing.B) {
	b.ReportAllocs()
	var s float64
	for i := 0; b.Loop(); i++ {
		s += Log(1 + float64(i%1000)/7)
	}
	_ = s
}

// BenchmarkScoreChunk scores one chunk for a four-term query, summing in
// query-term order as the stores do.
func BenchmarkScoreChunk(b *testing.B) {
	p := DefaultParams()
	idf := []float64{IDF(100_000, 3), IDF(100_000, 870), IDF(100_000, 12_000), IDF(100_000, 41)}
	tf := []int64{1, 3, 2, 1}
	b.ReportAllocs()
	var s float64
	for b.Loop() {
		var score float64
		for j := range idf {
			score += Term(idf[j], tf[j], 143, 151.2, p)
		}
		s += score
	}
	_ = s
}
