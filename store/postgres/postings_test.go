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

func TestMergeSelect(t *testing.T) {
	if got := mergeSelect([]int64{1, 1, 1, 1, 1, 1}, 1); got != nil {
		t.Errorf("7 blocks of class 0: merged %v, want none", got)
	}
	if got := mergeSelect([]int64{1, 1, 1, 1, 1, 1, 1}, 1); len(got) != 7 {
		t.Errorf("8 blocks of class 0: merged %v, want all 7", got)
	}
	// A big block is left alone by small writes.
	if got := mergeSelect([]int64{4096, 1, 1, 1, 1, 1, 1, 1}, 1); len(got) != 7 || got[0] != 1 {
		t.Errorf("merged %v, want the seven small blocks only", got)
	}
	// A merge that reaches the next class cascades into it.
	if got := mergeSelect([]int64{8, 8, 8, 8, 8, 8, 8, 1, 1, 1, 1, 1, 1, 1}, 2); len(got) != 14 {
		t.Errorf("cascade: merged %v, want all 14", got)
	}
}

// TestMergeSelectBoundsBlocks simulates many writes to one term and checks
// the invariants the read and write paths rely on: few blocks per term, and
// each posting rewritten a logarithmic number of times.
func TestMergeSelectBoundsBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var blocks []int64
	var written, total int64
	maxBlocks := 0
	for range 20000 {
		n := int64(1 + r.IntN(40))
		total += n
		sel := mergeSelect(blocks, n)
		merged := n
		var keep []int64
		j := 0
		for i, b := range blocks {
			if j < len(sel) && sel[j] == i {
				merged += b
				j++
				continue
			}
			keep = append(keep, b)
		}
		written += merged
		blocks = append(keep, merged)
		maxBlocks = max(maxBlocks, len(blocks))
		var sum int64
		for _, b := range blocks {
			sum += b
		}
		if sum != total {
			t.Fatalf("blocks hold %d postings, want %d", sum, total)
		}
	}
	// About 400k postings: at most 7 blocks in each of 7 size classes.
	if maxBlocks > 7*7+1 {
		t.Errorf("a term reached %d blocks", maxBlocks)
	}
	amp := float64(written) / float64(total)
	if amp > 8 {
		t.Errorf("write amplification %.1f: each posting rewritten too often", amp)
	}
	t.Logf("%d postings, at most %d blocks, write amplification %.2f", total, maxBlocks, amp)
}
