package memindex_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/replay/replaygen"
	"github.com/cordon-rag/cordon/store/memory"
)

func run(t *testing.T, script []byte, open replay.OpenFunc) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := replay.Run(context.Background(), script, open, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestMatchesReference runs randomized replay scripts on the reference store
// and on memindex and requires byte-identical output.
func TestMatchesReference(t *testing.T) {
	ref := func(_ context.Context, s index.Settings) (replay.Store, error) { return memory.New(s) }
	fast := func(_ context.Context, s index.Settings) (replay.Store, error) { return memindex.NewStore(s) }
	n := 500
	if testing.Short() {
		n = 200
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		script := replaygen.Generate(seed, 60)
		want, got := run(t, script, ref), run(t, script, fast)
		if !bytes.Equal(want, got) {
			t.Fatalf("seed %d: memindex differs from the reference\nwant %s\ngot  %s", seed, want, got)
		}
	}
}
