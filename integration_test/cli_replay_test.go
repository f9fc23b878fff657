package integration_test

import (
	"bytes"
	"testing"
)

// TestCLIReplayPostgresReset: 'cordon replay --store postgres --reset --yes' gives
// the memory store's output, run after run, through both query paths.
func TestCLIReplayPostgresReset(t *testing.T) {
	dbURL := newDatabase(t)
	script := "../testdata/replay/lifecycle.json"
	want := cordonCLI(t, "replay", script)
	// The default (an automatic budget, background loads), twice, then a
	// set budget and the SQL path.
	for i, extra := range [][]string{{}, {}, {"--cache-bytes", "100000000"}, {"--cache-bytes", "0"}} {
		args := append([]string{"replay", "--store", "postgres", "--database-url", dbURL, "--reset", "--yes"}, extra...)
		if got := cordonCLI(t, append(args, script)...); !bytes.Equal(got, want) {
			t.Fatalf("run %d (%v): postgres output differs from memory\n%s", i+1, extra, firstDiff(want, got))
		}
	}
}
