package memindex_test

import (
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/replay/replaygen"
)

// TestMatchesReference runs randomized replay scripts on the reference store
// and on memindex and requires byte-identical output.
func TestMatchesReference(t *testing.T) {
	n := 500
	if testing.Short() {
		n = 200
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		compare(t, fmt.Sprintf("seed %d", seed), replaygen.Generate(seed, 60))
	}
}
