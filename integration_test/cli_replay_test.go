package integration_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/replay/replaygen"
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

// TestCLIReplayUnknownModel: a script whose config names a model no
// provider serves fails as a whole on both stores, alike: exit 1, nothing
// on standard output, the same error naming the model.
func TestCLIReplayUnknownModel(t *testing.T) {
	dbURL := newDatabase(t)
	script := filepath.Join(t.TempDir(), "model.json")
	body := `{"config": {"model": "all-minilm", "dims": 384}, "steps": [
		{"op": "put", "document": {"tenant": "um", "doc_id": "d", "text": "hello world", "classification": "public"}},
		{"op": "retrieve", "principal": {"tenant": "um", "clearance": "public"}, "query": "hello"}]}`
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, args := range [][]string{
		{"replay", script},
		{"replay", "--store", "postgres", "--database-url", dbURL, script},
		{"replay", "--store", "postgres", "--database-url", dbURL, "--cache-bytes", "100000000", script},
	} {
		code, stdout, stderr := runCLI(t, nil, args...)
		if code != 1 || len(stdout) != 0 {
			t.Fatalf("%v: exit %d, stdout %q; want exit 1 and no output", args, code, stdout)
		}
		if !strings.Contains(stderr, `embedding model not configured: "all-minilm"`) {
			t.Fatalf("%v: stderr %q does not name the unserved model", args, stderr)
		}
		msgs = append(msgs, stderr)
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Fatalf("the stores fail differently:\n%s\n%s\n%s", msgs[0], msgs[1], msgs[2])
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon.tenants`); n != 0 {
		t.Fatalf("%d tenants created by a replay that failed", n)
	}
}

// TestCLIReplayBeyondServiceLimits: 'cordon replay' keeps the upstream
// contract whatever the service's cost limits: a script whose policies ask
// for more than them (replaygen.Wide: top_n, rerank_depth and limit
// 100000, prf_docs and prf_terms 1000, over 450 chunks) runs without an
// error on --store memory, and --store postgres gives the same output
// through both query paths (replay.TestBeyondServiceLimits checks the
// memory store's results against the contract).
func TestCLIReplayBeyondServiceLimits(t *testing.T) {
	dbURL := newDatabase(t)
	const docs = 450
	script := filepath.Join(t.TempDir(), "wide.json")
	if err := os.WriteFile(script, replaygen.Wide(docs), 0o600); err != nil {
		t.Fatal(err)
	}
	want := cordonCLI(t, "replay", script)
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	if len(lines) != docs+4 {
		t.Fatalf("memory: %d output lines, want %d", len(lines), docs+4)
	}
	for i, line := range lines[docs:] {
		if bytes.Contains(line, []byte(`"error"`)) || !bytes.Contains(line, []byte(`"bm25_rank":450,`)) {
			t.Fatalf("memory: retrieve %d: %.300s, want results to bm25_rank %d", i+1, line, docs)
		}
	}
	for _, extra := range [][]string{{}, {"--cache-bytes", "0"}} {
		args := append([]string{"replay", "--store", "postgres", "--database-url", dbURL, "--reset", "--yes"}, extra...)
		if got := cordonCLI(t, append(args, script)...); !bytes.Equal(got, want) {
			t.Fatalf("%v: postgres output differs from memory\n%s", extra, firstDiff(want, got))
		}
	}
}
