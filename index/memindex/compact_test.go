package memindex

import (
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/replay/replaygen"
)

// TestCompactionKeepsResults lowers the compaction threshold so that the
// randomized scripts compact often, and compares with the reference.
func TestCompactionKeepsResults(t *testing.T) {
	old := compactMinDead
	compactMinDead = 1
	t.Cleanup(func() { compactMinDead = old })
	compactions := 0
	for seed := uint64(1000); seed < 1300; seed++ {
		st := compare(t, fmt.Sprintf("seed %d, with compaction", seed), replaygen.Generate(seed, 60))
		for _, x := range st.tenants {
			compactions += x.compactions
		}
	}
	if compactions == 0 {
		t.Fatal("no tenant index was ever compacted: the test exercised nothing")
	}
}
