package fusion

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

func scoreOf(t *testing.T, fused []Fused, id string) float64 {
	t.Helper()
	for _, f := range fused {
		if f.ChunkID == id {
			return f.Score
		}
	}
	t.Fatalf("chunk %q not in the fused result %v", id, fused)
	return 0
}

// TestRRFDesignNotes replays the traced hybrid query of the design notes:
// dB is 1st in BM25 and 3rd in dense, xB 2nd and 1st.
func TestRRFDesignNotes(t *testing.T) {
	bm25 := []string{"dB#0", "xB#0", "d5#0", "d9#0", "d6#0"}
	dense := []string{"xB#0", "d5#0", "dB#0", "d8#0", "d3#0"}
	fused := RRF([][]string{bm25, dense}, DefaultK)
	c61, c62, c63 := 1.0/61, 1.0/62, 1.0/63 // float64 variables: the sums below round like RRF's
	tests := []struct {
		name     string
		id       string
		want     float64
		wantMicr float64 // floor(score * 1e6)
	}{
		{"dB: ranks 1 and 3", "dB#0", c61 + c63, 32266},
		{"xB: ranks 1 and 2", "xB#0", c61 + c62, 32522},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scoreOf(t, fused, tt.id)
			if got != tt.want {
				t.Errorf("fused(%s) = %v, want %v", tt.id, got, tt.want)
			}
			if m := math.Floor(got * 1e6); m != tt.wantMicr {
				t.Errorf("floor(fused(%s) * 1e6) = %v, want %v", tt.id, m, tt.wantMicr)
			}
		})
	}
	if fused[0].ChunkID != "xB#0" || fused[1].ChunkID != "dB#0" {
		t.Errorf("fused order starts %s, %s, want xB#0, dB#0 (RRF alone keeps xB a hair ahead)", fused[0].ChunkID, fused[1].ChunkID)
	}
}

func TestContribution(t *testing.T) {
	tests := []struct {
		name string
		k    int64
		rank int
		den  float64
	}{
		{"rank 1 k 60", 60, 1, 61},
		{"rank 20 k 60", 60, 20, 80},
		{"k 1", 1, 1, 2},
		{"large k", 1 << 40, 3, 1<<40 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			one, den := 1.0, tt.den
			if got, want := Contribution(tt.k, tt.rank), one/den; got != want {
				t.Errorf("Contribution(%d, %d) = %v, want %v", tt.k, tt.rank, got, want)
			}
		})
	}
}

// TestRRFConsistentThirdBeatsFirstAndTenth is invariant 6.
func TestRRFConsistentThirdBeatsFirstAndTenth(t *testing.T) {
	r1 := []string{"X", "a1", "C", "a4", "a5", "a6", "a7", "a8", "a9", "a10"}
	r2 := []string{"b1", "b2", "C", "b4", "b5", "b6", "b7", "b8", "b9", "X"}
	fused := RRF([][]string{r1, r2}, DefaultK)
	c, x := scoreOf(t, fused, "C"), scoreOf(t, fused, "X")
	if !(c > x) {
		t.Errorf("fused(consistently 3rd) = %v, fused(1st and 10th) = %v, want the first larger", c, x)
	}
	if fused[0].ChunkID != "C" || fused[1].ChunkID != "X" {
		t.Errorf("fused order starts %s, %s, want C, X", fused[0].ChunkID, fused[1].ChunkID)
	}
}

// orderSensitiveRanks finds three ranks whose contributions sum to different
// float64 values in different orders, so a test built on them can fail when
// RRF sums in ranking order instead of ascending rank order.
func orderSensitiveRanks(t *testing.T, k int64) [3]int {
	t.Helper()
	for a := 1; a < 60; a++ {
		for b := a + 1; b < 60; b++ {
			for c := b + 1; c < 60; c++ {
				ca, cb, cc := Contribution(k, a), Contribution(k, b), Contribution(k, c)
				if (ca+cb)+cc != (cc+cb)+ca || (ca+cb)+cc != (cb+cc)+ca {
					return [3]int{a, b, c}
				}
			}
		}
	}
	t.Fatalf("no order-sensitive rank triple for k = %d", k)
	return [3]int{}
}

