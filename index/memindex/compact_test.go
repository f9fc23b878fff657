package memindex_test

import (
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/replay/replaygen"
)

// TestCompactionKeepsResults lowers the compaction threshold so that the
// randomized scripts compact often, and compares with the reference.
func TestCompactionKeepsResults(t *testing.T) {
	memindex.SetCompactMinDead(t, 1)
	compactions := 0
	for seed := uint64(1000); seed < 1300; seed++ {
		st := compare(t, fmt.Sprintf("seed %d, with compaction", seed), replaygen.Generate(seed, 60))
		compactions += sumTenants(st, (*memindex.Index).Compactions)
	}
	if compactions == 0 {
		t.Fatal("no tenant index was ever compacted: the test exercised nothing")
	}
	// Postings with tfs beyond a byte, moved by a compaction.
	st := compare(t, "overflow script, with compaction", overflowScript())
	if st.Tenant("t").Compactions() == 0 || st.Tenant("t").BigTFs() == 0 {
		t.Fatalf("%d compactions, %d tfs beyond a byte: the overflow script exercised too little", st.Tenant("t").Compactions(), st.Tenant("t").BigTFs())
	}
}

// TestLabelCountsKeepResults makes every posting list keep per-label-set
// counts from its first posting (and compacts often), so the entitled
// scope's df comes from the counts on every query, and compares with the
// reference on randomized scripts of both scopes.
func TestLabelCountsKeepResults(t *testing.T) {
	memindex.SetLabelCountsMin(t, 1)
	memindex.SetCompactMinDead(t, 1)
	counted := 0
	for seed := uint64(2000); seed < 2300; seed++ {
		st := compare(t, fmt.Sprintf("seed %d, label counts", seed), replaygen.Generate(seed, 60))
		counted += sumTenants(st, (*memindex.Index).LabelCounted)
	}
	if counted == 0 {
		t.Fatal("no posting list kept label counts: the test exercised nothing")
	}
}

// sumTenants adds up f over st's tenant indexes.
func sumTenants(st *memindextest.Store, f func(*memindex.Index) int) int {
	n := 0
	for _, tenant := range st.Tenants() {
		n += f(st.Tenant(tenant))
	}
	return n
}
