package memindex

import (
	"bytes"
	"context"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/replay/replaygen"
	"github.com/cordon-rag/cordon/store/memory"
)

// TestCompactionKeepsResults lowers the compaction threshold so that the
// randomized scripts compact often, and compares with the reference.
func TestCompactionKeepsResults(t *testing.T) {
	old := compactMinDead
	compactMinDead = 1
	t.Cleanup(func() { compactMinDead = old })
	compactions := 0
	for seed := uint64(1000); seed < 1300; seed++ {
		script := replaygen.Generate(seed, 60)
		var want, got bytes.Buffer
		if err := replay.Run(context.Background(), script, func(_ context.Context, s index.Settings) (replay.Store, error) { return memory.New(s) }, &want); err != nil {
			t.Fatal(err)
		}
		var st *Store
		if err := replay.Run(context.Background(), script, func(_ context.Context, s index.Settings) (replay.Store, error) {
			var err error
			st, err = NewStore(s)
			return st, err
		}, &got); err != nil {
			t.Fatal(err)
		}
		for _, x := range st.tenants {
			compactions += x.compactions
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Fatalf("seed %d: with compaction, memindex differs from the reference\nwant %s\ngot  %s", seed, want.Bytes(), got.Bytes())
		}
	}
	if compactions == 0 {
		t.Fatal("no tenant index was ever compacted: the test exercised nothing")
	}
}
