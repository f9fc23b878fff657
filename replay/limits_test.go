package replay_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cordon-rag/cordon/replay/replaygen"
)

// TestBeyondServiceLimits: a script valid under SPEC section 9 whose
// policies ask for more than the HTTP service's cost limits (top_n,
// rerank_depth and limit 100000, prf_docs and prf_terms 1000) runs without
// an error, with the contract's results: every chunk of a corpus larger
// than any limit is returned, the lexical ranking is reported to its last
// rank, and a top_n that cannot cut gives what top_n 100000 gives. The
// limits protect the service (docs/spec.md, section 5); a replay is an
// operator's tool and keeps the upstream contract.
func TestBeyondServiceLimits(t *testing.T) {
	const docs = 450 // more than the largest default limit, limit's 400
	out := runScript(t, replaygen.Wide(docs))
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(lines) != docs+4 {
		t.Fatalf("got %d output lines, want %d", len(lines), docs+4)
	}
	retrieves := lines[docs:]
	for i, line := range retrieves {
		var got struct {
			Op      string  `json:"op"`
			Error   *string `json:"error"`
			Results []struct {
				BM25Rank *int `json:"bm25_rank"`
			} `json:"results"`
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("retrieve %d: %v", i+1, err)
		}
		if got.Error != nil {
			t.Fatalf("retrieve %d: got error %q, want results (SPEC section 9 allows these values)", i+1, *got.Error)
		}
		if len(got.Results) != docs {
			t.Fatalf("retrieve %d: got %d results, want all %d chunks", i+1, len(got.Results), docs)
		}
		last := 0
		for _, r := range got.Results {
			if r.BM25Rank != nil {
				last = max(last, *r.BM25Rank)
			}
		}
		if last != docs {
			t.Errorf("retrieve %d: last bm25_rank %d, want %d (no ranking cut at a service limit)", i+1, last, docs)
		}
	}
	if !bytes.Equal(retrieves[0], retrieves[1]) {
		t.Errorf("top_n 100000 and top_n %d differ, want the same results:\n%s\n%s", docs, retrieves[0], retrieves[1])
	}
}
