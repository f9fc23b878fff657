package labcli

import (
	"os"
	"testing"

	"github.com/cordon-rag/cordon/lab/bench"
)

// TestMain lets the test binary be the bench's http server process, which
// 'cordon-lab bench' starts by running its own executable again.
func TestMain(m *testing.M) {
	bench.ServeChildIfAsked()
	os.Exit(m.Run())
}