// place builds a ranking of length 60 with target at 1-based rank r and
// fillers elsewhere.
func place(target string, r int, filler string) []string {
	out := make([]string, 60)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", filler, i)
	}
	out[r-1] = target
	return out
}

// TestRRFOrderIndependent is invariant 7: every permutation of the rankings
// gives a bit-identical result, and the target's score is its contributions
// summed in ascending rank order.
func TestRRFOrderIndependent(t *testing.T) {
	ranks := orderSensitiveRanks(t, DefaultK)
	rankings := [][]string{
		place("T", ranks[2], "p"),
		place("T", ranks[0], "q"),
		place("T", ranks[1], "r"),
	}
	perms := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	var first []Fused
	for _, p := range perms {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			got := RRF([][]string{rankings[p[0]], rankings[p[1]], rankings[p[2]]}, DefaultK)
			want := Contribution(DefaultK, ranks[0]) + Contribution(DefaultK, ranks[1]) + Contribution(DefaultK, ranks[2])
			if s := scoreOf(t, got, "T"); s != want {
				t.Errorf("fused(T) = %v, want %v (contributions in ascending rank order)", s, want)
			}
			if first == nil {
				first = got
			} else if !reflect.DeepEqual(got, first) {
				t.Errorf("permutation %v gives %v, want %v", p, got, first)
			}
		})
	}
}

