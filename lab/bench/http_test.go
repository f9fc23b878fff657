package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
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
	h, err := newHTTP(ctx, dbURL, 4, 2, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if own, err := h.Ingest(ctx, g, 2, 1, func(int64) {}); own || err != nil {
		t.Fatalf("http Ingest = %v, %v; want false, nil (it serves cordon's tenants)", own, err)
	}
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
	// One client, one kept-alive connection for every query.
	if n := h.Connections(); n != 1 {
		t.Errorf("the server accepted %d connections for %d queries in a row, want 1 (keep-alive)", n, len(queries))
	}
	if nonEmpty < len(queries)/2 {
		t.Errorf("only %d of %d queries found anything: the comparison proves little", nonEmpty, len(queries))
	}
}
