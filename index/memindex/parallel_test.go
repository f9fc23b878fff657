package memindex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/replay/replaygen"
)

// overflowScript puts documents whose chunks repeat a word more than 127
// times (their vectors do not fit the int8 columns), some 254 to 300 times
// (tfs at and beyond a byte's escape, see postingList.tfs), among ordinary
// ones, queries them, puts them again (their postings die, and a low
// compaction threshold compacts them) and queries again.
func overflowScript() []byte {
	type m = map[string]any
	var steps []m
	words := []string{"ledger", "swap", "tx4096", "margin", "hold", "pmt"}
	for d := 0; d < 12; d++ {
		var text strings.Builder
		fmt.Fprintf(&text, "# Part %d\n", d)
		for i := 0; i < 20; i++ {
			text.WriteString(words[(d+i*i)%len(words)] + " ")
		}
		switch d % 3 {
		case 0:
			text.WriteString(strings.Repeat(words[d%len(words)]+" ", 150+d))
		case 1:
			text.WriteString(strings.Repeat(words[(d+1)%len(words)]+" ", []int{254, 255, 256, 300}[d/3]))
		}
		steps = append(steps, m{"op": "put", "document": m{"tenant": "t", "doc_id": fmt.Sprintf("d%d", d), "text": text.String(),
			"classification": []string{"public", "internal", "confidential", "restricted"}[d%4], "as_of_tick": d * 10}})
	}
	queries := func() {
		for i, q := range []string{"ledger swap", "tx4096", "hold hold margin", "pmt ledger tx4096 swap", "margins"} {
			steps = append(steps, m{"op": "retrieve", "principal": m{"tenant": "t", "clearance": "confidential"},
				"query": q, "now_tick": 100, "policy": m{"max_stale_ticks": 60 + i*10, "enable_rerank": i%2 == 0, "top_n": 3 + i}})
		}
	}
	queries()
	for d := range 12 {
		text := strings.Repeat(words[d%len(words)]+" ", 100+60*(d%5))
		steps = append(steps, m{"op": "put", "document": m{"tenant": "t", "doc_id": fmt.Sprintf("d%d", d), "text": text,
			"classification": "internal", "as_of_tick": 90}})
	}
	queries()
	b, err := json.Marshal(m{"config": m{"max_words": 400, "overlap_words": 40}, "steps": steps})
	if err != nil {
		panic(err)
	}
	return b
}

// TestParallelBlockedRank forces the two-goroutine Rank and tiny dense blocks
// (so block edges and int8 overflow slots fall everywhere) and compares with
// the reference, with each of the dense side's kernels.
func TestParallelBlockedRank(t *testing.T) {
	for k, kernels := range memindex.DenseKernels {
		memindex.SetDenseKernels(t, k)
		for _, blk := range []int{1, 3, 64} {
			memindex.SetParallel(t, 0, blk)
			compare(t, fmt.Sprintf("overflow script, %s kernels, block %d", kernels, blk), overflowScript())
			for seed := uint64(2000); seed < 2100; seed++ {
				compare(t, fmt.Sprintf("seed %d, %s kernels, block %d", seed, kernels, blk), replaygen.Generate(seed, 60))
			}
		}
	}
}

// TestOverflowScriptOverflows guards the test above: its documents must
// really hold vectors that do not fit int8.
func TestOverflowScriptOverflows(t *testing.T) {
	var st *memindextest.Store
	if err := replay.Run(context.Background(), overflowScript(), func(_ context.Context, s index.Settings) (replay.Store, error) {
		var err error
		st, err = memindextest.NewStore(s)
		return st, err
	}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if n := st.Tenant("t").Overflowed(); n == 0 {
		t.Fatal("no chunk overflowed int8: the overflow path is untested")
	}
	if n := st.Tenant("t").BigTFs(); n < 4 {
		t.Fatalf("%d postings hold a tf beyond a byte: the escape is untested", n)
	}
}
