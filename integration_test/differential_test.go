package integration_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/replay/replaygen"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

var diffScripts = flag.Int("diff-scripts", 200, "randomized scripts the differential test runs")

// runMemory runs a script on a fresh reference store.
func runMemory(t *testing.T, script []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	err := replay.Run(context.Background(), script, func(_ context.Context, s index.Settings) (replay.Store, error) {
		return memory.New(s)
	}, &out)
	if err != nil {
		t.Fatalf("memory replay: %v", err)
	}
	return out.Bytes()
}

// runPostgres runs a script on the Postgres store at dbURL after dropping
// every tenant, so each script starts from an empty index.
func runPostgres(t *testing.T, dbURL string, script []byte) []byte {
	t.Helper()
	return runPostgresWith(t, dbURL, script, postgres.Options{})
}

// runPostgresWith runs a script like runPostgres with the store options
// opts (CacheBytes 0: every query ranked in SQL); AutoCreate is the
// script's.
func runPostgresWith(t *testing.T, dbURL string, script []byte, opts postgres.Options) []byte {
	t.Helper()
	execSQL(t, dbURL, `SELECT cordon.drop_tenant(name) FROM cordon.tenants`)
	var out bytes.Buffer
	var st *postgres.Store
	err := replay.Run(context.Background(), script, func(ctx context.Context, s index.Settings) (replay.Store, error) {
		var err error
		o := opts
		o.AutoCreate = &s
		st, err = postgres.Open(ctx, dbURL, o)
		return st, err
	}, &out)
	if err == nil && st != nil {
		// Whatever the script wrote, the column blocks hold exactly the
		// chunks of every tenant.
		for _, tenant := range queryStrings(t, dbURL, `SELECT name FROM cordon.tenants ORDER BY name`) {
			if verr := st.VerifyColumns(context.Background(), tenant); verr != nil {
				t.Errorf("column blocks: %v", verr)
			}
		}
	}
	if st != nil {
		st.Close()
	}
	if err != nil {
		t.Fatalf("postgres replay: %v", err)
	}
	return out.Bytes()
}

func migrated(t testing.TB) string {
	t.Helper()
	dbURL := newDatabase(t)
	if _, err := migrate.Up(context.Background(), dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dbURL
}

// TestDifferentialRandomScripts runs randomized replay scripts against both
// stores and requires byte-identical JSON Lines: same chunk ids and order, same
// counters, every float bit for bit (encoding/json writes the shortest
// representation that parses back to the same float64, so equal bytes mean
// equal bits).
func TestDifferentialRandomScripts(t *testing.T) {
	dbURL := migrated(t)
	n := *diffScripts
	if testing.Short() {
		n = 30
	}
	failures := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		script := replaygen.Generate(seed, 40)
		want := runMemory(t, script)
		got := runPostgres(t, dbURL, script)
		// Every other script also runs through the in-memory query path,
		// which brings its cache up to date from the change log between
		// the script's writes and reads.
		if seed%2 == 0 {
			if cached := runPostgresWith(t, dbURL, script, postgres.Options{CacheBytes: 1 << 30}); !bytes.Equal(cached, want) {
				t.Errorf("seed %d: the cached query path differs from the reference\n%s", seed, firstDiff(want, cached))
			}
		}
		// Every third script is also ranked in SQL from the chunks table,
		// as a tenant whose column blocks are not built yet is.
		if seed%3 == 0 {
			if scanned := runPostgresWith(t, dbURL, script, postgres.Options{ChunkScan: true}); !bytes.Equal(scanned, want) {
				t.Errorf("seed %d: the SQL path over the chunks table differs from the reference\n%s", seed, firstDiff(want, scanned))
			}
		}
		// Every fourth script loads its tenants in the background, as
		// 'cordon serve' does: queries are answered in SQL until a load
		// is in, with writes racing the loads.
		if seed%4 == 1 {
			opts := postgres.Options{CacheBytes: 1 << 30, CacheLoadInBackground: true}
			if cached := runPostgresWith(t, dbURL, script, opts); !bytes.Equal(cached, want) {
				t.Errorf("seed %d: the cached query path with background loads differs from the reference\n%s", seed, firstDiff(want, cached))
			}
		}
		if !bytes.Equal(got, want) {
			failures++
			path := filepath.Join(t.TempDir(), fmt.Sprintf("seed-%d.json", seed))
			_ = os.WriteFile(path, script, 0o644)
			t.Errorf("seed %d: postgres output differs from the reference (script %s)\n%s", seed, path, firstDiff(want, got))
			if failures >= 3 {
				t.Fatalf("stopping after %d differing scripts", failures)
			}
		}
	}
	t.Logf("%d randomized scripts compared byte for byte", n)
}

// TestDifferentialGoldenScripts replays the committed golden scripts on
// Postgres and compares with the reference's committed output.
func TestDifferentialGoldenScripts(t *testing.T) {
	dbURL := migrated(t)
	scripts, _ := filepath.Glob("../testdata/replay/*.json")
	if len(scripts) == 0 {
		t.Fatal("no golden scripts in ../testdata/replay")
	}
	for _, path := range scripts {
		t.Run(filepath.Base(path), func(t *testing.T) {
			script, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := runMemory(t, script)
			for _, opts := range []postgres.Options{{}, {ChunkScan: true}, {CacheBytes: 1 << 30}, {CacheBytes: 1 << 30, CacheLoadInBackground: true}} {
				got := runPostgresWith(t, dbURL, script, opts)
				if !bytes.Equal(got, want) {
					t.Errorf("postgres output (cache budget %d, background loads %v, chunk scan %v) differs from the reference\n%s",
						opts.CacheBytes, opts.CacheLoadInBackground, opts.ChunkScan, firstDiff(want, got))
				}
			}
		})
	}
}

func firstDiff(want, got []byte) string {
	wl := bytes.Split(want, []byte("\n"))
	gl := bytes.Split(got, []byte("\n"))
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return fmt.Sprintf("line %d:\n want %s\n  got %s", i+1, w, g)
		}
	}
	return "(equal)"
}
