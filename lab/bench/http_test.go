package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

func TestParseMix(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // Mix.String; "" for an error
		wantErr string
	}{
		{name: "default", in: "default", want: DefaultMix},
		{name: "subset, any order", in: "put=1, retrieve=3", want: "retrieve=3,put=1"},
		{name: "unknown operation", in: "retrieve=1,delete=1", wantErr: "unknown operation"},
		{name: "no weight", in: "retrieve", wantErr: "OP=WEIGHT"},
		{name: "negative weight", in: "retrieve=-1", wantErr: "integer >= 0"},
		{name: "twice", in: "retrieve=1,retrieve=2", wantErr: "given twice"},
		{name: "all zero", in: "retrieve=0,put=0", wantErr: "sum to 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMix(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseMix(%q) = %v, %v; want an error mentioning %q", tt.in, m, err, tt.wantErr)
				}
				return
			}
			if err != nil || m.String() != tt.want {
				t.Fatalf("ParseMix(%q) = %q, %v; want %q", tt.in, m.String(), err, tt.want)
			}
		})
	}
}

// A schedule sends each operation in proportion to its weight, interleaved,
// and the same sequence every time.
func TestMixSchedule(t *testing.T) {
	m, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	ops := m.schedule(40)
	count := map[string]int{}
	for _, op := range ops {
		count[op]++
	}
	want := map[string]int{OpRetrieve: 32, OpGround: 4, OpAssemble: 2, OpPut: 2}
	for op, n := range want {
		if count[op] != n {
			t.Errorf("%s: %d of 40 requests, want %d (schedule %v)", op, count[op], n, ops)
		}
	}
	if first := ops[:20]; slices.Index(first, OpPut) < 0 || slices.Index(first, OpGround) < 0 {
		t.Errorf("the first half has no put or no ground: the operations are not interleaved: %v", first)
	}
	if again := m.schedule(40); !slices.Equal(ops, again) {
		t.Errorf("two schedules differ:\n%v\n%v", ops, again)
	}
}

