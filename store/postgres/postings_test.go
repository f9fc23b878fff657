package postgres

import (
	"math/rand/v2"
	"testing"
)

func TestSizeClass(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{{1, 0}, {7, 0}, {8, 1}, {63, 1}, {64, 2}, {511, 2}, {512, 3}} {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestMergePick(t *testing.T) {
	if got := mergePick([]int64{1, 1, 1, 1, 1, 1, 1}); got != nil {
		t.Errorf("7 segments of class 0: merged %v, want none", got)
	}
	if got := mergePick([]int64{1, 1, 1, 1, 1, 1, 1, 1}); len(got) != 8 {
		t.Errorf("8 segments of class 0: merged %v, want all 8", got)
	}
	// A big segment is left alone while small ones merge.
	if got := mergePick([]int64{4096, 1, 1, 1, 1, 1, 1, 1, 1}); len(got) != 8 || got[0] != 1 {
		t.Errorf("merged %v, want the eight small segments only", got)
	}
	// Full segments are never merged again.
	full := int64(1) << (3 * fullClass)
	if got := mergePick([]int64{full, full, full, full, full, full, full, full + 1}); got != nil {
		t.Errorf("merged full segments %v", got)
	}
	// Fewer than 8 of every class: nothing to do.
	if got := mergePick([]int64{8, 8, 8, 8, 1, 1, 1, 2, 1000}); got != nil {
		t.Errorf("merged %v, want none", got)
	}
	// Eight of class 1: merged with the smaller ones, not the bigger.
	if got := mergePick([]int64{8, 9, 10, 11, 12, 13, 14, 15, 1, 2, 1000}); len(got) != 10 || got[9] != 9 {
		t.Errorf("merged %v, want the eight of class 1 and the two of class 0", got)
	}
}

// TestMergePickBoundsSegments simulates many writes, each followed by one
// merge (as Store.merge does, up to maxMergesPerWrite), and checks the
// invariants the read and write paths rely on: few segments, and each
// posting rewritten a logarithmic number of times.
func TestMergePickBoundsSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var segs []int64
	var written, total int64
	maxSegs := 0
	for range 20000 {
		n := int64(1 + r.IntN(40))
		total += n
		segs = append(segs, n)
		for range maxMergesPerWrite {
			pick := mergePick(segs)
			if pick == nil {
				break
			}
			var merged int64
			var keep []int64
			j := 0
			for i, b := range segs {
				if j < len(pick) && pick[j] == i {
					merged += b
					j++
					continue
				}
				keep = append(keep, b)
			}
			written += merged
			segs = append(keep, merged)
		}
		maxSegs = max(maxSegs, len(segs))
		var sum int64
		for _, b := range segs {
			sum += b
		}
		if sum != total {
			t.Fatalf("segments hold %d postings, want %d", sum, total)
		}
	}
	// About 400k postings: at most 7 segments in each of 7 size classes.
	if maxSegs > 7*7+1 {
		t.Errorf("%d segments at once", maxSegs)
	}
	amp := float64(written) / float64(total)
	if amp > 8 {
		t.Errorf("write amplification %.1f: each posting rewritten too often", amp)
	}
	t.Logf("%d postings, at most %d segments, write amplification %.2f", total, maxSegs, amp)
}
