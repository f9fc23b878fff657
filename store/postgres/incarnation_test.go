package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

// resetReference gives the fixture an empty reference store: the tenant
// was dropped in the database.
func (f *cacheFixture) resetReference(settings index.Settings) {
	f.t.Helper()
	ref, err := memory.New(settings)
	if err != nil {
		f.t.Fatal(err)
	}
	f.ref = ref
}

// hugeText is one document of about words words, each distinct enough that
// its chunks' terms and texts take far more memory than the chunk count
// alone suggests.
func hugeText(words int) string {
	var b strings.Builder
	for i := range words {
		fmt.Fprintf(&b, "ledgerword%07d ", i)
	}
	return b.String()
}

// TestCacheDroppedTenantNeverServed: a tenant cached by a serving store,
// dropped by another process (the CLI) and created again, is never answered
// from the old tenant's index, whatever path the cache takes next: a new
// tenant too big for the budget by its chunk count, one whose chunk count
// fits but whose bytes do not, one whose version passes the old one, and
// one whose statistics scope changed. Every answer is the reference's
// (the new tenant only), byte for byte.
func TestCacheDroppedTenantNeverServed(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// refill writes the new incarnation's documents.
		refill func(f *cacheFixture, budget int64)
		scope  bm25.Scope
	}{
		{"too big by chunk count", func(f *cacheFixture, budget int64) {
			n := int(budget/bytesPerChunk(index.DefaultSettings().Dims, 0)) + 8
			f.put(cordontype.Document{Tenant: "t", DocID: "huge", Text: hugeText(n * index.DefaultSettings().Chunking.MaxWords), Classification: cordontype.Public})
		}, ""},
		{"too big by bytes", func(f *cacheFixture, budget int64) {
			n := int(budget/bytesPerChunk(index.DefaultSettings().Dims, 0)) / 2
			f.put(cordontype.Document{Tenant: "t", DocID: "huge", Text: hugeText(n * index.DefaultSettings().Chunking.MaxWords / 2), Classification: cordontype.Public})
		}, ""},
		{"version passes the old one", func(f *cacheFixture, _ int64) {
			for i := range 45 {
				f.put(cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("n%02d", i), Text: fmt.Sprintf("ledger entry %d of the new tenant", i), Classification: cordontype.Public})
			}
			for i := range 30 {
				f.delete("t", fmt.Sprintf("n%02d", i))
			}
		}, ""},
		{"statistics scope changed", func(f *cacheFixture, _ int64) {
			f.put(cordontype.Document{Tenant: "t", DocID: "n0", Text: "ledger entry of the new tenant", Classification: cordontype.Public})
		}, bm25.ScopeTenant},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newCacheFixture(t)
			for i := range 40 {
				f.put(cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("old%02d", i),
					Text: fmt.Sprintf("erasedsecret ledger %d: account closed by request", i), Classification: cordontype.Public})
			}
			probe := f.open(Options{CacheBytes: 1 << 30})
			f.check("probe", probe, cacheQuery("t", "erasedsecret ledger"))
			budget := 2 * probe.CacheStats().Bytes
			for _, background := range []bool{true, false} {
				t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
					parent := f.t
					f.t = t
					defer func() { f.t = parent }()
					s := f.open(Options{CacheBytes: budget, CacheLoadInBackground: background})
					q := cacheQuery("t", "erasedsecret ledger")
					for i := range 2 {
						f.check(fmt.Sprintf("old tenant, query %d", i), s, q)
						waitLoads(t, s)
					}
					if st := s.CacheStats(); st.MemoryAnswers == 0 {
						t.Fatalf("%+v: the old tenant was never answered from memory", st)
					}
					if _, err := f.write.DropTenant(ctx, "t"); err != nil {
						t.Fatal(err)
					}
					settings := index.DefaultSettings()
					if tc.scope != "" {
						settings.Statistics = tc.scope
						if _, err := f.write.CreateTenant(ctx, "t", settings); err != nil {
							t.Fatal(err)
						}
					}
					f.resetReference(settings)
					tc.refill(f, budget)
					for i := range 6 {
						f.check(fmt.Sprintf("new tenant, query %d", i), s, q)
						waitLoads(t, s)
					}
				})
				// The next run starts from the old tenant again.
				if _, err := f.write.DropTenant(ctx, "t"); err != nil {
					t.Fatal(err)
				}
				f.resetReference(index.DefaultSettings())
				for i := range 40 {
					f.put(cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("old%02d", i),
						Text: fmt.Sprintf("erasedsecret ledger %d: account closed by request", i), Classification: cordontype.Public})
				}
			}
		})
	}
}