// The service path answers every query with exactly the store's top-10
// list: the HTTP request carries the bench policy and the token the query's
// principal.
// TestHTTPCloseReportsServerFailure: a server process that did not shut
// down cleanly (killed here) makes Close fail, so the bench does not report
// a run whose server failed.
func TestHTTPCloseReportsServerFailure(t *testing.T) {
	h, err := newHTTP(context.Background(), migratedDatabase(t), 2, 1, 16<<20, true, "")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := h.srv.(*childServer)
	if !ok {
		t.Fatalf("the server is a %T, want a process of its own", h.srv)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err == nil || !strings.Contains(err.Error(), "the http server") {
		t.Fatalf("Close after the server process was killed: %v, want its failure", err)
	}
}

func TestHTTPMatchesStore(t *testing.T) {
	ctx := context.Background()
	dbURL := migratedDatabase(t)
	g, err := NewGenerator(Config{Seed: 3, Chunks: 400, Tenants: 3})
	if err != nil {
		t.Fatal(err)
	}
	queries := g.Queries(40)
	store, err := newCordon(ctx, dbURL, 4, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Ingest(ctx, g, 2, 1, func(int64) {}); err != nil {
		t.Fatal(err)
	}
	for _, process := range []bool{false, true} {
		t.Run(fmt.Sprintf("process=%t", process), func(t *testing.T) {
			h, err := newHTTP(ctx, dbURL, 4, 2, 64<<20, process, "")
			if err != nil {
				t.Fatal(err)
			}
			// The server shuts down cleanly, in its own process or not.
			defer func() {
				if err := h.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			if h.srv.Separate() != process {
				t.Fatalf("the server runs apart: %t, want %t", h.srv.Separate(), process)
			}
			if own, err := h.Ingest(ctx, g, 2, 1, func(int64) {}); own || err != nil {
				t.Fatalf("http Ingest = %v, %v; want false, nil (it serves cordon's tenants)", own, err)
			}
			st0 := h.stats()
			nonEmpty := 0
			for i, q := range queries {
				want, err := store.Query(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := h.Query(ctx, q)
				if err != nil {
					t.Fatalf("query %d over HTTP: %v", i, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("query %d (%q, tenant %s): HTTP %v, store %v", i, q.Text, q.Principal.Tenant, got, want)
				}
				if len(want) > 0 {
					nonEmpty++
				}
			}
			st1 := h.stats()
			if h.statsErr != nil {
				t.Fatal(h.statsErr)
			}
			// One client, one kept-alive connection for every query.
			if n := st1.Connections; n != 1 {
				t.Errorf("the server accepted %d connections for %d queries in a row, want 1 (keep-alive)", n, len(queries))
			}
			if n := st1.Audit.Records - st0.Audit.Records; n != int64(len(queries)) {
				t.Errorf("the server audited %d records for %d queries", n, len(queries))
			}
			if process && st1.CPU <= st0.CPU {
				t.Errorf("the server process's CPU went from %v to %v over %d queries", st0.CPU, st1.CPU, len(queries))
			}
			if nonEmpty < len(queries)/2 {
				t.Errorf("only %d of %d queries found anything: the comparison proves little", nonEmpty, len(queries))
			}
		})
	}
}

// testDatabase is the server of CORDON_TEST_DATABASE_URL; without it a test
// fails in CI (or with CORDON_REQUIRE_DB) and skips loudly elsewhere.
func testDatabase(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("CORDON_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" {
			tb.Fatal("PostgreSQL is required here: set CORDON_TEST_DATABASE_URL")
		}
		tb.Skip("SKIPPING: CORDON_TEST_DATABASE_URL is not set")
	}
	return base
}

// migratedDatabase creates a database on the test server, migrated, and
// drops it when the test ends.
func migratedDatabase(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	dbURL, drop, err := createDatabase(ctx, testDatabase(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(drop)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		tb.Fatal(err)
	}
	return dbURL
}

// BenchmarkRetrieve runs the bench's queries over 10,000 chunks in one
// tenant through the store path (cordon) and the service path (http, the
// server in this process, client included) with 1 and 8 clients, on the
// in-memory query path. Beside ns/op it reports the CPU per query of this
// process (cpu-ms/op: clients, server, store) and of the PostgreSQL
// backends of its database (db-cpu-ms/op), the measure on a shared machine;
// every HTTP list must equal the store's. With -cpuprofile and
// -memprofile, -bench Retrieve/http profiles the service path alone:
//
//	go test ./lab/bench/ -run '^$' -bench Retrieve -benchtime 3000x
func BenchmarkRetrieve(b *testing.B) {
	ctx := context.Background()
	dbURL := migratedDatabase(b)
	g, err := NewGenerator(Config{Seed: 1, Chunks: 10000, Tenants: 1})
	if err != nil {
		b.Fatal(err)
	}
	queries := g.Queries(2000)
	const conns, cache = 16, 2 << 30
	store, err := newCordon(ctx, dbURL, conns, cache)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.Ingest(ctx, g, 2, 50, func(int64) {}); err != nil {
		store.Close()
		b.Fatal(err)
	}
	want := make([][]string, len(queries))
	for i, q := range queries {
		if want[i], err = store.Query(ctx, q); err != nil {
			store.Close()
			b.Fatal(err)
		}
	}
	run := func(name string, sys System, st interface{ CacheStats() postgres.CacheStats }) {
		// The first query starts the tenant's load; answers wait for it.
		if _, err := sys.Query(ctx, queries[0]); err != nil {
			b.Fatal(err)
		}
		for st.CacheStats().Loading > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/%dclients", name, clients), func(b *testing.B) {
				qs := make([]Query, b.N)
				for i := range qs {
					qs[i] = queries[i%len(queries)]
				}
				cpu0 := readCPU(databaseName(dbURL))
				b.ResetTimer()
				_, lists, _, err := runQueries(ctx, name, sys, qs, clients, &progress{})
				b.StopTimer()
				cpu1 := readCPU(databaseName(dbURL))
				if err != nil {
					b.Fatal(err)
				}
				for i, l := range lists {
					if !slices.Equal(l, want[i%len(want)]) {
						b.Fatalf("query %d: %s %v, store %v", i, name, l, want[i%len(want)])
					}
				}
				b.ReportMetric(ms(cpu1.process-cpu0.process)/float64(b.N), "cpu-ms/op")
				if cpu0.dbSeen && cpu1.dbSeen {
					b.ReportMetric(ms(cpu1.db-cpu0.db)/float64(b.N), "db-cpu-ms/op")
				}
			})
		}
	}
	run(SystemCordon, store, store.st)
	// As in cordon-lab bench, one system at a time: the store's in-memory
	// index would otherwise stay in the heap the HTTP run's collections scan.
	store.Close()
	runtime.GC()
	h, err := newHTTP(ctx, dbURL, conns, 8, cache, false, "")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			b.Error(err)
		}
	}()
	run(SystemHTTP, h, h)
}
