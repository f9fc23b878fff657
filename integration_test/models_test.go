package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/replay/replaygen"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
)

// withModel rewrites a replay script's config to embed with model at dims.
func withModel(t *testing.T, script []byte, model string, dims int) []byte {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(script, &top); err != nil {
		t.Fatal(err)
	}
	cfg, _ := top["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["model"], cfg["dims"] = model, dims
	top["config"] = cfg
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runModelScripts replays randomized scripts whose tenants embed with the
// model reg serves as name, on the reference store, the memindex store and
// Postgres (SQL path, and every other script the in-memory query path), and
// requires byte-identical output.
func runModelScripts(t *testing.T, reg *embed.Registry, name string, dims, n int) {
	dbURL := migrated(t)
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(n); seed++ {
		script := withModel(t, replaygen.Generate(seed, 30), name, dims)
		var want bytes.Buffer
		if err := replay.Run(ctx, script, func(_ context.Context, s index.Settings) (replay.Store, error) {
			return memory.NewWithModels(s, reg)
		}, &want); err != nil {
			t.Fatalf("seed %d: memory replay: %v", seed, err)
		}
		if bytes.Contains(want.Bytes(), []byte(`"error"`)) && bytes.Contains(want.Bytes(), []byte("model")) {
			t.Fatalf("seed %d: the reference refused the model:\n%s", seed, want.Bytes())
		}
		var fast bytes.Buffer
		if err := replay.Run(ctx, script, func(_ context.Context, s index.Settings) (replay.Store, error) {
			return memindextest.NewStoreWithModels(s, reg)
		}, &fast); err != nil {
			t.Fatalf("seed %d: memindex replay: %v", seed, err)
		}
		if !bytes.Equal(fast.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: the memindex store differs from the reference\n%s", seed, firstDiff(want.Bytes(), fast.Bytes()))
		}
		for _, cache := range []int64{0, 1 << 30} {
			if cache > 0 && seed%2 == 1 {
				continue
			}
			execSQL(t, dbURL, `SELECT cordon.drop_tenant(name) FROM cordon.tenants`)
			var got bytes.Buffer
			var st *postgres.Store
			err := replay.Run(ctx, script, func(ctx context.Context, s index.Settings) (replay.Store, error) {
				var err error
				st, err = postgres.Open(ctx, dbURL, postgres.Options{AutoCreate: &s, CacheBytes: cache, Models: reg})
				return st, err
			}, &got)
			if st != nil {
				st.Close()
			}
			if err != nil {
				t.Fatalf("seed %d: postgres replay: %v", seed, err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("seed %d (cache %d): postgres output differs from the reference\n%s", seed, cache, firstDiff(want.Bytes(), got.Bytes()))
			}
		}
	}
}

// TestDifferentialModelScripts is the differential test with tenants whose
// dense side is an embedding model (a deterministic test model): the
// quantized vectors are stored and scored exactly alike everywhere.
func TestDifferentialModelScripts(t *testing.T) {
	toy := &embedtest.Toy{Dims: 48}
	runModelScripts(t, embedtest.Registry("toy-48", toy), "toy-48", 48, 20)
	if toy.Texts.Load() == 0 {
		t.Fatal("the model embedded nothing")
	}
}
