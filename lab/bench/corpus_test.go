package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

func collect(t *testing.T, cfg Config) ([]cordontype.Document, []int) {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var docs []cordontype.Document
	var counts []int
	if err := g.Each(func(d cordontype.Document, n int) error {
		docs = append(docs, d)
		counts = append(counts, n)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return docs, counts
}

func TestGeneratorDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, Chunks: 2000, Tenants: 3}
	d1, _ := collect(t, cfg)
	d2, _ := collect(t, cfg)
	if !reflect.DeepEqual(d1, d2) {
		t.Fatal("same seed gave different corpora")
	}
	g1, _ := NewGenerator(cfg)
	g2, _ := NewGenerator(cfg)
	if q1, q2 := g1.Queries(200), g2.Queries(200); !reflect.DeepEqual(q1, q2) {
		t.Fatal("same seed gave different queries")
	}
	d3, _ := collect(t, Config{Seed: 8, Chunks: 2000, Tenants: 3})
	if reflect.DeepEqual(d1, d3) {
		t.Fatal("different seeds gave the same corpus")
	}
}

// The generator's chunk count must be the chunker's, exactly, and every
// document must be valid.
func TestGeneratorChunkCounts(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"one tenant", Config{Seed: 1, Chunks: 3000, Tenants: 1}},
		{"uneven tenants", Config{Seed: 2, Chunks: 1001, Tenants: 7}},
		{"one chunk each", Config{Seed: 3, Chunks: 50, Tenants: 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, counts := collect(t, tt.cfg)
			g, _ := NewGenerator(tt.cfg)
			perTenant := map[string]int{}
			total := 0
			for i, d := range docs {
				pcs, err := index.Prepare(&d, index.DefaultSettings())
				if err != nil {
					t.Fatalf("doc %s/%s: %v", d.Tenant, d.DocID, err)
				}
				if len(pcs) != counts[i] {
					t.Fatalf("doc %s/%s: got %d chunks, generator said %d", d.Tenant, d.DocID, len(pcs), counts[i])
				}
				perTenant[d.Tenant] += len(pcs)
				total += len(pcs)
			}
			if total != tt.cfg.Chunks {
				t.Errorf("got %d chunks, want %d", total, tt.cfg.Chunks)
			}
			for i := range tt.cfg.Tenants {
				if got, want := perTenant[g.TenantName(i)], g.TenantChunks(i); got != want {
					t.Errorf("tenant %d: got %d chunks, want %d", i, got, want)
				}
			}
		})
	}
}

func TestWindowsMatchesChunker(t *testing.T) {
	for _, n := range []int{1, 199, 200, 201, 360, 361, 999} {
		text := strings.Repeat("w ", n)
		pcs, err := chunk.Split(text, chunk.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := windows(n), len(pcs); got != want {
			t.Errorf("windows(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestQueriesShape(t *testing.T) {
	g, _ := NewGenerator(Config{Seed: 1, Chunks: 10_000, Tenants: 10})
	qs := g.Queries(500)
	withStale, withIdent := 0, 0
	tenants := map[string]bool{}
	for _, q := range qs {
		toks := analysis.Tokenize(q.Text)
		if n := len(strings.Fields(q.Text)); n < 2 || n > 8 {
			t.Fatalf("query %q has %d terms, want 2-8", q.Text, n)
		}
		if len(toks) == 0 {
			t.Fatalf("query %q has no tokens", q.Text)
		}
		if err := q.Principal.Validate(); err != nil {
			t.Fatal(err)
		}
		if q.MaxStaleTicks != nil {
			withStale++
		}
		if strings.ContainsAny(q.Text, "0123456789") {
			withIdent++
		}
		tenants[q.Principal.Tenant] = true
	}
	if withStale != 250 {
		t.Errorf("got %d queries with a freshness contract, want 250", withStale)
	}
	if withIdent < 100 || withIdent > 200 {
		t.Errorf("got %d queries with an identifier, want about 150", withIdent)
	}
	if len(tenants) != 10 {
		t.Errorf("queries reach %d tenants, want 10", len(tenants))
	}
}
