package eval

import (
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

// TestProfileLinesNameTheRerankMixes: a --profile's line gives its phrase
// proximity and document evidence weights.
func TestProfileLinesNameTheRerankMixes(t *testing.T) {
	p := retrieval.ServicePolicy()
	p.RerankDoc = 0.3
	rep := Report{Pipelines: []PipelineInfo{{Name: "rd30", Mode: Hybrid, Policy: policyInfo(p)}}}
	lines := profileLines(rep)
	if len(lines) != 1 || !strings.Contains(lines[0], "proximity 0.25, doc 0.3,") {
		t.Fatalf("profile lines %q: want rd30's with proximity 0.25, doc 0.3", lines)
	}
}