// TestCacheIncarnationsUnderConcurrentReaders: tenants dropped, created
// again and written while readers query them, each reader on a store with a
// budget that holds some of them. Every document of generation g carries
// the word gen<g>; an answer may only carry one generation's words, one
// that was live at some moment during the query (never an earlier, dropped
// one). Between rounds, with no writer running, every store's answer is the
// SQL path's byte for byte.
func TestCacheIncarnationsUnderConcurrentReaders(t *testing.T) {
	f := newCacheFixture(t)
	ctx := context.Background()
	tenants := []string{"ra", "rb", "rc"}
	gen := make(map[string]*atomic.Int64)
	for _, tn := range tenants {
		gen[tn] = new(atomic.Int64)
	}
	write := func(rng *rand.Rand, tn string, g int64, docs int) bool {
		for i := range docs {
			text := fmt.Sprintf("gen%d shared ledger memo %d about %s", g, rng.IntN(50), tn)
			if rng.IntN(4) == 0 {
				for j := range 300 + rng.IntN(600) { // several chunks, each starting with the generation
					text += fmt.Sprintf(" gen%dx%d", g, j)
				}
			}
			doc := cordontype.Document{Tenant: tn, DocID: fmt.Sprintf("d%02d", i), Text: text, Classification: cordontype.Public}
			if _, err := f.write.Put(ctx, doc); err != nil {
				t.Error(err)
				return false
			}
		}
		return true
	}
	rng := rand.New(rand.NewPCG(42, 1))
	for _, tn := range tenants {
		if !write(rng, tn, 0, 20) {
			return
		}
	}
	probe := f.open(Options{CacheBytes: 1 << 30})
	for _, tn := range tenants {
		if _, err := retrieval.New(probe).Retrieve(ctx, cacheQuery(tn, "shared ledger")); err != nil {
			t.Fatal(err)
		}
	}
	waitLoads(t, probe)
	one := probe.CacheStats().Bytes / int64(len(tenants))
	stores := []*Store{
		f.open(Options{CacheBytes: 1 << 30, CacheLoadInBackground: true}),
		f.open(Options{CacheBytes: 2 * one, CacheLoadInBackground: true, evictMinIdle: -1}),
		f.open(Options{CacheBytes: one / 2, CacheLoadInBackground: true}),
		f.open(Options{CacheBytes: 2 * one}),
	}
	answer := func(s *Store, tn string) (string, []int64) {
		r, err := retrieval.New(s).Retrieve(ctx, cacheQuery(tn, "shared ledger memo gen0 gen1 gen2 gen3 gen4 gen5 gen6 gen7 gen8 gen9"))
		if err != nil {
			t.Error(err)
			return "", nil
		}
		var gens []int64
		for _, c := range r.Chunks {
			var g int64
			if _, err := fmt.Sscanf(c.Chunk.Text, "gen%d", &g); err != nil {
				t.Errorf("chunk %s: %q has no generation", c.Chunk.ChunkID, c.Chunk.Text)
			}
			gens = append(gens, g)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), gens
	}
	const rounds = 6
	for round := 1; round <= rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for si, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					tn := tenants[(si+i)%len(tenants)]
					lo := gen[tn].Load()
					_, gens := answer(s, tn)
					hi := gen[tn].Load()
					for _, g := range gens {
						if g < lo || g > hi || g != gens[0] {
							t.Errorf("round %d store %d tenant %s: an answer carries %v, want one generation within gen%d..gen%d", round, si, tn, gens, lo, hi)
							return
						}
					}
				}
			}()
		}
		func() {
			defer func() {
				time.Sleep(20 * time.Millisecond)
				close(stop)
				wg.Wait()
			}()
			for _, tn := range tenants {
				if rng.IntN(3) == 0 {
					if !write(rng, tn, gen[tn].Load(), 5+rng.IntN(20)) { // same incarnation, more writes
						return
					}
					continue
				}
				if _, err := f.write.DropTenant(ctx, tn); err != nil {
					t.Error(err)
					return
				}
				g := gen[tn].Load() + 1
				// Readers may now see the new generation, or the tenant absent.
				gen[tn].Store(g)
				if !write(rng, tn, g, 5+rng.IntN(30)) {
					return
				}
			}
		}()
		if t.Failed() {
			return
		}
		for _, s := range stores {
			waitLoads(t, s)
		}
		for _, tn := range tenants {
			want, _ := answer(f.sql, tn)
			for si, s := range stores {
				for range 2 { // the second after any load the first started
					if got, _ := answer(s, tn); got != want {
						t.Fatalf("round %d tenant %s: store %d answered\n  %s\nwant (SQL path)\n  %s", round, tn, si, got, want)
					}
					waitLoads(t, s)
				}
			}
		}
	}
}

// TestCacheTenantFarBehindComesBack: a tenant alone in a budget that holds
// its index but not two copies of it, more than maxInlineChanges documents
// behind, is loaded again in the background (its stale index gives its
// bytes to the new one, though the query that started the load has just
// used it): the next answers come from memory, with the reference's
// answers throughout, and no load fails.
func TestCacheTenantFarBehindComesBack(t *testing.T) {
	f := newCacheFixture(t)
	const docs = maxInlineChanges + 44
	text := func(round, i int) string {
		return fmt.Sprintf("wire hold %d release notes round %d payment review %d", i, round, i%7)
	}
	for i := range docs {
		f.put(cordontype.Document{Tenant: "behind", DocID: fmt.Sprintf("d%03d", i), Text: text(0, i), Classification: cordontype.Public})
	}
	probe := f.open(Options{CacheBytes: 1 << 30})
	q := cacheQuery("behind", "wire hold release round")
	f.check("probe", probe, q)
	one := probe.CacheStats().Bytes
	s := f.open(Options{CacheBytes: one + one/2, CacheLoadInBackground: true})
	f.check("first query", s, q)
	waitLoads(t, s)
	f.check("loaded", s, q)
	before := s.CacheStats()
	if before.Loads != 1 || before.MemoryAnswers != 1 {
		t.Fatalf("%+v: want one load and the second answer from memory", before)
	}
	for i := range docs { // every document replaced: more than the inline limit
		f.put(cordontype.Document{Tenant: "behind", DocID: fmt.Sprintf("d%03d", i), Text: text(1, i), Classification: cordontype.Public})
	}
	f.check("far behind", s, q) // in SQL; starts a load
	waitLoads(t, s)
	for i := range 3 {
		f.check(fmt.Sprintf("after the load, query %d", i), s, q)
	}
	st := s.CacheStats()
	if st.LoadFailures != 0 || st.Loads != 2 || st.MemoryAnswers != before.MemoryAnswers+3 || st.PeakBytes > st.Budget {
		t.Fatalf("%+v: want a second load, no failure, the last three answers from memory, never more than the budget", st)
	}
}