func TestRRFOrderAndTies(t *testing.T) {
	tests := []struct {
		name     string
		rankings [][]string
		k        int64
		want     []string
	}{
		{"empty", nil, 60, []string{}},
		{"single ranking keeps its order", [][]string{{"c", "a", "b"}}, 60, []string{"c", "a", "b"}},
		{"equal scores ordered by chunk id bytes", [][]string{{"b", "x"}, {"a", "y"}}, 60, []string{"a", "b", "x", "y"}},
		{"byte order, not case-insensitive", [][]string{{"b"}, {"B"}, {"a"}}, 60, []string{"B", "a", "b"}},
		{"ids with :: compare bytewise", [][]string{{"doc::10"}, {"doc::9"}, {"doc::1"}}, 60, []string{"doc::1", "doc::10", "doc::9"}},
		{"agreement beats a single first place", [][]string{{"solo", "both"}, {"x", "both"}}, 60, []string{"both", "solo", "x"}},
		{"k 1 favours a first place", [][]string{{"top", "mid"}, {"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "mid"}}, 1,
			[]string{"top", "x1", "mid", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}},
		{"k 60 favours agreement", [][]string{{"top", "mid"}, {"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "mid"}}, 60,
			[]string{"mid", "top", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RRF(tt.rankings, tt.k)
			ids := make([]string, len(got))
			for i, f := range got {
				ids[i] = f.ChunkID
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("RRF order = %q, want %q", ids, tt.want)
			}
		})
	}
}

// TestRRFRankOnly: the same positions give the same fusion, whatever
// scores the retrievers had; RRF only takes ids.
func TestRRFRankOnly(t *testing.T) {
	a := RRF([][]string{{"x", "y", "z"}, {"z", "y"}}, 60)
	want := []Fused{
		{"z", Contribution(60, 1) + Contribution(60, 3)},
		{"y", Contribution(60, 2) + Contribution(60, 2)},
		{"x", Contribution(60, 1)},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("RRF = %v, want %v", a, want)
	}
}

// TestRRFOrderStable runs the same fusion many times over inputs full of ties
// and asserts identical output each time (Weaviate's fusion tests).
func TestRRFOrderStable(t *testing.T) {
	var r1, r2 []string
	for i := range 200 {
		r1 = append(r1, fmt.Sprintf("doc-%03d::%d", (i*37)%200, i%3))
		r2 = append(r2, fmt.Sprintf("doc-%03d::%d", (i*91)%200, (i+1)%3))
	}
	first := RRF([][]string{r1, r2}, DefaultK)
	for i := range 200 {
		if got := RRF([][]string{r1, r2}, DefaultK); !reflect.DeepEqual(got, first) {
			t.Fatalf("run %d: got %v, want %v", i, got, first)
		}
	}
	for i := 1; i < len(first); i++ {
		a, b := first[i-1], first[i]
		if a.Score < b.Score || (a.Score == b.Score && a.ChunkID >= b.ChunkID) {
			t.Fatalf("positions %d, %d: %v then %v, want score descending then id ascending", i-1, i, a, b)
		}
	}
}

func BenchmarkRRF(b *testing.B) {
	var r1, r2 []string
	for i := range 50 {
		r1 = append(r1, fmt.Sprintf("doc-%03d::%d", (i*37)%97, i%3))
		r2 = append(r2, fmt.Sprintf("doc-%03d::%d", (i*91)%97, (i+1)%3))
	}
	b.ReportAllocs()
	for b.Loop() {
		RRF([][]string{r1, r2}, DefaultK)
	}
}

// TestWeightedRRFRankedShared: chunks may share a rank (a document's rank
// given to each of its chunks); each contributes w / (k + rank), summed in
// ascending rank order like the other rankings.
func TestWeightedRRFRankedShared(t *testing.T) {
	got := WeightedRRFRanked([][]Ranked{
		{{ID: "a", Rank: 1}, {ID: "b", Rank: 2}},
		{{ID: "a", Rank: 3}, {ID: "b", Rank: 3}, {ID: "c", Rank: 1}},
	}, []float64{1, 2}, 60)
	want := []Fused{
		{ChunkID: "a", Score: float64(1.0/61) + float64(2.0/63)},
		{ChunkID: "b", Score: float64(1.0/62) + float64(2.0/63)},
		{ChunkID: "c", Score: 2.0 / 61},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("position %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// refWeightedRRFRanked is the contract of WeightedRRFRanked written
// plainly: each chunk's contributions collected apart, sorted by (rank,
// contribution), summed from 0, the chunks then sorted by score
// descending and id ascending.
func refWeightedRRFRanked(rankings [][]Ranked, weights []float64, k int64) []Fused {
	type part struct {
		rank int
		c    float64
	}
	parts := map[string][]part{}
	for i, r := range rankings {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		for _, e := range r {
			parts[e.ID] = append(parts[e.ID], part{e.Rank, w / float64(uint64(k)+uint64(e.Rank))})
		}
	}
	var out []Fused
	for id, ps := range parts {
		sort.Slice(ps, func(a, b int) bool {
			if ps[a].rank != ps[b].rank {
				return ps[a].rank < ps[b].rank
			}
			return ps[a].c < ps[b].c
		})
		var s float64
		for _, p := range ps {
			s += p.c
		}
		out = append(out, Fused{ChunkID: id, Score: s})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Score != out[b].Score {
			return out[a].Score > out[b].Score
		}
		return out[a].ChunkID < out[b].ChunkID
	})
	return out
}

// TestWeightedRRFRankedReference compares WeightedRRFRanked with the
// plain reference on random rankings (shared chunks, repeated and skipped
// ranks, weights with several significant bits, 0 included) bit for bit.
func TestWeightedRRFRankedReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 43))
	for trial := range 2000 {
		lists := rng.IntN(4)
		rankings := make([][]Ranked, lists)
		var weights []float64
		if rng.IntN(4) > 0 {
			weights = make([]float64, lists)
		}
		for i := range rankings {
			ids := rng.Perm(40)[:rng.IntN(30)]
			rank := 0
			for _, id := range ids {
				if rank == 0 || rng.IntN(3) > 0 {
					rank += 1 + rng.IntN(2)
				}
				rankings[i] = append(rankings[i], Ranked{ID: fmt.Sprintf("d%d::%d", id%13, id), Rank: rank})
			}
			if weights != nil {
				weights[i] = []float64{0, 0.3, 1, 2, 1.0 / 3}[rng.IntN(5)]
			}
		}
		k := int64(1 + rng.IntN(100))
		got, want := WeightedRRFRanked(rankings, weights, k), refWeightedRRFRanked(rankings, weights, k)
		if len(got) != len(want) {
			t.Fatalf("trial %d: got %d chunks, want %d", trial, len(got), len(want))
		}
		for i := range want {
			if got[i].ChunkID != want[i].ChunkID || math.Float64bits(got[i].Score) != math.Float64bits(want[i].Score) {
				t.Fatalf("trial %d, position %d: got %v, want %v", trial, i, got[i], want[i])
			}
		}
	}
}
