package eval

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
)

// Hand-computed values. With binary gains, a hit at rank r adds
// 1/log2(r+1): rank 1 adds 1, rank 2 adds 0.6309297535714575 (1/log2 3),
// rank 3 adds 0.5, rank 4 adds 0.43067655807339306 (1/log2 5).
func TestMetrics(t *testing.T) {
	const eps = 1e-12
	tests := []struct {
		name       string
		ranked     []string
		relevant   []string
		r1, r2, r5 float64
		rr         float64
		ndcg       float64
	}{
		{
			name:   "two relevant at ranks 2 and 4",
			ranked: []string{"a", "b", "c", "d"}, relevant: []string{"b", "d"},
			r1: 0, r2: 0.5, r5: 1, rr: 0.5,
			// (1/log2 3 + 1/log2 5) / (1 + 1/log2 3)
			ndcg: 0.6509209298071326,
		},
		{
			name:   "first rank hit",
			ranked: []string{"a", "b"}, relevant: []string{"a"},
			r1: 1, r2: 1, r5: 1, rr: 1, ndcg: 1,
		},
		{
			name:   "several chunks of one document count once, at the first",
			ranked: []string{"a", "a", "a", "b"}, relevant: []string{"b"},
			// document ranking is [a b]: b is at rank 2, not 4
			r1: 0, r2: 1, r5: 1, rr: 0.5, ndcg: 0.6309297535714575,
		},
		{
			name:   "a relevant document listed twice counts once",
			ranked: []string{"x", "a"}, relevant: []string{"a", "a"},
			r1: 0, r2: 1, r5: 1, rr: 0.5, ndcg: 0.6309297535714575,
		},
		{
			name:   "one of two relevant found, at rank 3",
			ranked: []string{"x", "y", "a"}, relevant: []string{"a", "b"},
			// DCG 1/log2 4 = 0.5; ideal 1 + 1/log2 3
			r1: 0, r2: 0, r5: 0.5, rr: 1.0 / 3, ndcg: 0.5 / (1 + 0.6309297535714575),
		},
		{
			name:   "nothing relevant retrieved",
			ranked: []string{"x", "y"}, relevant: []string{"a"},
		},
		{
			name:   "empty ranking",
			ranked: nil, relevant: []string{"a"},
		},
		{
			name:   "empty relevance set scores 0, never NaN",
			ranked: []string{"a", "b"}, relevant: nil,
		},
		{
			name:   "empty relevance set and empty ranking",
			ranked: nil, relevant: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(what string, got, want float64) {
				t.Helper()
				if math.IsNaN(got) || math.Abs(got-want) > eps {
					t.Errorf("%s: got %v, want %v", what, got, want)
				}
			}
			check("recall@1", RecallAt(tt.ranked, tt.relevant, 1), tt.r1)
			check("recall@2", RecallAt(tt.ranked, tt.relevant, 2), tt.r2)
			check("recall@5", RecallAt(tt.ranked, tt.relevant, 5), tt.r5)
			check("rr@10", ReciprocalRankAt(tt.ranked, tt.relevant, 10), tt.rr)
			check("ndcg@10", NDCGAt(tt.ranked, tt.relevant, 10), tt.ndcg)
		})
	}
}

func TestMetricsCutOff(t *testing.T) {
	// Twelve relevant documents, all retrieved in order: recall@10 is 10/12
	// and nDCG@10 is 1, because the ideal ranking also holds only 10.
	var docs []string
	for i := range 12 {
		docs = append(docs, string(rune('a'+i)))
	}
	if got, want := RecallAt(docs, docs, 10), 10.0/12; got != want {
		t.Errorf("recall@10: got %v, want %v", got, want)
	}
	if got := NDCGAt(docs, docs, 10); math.Abs(got-1) > 1e-12 {
		t.Errorf("ndcg@10: got %v, want 1", got)
	}
	// A hit beyond the cut-off does not count.
	ranked := []string{"x1", "x2", "x3", "a"}
	if got := ReciprocalRankAt(ranked, []string{"a"}, 3); got != 0 {
		t.Errorf("rr@3 with the hit at rank 4: got %v, want 0", got)
	}
	if got := RecallAt(ranked, []string{"a"}, 0); got != 0 {
		t.Errorf("recall@0: got %v, want 0", got)
	}
	// Two hits at ranks 1 and 3 of two relevant: (1 + 1/2) / (1 + 1/log2 3).
	if got, want := NDCGAt([]string{"a", "x", "b"}, []string{"a", "b"}, 10), 1.5/(1+0.6309297535714575); math.Abs(got-want) > 1e-12 {
		t.Errorf("ndcg@10: got %v, want %v", got, want)
	}
}

