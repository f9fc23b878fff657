package replay_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/store/memory"
)

var update = flag.Bool("update", false, "rewrite ../testdata/replay/*.golden.jsonl from the current code (review every changed line against docs/spec.md)")

const goldenDir = "../testdata/replay"

func openMemory(_ context.Context, s index.Settings) (replay.Store, error) { return memory.New(s) }

func runScript(t *testing.T, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := replay.Run(context.Background(), data, openMemory, &out); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out.Bytes()
}

// TestGolden runs every ../testdata/replay/*.json script on the in-memory store
// and compares the JSON Lines with its .golden.jsonl byte for byte. Each script
// runs twice on fresh stores: identical inputs must give identical bytes.
func TestGolden(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 {
		t.Fatalf("no replay scripts in %s", goldenDir)
	}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := runScript(t, data)
			if again := runScript(t, data); !bytes.Equal(again, got) {
				t.Fatalf("second run differs from the first:\n%s", firstDiff(again, got))
			}
			checkLines(t, data, got)
			golden := strings.TrimSuffix(path, ".json") + ".golden.jsonl"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s:\n%s", golden, firstDiff(got, want))
			}
		})
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g := strings.Split(string(got), "\n")
	w := strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\ngot  " + gl + "\nwant " + wl
		}
	}
	return "(no differing line)"
}