func TestDocRanking(t *testing.T) {
	got := DocRanking([]string{"b", "a", "b", "c", "a"})
	if want := []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMean(t *testing.T) {
	got := Mean([]Metrics{
		{RecallAt1: 1, RecallAt5: 1, RecallAt10: 1, MRRAt10: 1, NDCGAt10: 1},
		{RecallAt1: 0, RecallAt5: 0.5, RecallAt10: 1, MRRAt10: 0.25, NDCGAt10: 0.5},
	})
	want := Metrics{RecallAt1: 0.5, RecallAt5: 0.75, RecallAt10: 1, MRRAt10: 0.625, NDCGAt10: 0.75}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := Mean(nil); got != (Metrics{}) {
		t.Errorf("mean of nothing: got %+v, want zeros", got)
	}
}

// Hand-computed graded nDCG@k (linear gain, log2 discount, as trec_eval's
// ndcg_cut): 1/log2 3 = 0.6309297535714575, 1/log2 4 = 0.5, 1/log2 5 =
// 0.43067655807339306.
func TestGradedNDCG(t *testing.T) {
	const eps = 1e-12
	tests := []struct {
		name   string
		ranked []string
		gains  map[string]float64
		k      int
		want   float64
	}{
		{
			name:   "ideal order",
			ranked: []string{"a", "b"}, gains: map[string]float64{"a": 2, "b": 1}, k: 10,
			want: 1,
		},
		{
			name:   "grades swapped",
			ranked: []string{"b", "a"}, gains: map[string]float64{"a": 2, "b": 1}, k: 10,
			// DCG 1 + 2/log2 3 = 2.2618595071429148; ideal 2 + 1/log2 3 = 2.6309297535714575
			want: 2.2618595071429148 / 2.6309297535714575,
		},
		{
			name:   "a grade-0 judgment adds nothing, even to the ideal",
			ranked: []string{"x", "c", "a"}, gains: map[string]float64{"a": 3, "b": 0, "c": 1}, k: 10,
			// DCG 1/log2 3 + 3/log2 4 = 2.1309297535714575; ideal 3 + 1/log2 3 = 3.6309297535714575
			want: 2.1309297535714575 / 3.6309297535714575,
		},
		{
			name:   "the ideal holds the k largest gains",
			ranked: []string{"c", "a"}, gains: map[string]float64{"a": 1, "b": 1, "c": 2}, k: 2,
			// DCG 2 + 1/log2 3; ideal 2 + 1/log2 3 (b, tied with a, is past k)
			want: 1,
		},
		{
			name:   "a hit past k does not count",
			ranked: []string{"x", "y", "a"}, gains: map[string]float64{"a": 2}, k: 2,
			want: 0,
		},
		{
			name:   "a repeated document counts once, at its first rank",
			ranked: []string{"x", "a", "a", "b"}, gains: map[string]float64{"a": 1, "b": 1}, k: 10,
			// ranking x a b: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3)
			want: (0.6309297535714575 + 0.5) / 1.6309297535714575,
		},
		{
			name:   "no positive gain scores 0, never NaN",
			ranked: []string{"a"}, gains: map[string]float64{"a": 0}, k: 10,
			want: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GradedNDCGAt(tt.ranked, tt.gains, tt.k); math.IsNaN(got) || math.Abs(got-tt.want) > eps {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestQueryScore: a query's grades weigh nDCG, its relevant list drives
// recall and MRR, and R@100 is measured only for a deep ranking.
func TestQueryScore(t *testing.T) {
	q := Query{Query: "x", Relevant: []string{"a", "b"}, Grades: map[string]int{"a": 2}}
	if got, want := q.Gains(), map[string]float64{"a": 2, "b": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("gains: got %v, want %v", got, want)
	}
	var ranked []string
	for i := range 150 {
		ranked = append(ranked, fmt.Sprintf("x%d", i))
	}
	ranked[4] = "b"   // rank 5
	ranked[119] = "a" // rank 120: past R@100
	m := q.Score(ranked, true)
	// nDCG@10: DCG 1/log2 6; ideal 2 + 1/log2 3.
	want := Metrics{RecallAt5: 0.5, RecallAt10: 0.5, MRRAt10: 0.2, NDCGAt10: (1 / math.Log2(6)) / (2 + 0.6309297535714575), RecallAt100: 0.5}
	if math.Abs(m.NDCGAt10-want.NDCGAt10) > 1e-12 {
		t.Errorf("ndcg@10: got %v, want %v", m.NDCGAt10, want.NDCGAt10)
	}
	m.NDCGAt10 = want.NDCGAt10
	if m != want {
		t.Errorf("deep: got %+v, want %+v", m, want)
	}
	ranked[99] = "a" // rank 100: the last R@100 counts
	if got := q.Score(ranked, true).RecallAt100; got != 1 {
		t.Errorf("R@100 with hits at 5 and 100: got %v, want 1", got)
	}
	if got := q.Score(ranked, false).RecallAt100; got != 0 {
		t.Errorf("R@100 of a shallow ranking: got %v, want 0 (not measured)", got)
	}
	// Binary relevance is the same query without grades.
	if got, want := (Query{Relevant: []string{"a", "b"}}).Score(ranked[:10], false), Score(ranked[:10], []string{"a", "b"}); got != want {
		t.Errorf("without grades: got %+v, want Score's %+v", got, want)
	}
}
