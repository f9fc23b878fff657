package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// cacheFixture is a database with a writer, the reference store holding
// the same documents, and a store on the SQL path only.
type cacheFixture struct {
	t     *testing.T
	url   string
	write *Store
	sql   *Store
	ref   *memory.Store
	// models, when set, embeds the queries of tenants on another model
	// than hashing.
	models *embed.Registry
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	url := testDatabase(t)
	settings := index.DefaultSettings()
	f := &cacheFixture{t: t, url: url}
	f.write = f.open(Options{AutoCreate: &settings})
	f.sql = f.open(Options{})
	ref, err := memory.New(settings)
	if err != nil {
		t.Fatal(err)
	}
	f.ref = ref
	return f
}

func (f *cacheFixture) open(opts Options) *Store {
	f.t.Helper()
	s, err := Open(context.Background(), f.url, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// put writes doc to the database and the reference store.
func (f *cacheFixture) put(doc cordontype.Document) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.write.Put(ctx, doc); err != nil {
		f.t.Fatalf("put %s/%s: %v", doc.Tenant, doc.DocID, err)
	}
	if _, err := f.ref.Put(ctx, doc); err != nil {
		f.t.Fatalf("reference put %s/%s: %v", doc.Tenant, doc.DocID, err)
	}
}

func (f *cacheFixture) delete(tenant, doc string) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.write.Delete(ctx, tenant, doc); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.ref.Delete(ctx, tenant, doc); err != nil {
		f.t.Fatal(err)
	}
}

func cacheQuery(tenant, text string) retrieval.Query {
	return retrieval.Query{
		Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}},
		Text:      text, NowTick: 100, Policy: retrieval.DefaultPolicy(),
	}
}

// check retrieves q from s and requires the reference store's answer and
// the SQL path's, byte for byte.
func (f *cacheFixture) check(step string, s *Store, q retrieval.Query) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := func(name string, st retrieval.Store) string {
		f.t.Helper()
		r, err := retrieval.New(st).Retrieve(ctx, q)
		if err != nil {
			f.t.Fatalf("%s: %s: %v", step, name, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			f.t.Fatal(err)
		}
		return string(b)
	}
	want := js("reference", f.ref)
	if got := js("cached store", s); got != want {
		f.t.Fatalf("%s: the cached store answered\n  %s\nwant (reference)\n  %s", step, got, want)
	}
	if got := js("SQL path", f.sql); got != want {
		f.t.Fatalf("%s: the SQL path answered\n  %s\nwant (reference)\n  %s", step, got, want)
	}
}

// waitLoads waits until s has no background load in progress.
func waitLoads(t *testing.T, s *Store) CacheStats {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := s.CacheStats()
		if st.Loading == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("background loads still running after a minute: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fillTenant(f *cacheFixture, tenant string, docs int) {
	for i := range docs {
		f.put(cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("d%03d", i),
			Text:           fmt.Sprintf("wire hold number %d for %s with release notes and payment review %d", i, tenant, i%7),
			Classification: cordontype.Classification(i % 4)})
	}
}

// TestCacheBudgetNeverExceeded: tenants queried in turn, and at once, under
// a budget that holds about two of them: the accounted bytes never exceed
// the budget at any moment (PeakBytes), least recently used tenants are
// evicted, and every answer is the reference's.
func TestCacheBudgetNeverExceeded(t *testing.T) {
	f := newCacheFixture(t)
	const tenants = 6
	for i := range tenants {
		fillTenant(f, fmt.Sprintf("t%d", i), 12)
	}
	// One tenant's accounted size, from a store with room for all.
	probe := f.open(Options{CacheBytes: 1 << 30})
	f.check("probe", probe, cacheQuery("t0", "wire release"))
	one := probe.CacheStats().Bytes
	if one <= 0 {
		t.Fatalf("probe: %d bytes cached, want some", one)
	}
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			budget := 2*one + one/2
			// Any tenant no query reads may be evicted (evictMinIdle is
			// TestCacheDoesNotThrash's).
			s := f.open(Options{CacheBytes: budget, CacheLoadInBackground: background, evictMinIdle: -1})
			for round := range 3 {
				for i := range tenants {
					f.check(fmt.Sprintf("round %d tenant %d", round, i), s, cacheQuery(fmt.Sprintf("t%d", i), "wire release payment"))
					if background {
						waitLoads(t, s)
					}
					if st := s.CacheStats(); st.Bytes > st.Budget || st.PeakBytes > st.Budget {
						t.Fatalf("round %d tenant %d: %+v: more than the budget", round, i, st)
					}
				}
			}
			var wg sync.WaitGroup
			for i := range 4 * tenants {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q := cacheQuery(fmt.Sprintf("t%d", i%tenants), "hold review")
					if _, err := retrieval.New(s).Retrieve(context.Background(), q); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			st := waitLoads(t, s)
			if st.PeakBytes > st.Budget || st.Bytes > st.Budget {
				t.Fatalf("%+v: more than the budget", st)
			}
			if st.Evictions == 0 || st.Tenants > 2 || st.MemoryAnswers == 0 {
				t.Fatalf("%+v: want evictions, at most two tenants held, some answers from memory", st)
			}
		})
	}
}

// TestCacheTenantLargerThanBudget: a tenant whose estimate fits but whose
// texts do not is never held: its load gives up within the budget, it is
// ranked in SQL with the reference's answer, and it is not loaded again
// until it shrinks.
func TestCacheTenantLargerThanBudget(t *testing.T) {
	f := newCacheFixture(t)
	long := strings.Repeat("settlement ledger entries reconciled ", 40)
	for i := range 10 {
		f.put(cordontype.Document{Tenant: "big", DocID: fmt.Sprintf("d%d", i), Text: fmt.Sprintf("wire hold %d %s", i, long), Classification: cordontype.Public})
	}
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			// Room for the estimate of 10 chunks (bytesPerChunk without
			// terms or text), not for their texts.
			budget := 20 * bytesPerChunk(index.DefaultSettings().Dims, 0)
			s := f.open(Options{CacheBytes: budget, CacheLoadInBackground: background})
			for i := range 3 {
				f.check(fmt.Sprintf("query %d", i), s, cacheQuery("big", "wire settlement"))
				waitLoads(t, s)
			}
			st := s.CacheStats()
			if st.PeakBytes > st.Budget || st.Tenants != 0 || st.MemoryAnswers != 0 {
				t.Fatalf("%+v: want nothing held, never more than the budget, every answer in SQL", st)
			}
			if background && (st.LoadFailures != 1 || st.Loads != 0) {
				t.Fatalf("%+v: want one failed load and no retry", st)
			}
		})
	}
}

// TestCacheFirstQueryDoesNotWait: with background loads, a tenant's first
// query is answered in SQL while its load is held, and later queries from
// memory, with the reference's answers throughout.
func TestCacheFirstQueryDoesNotWait(t *testing.T) {
	f := newCacheFixture(t)
	fillTenant(f, "cold", 20)
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	s := f.open(Options{CacheBytes: 1 << 30, CacheLoadInBackground: true, loadHook: func(string) {
		once.Do(func() { close(held) })
		<-release
	}})
	q := cacheQuery("cold", "wire hold release")
	f.check("first query", s, q)
	<-held
	f.check("second query, load still held", s, q)
	if st := s.CacheStats(); st.Loading != 1 || st.SQLAnswers < 2 || st.MemoryAnswers != 0 || st.Tenants != 0 {
		t.Fatalf("while the load is held: %+v: want one load in progress and every answer in SQL", st)
	}
	close(release)
	waitLoads(t, s)
	f.check("after the load", s, q)
	if st := s.CacheStats(); st.Loads != 1 || st.MemoryAnswers != 1 || st.Tenants != 1 {
		t.Fatalf("after the load: %+v: want one load and the answer from memory", st)
	}
}

// TestCacheLoadStartsAfterFirstAnswer: a cold tenant's first query is
// ranked in SQL before its background load starts, so that the load's
// reads and building do not compete with it; the load starts once it is
// answered.
func TestCacheLoadStartsAfterFirstAnswer(t *testing.T) {
	f := newCacheFixture(t)
	fillTenant(f, "cold", 20)
	var s *Store
	var loadingAtSQL []int
	s = f.open(Options{CacheBytes: 1 << 30, CacheLoadInBackground: true, sqlHook: func(string) {
		loadingAtSQL = append(loadingAtSQL, s.CacheStats().Loading)
	}})
	q := cacheQuery("cold", "wire hold release")
	f.check("first query", s, q)
	if len(loadingAtSQL) != 1 || loadingAtSQL[0] != 0 {
		t.Fatalf("loads in progress when the first query was ranked in SQL: %v; want one SQL ranking with none", loadingAtSQL)
	}
	waitLoads(t, s)
	f.check("after the load", s, q)
	if st := s.CacheStats(); st.Loads != 1 || st.MemoryAnswers != 1 || len(loadingAtSQL) != 1 {
		t.Fatalf("after the load: %+v, %d SQL rankings: want one load and the answer from memory", st, len(loadingAtSQL))
	}
}

// TestCacheWritesDuringLoadAndEviction: writes committed after a
// background load took its snapshot, and writes to a tenant while it is
// evicted, are all in the next answer, which is the reference's byte for
// byte.
func TestCacheWritesDuringLoadAndEviction(t *testing.T) {
	f := newCacheFixture(t)
	fillTenant(f, "a", 15)
	fillTenant(f, "b", 15)
	hold := make(chan chan struct{}, 1)
	s := f.open(Options{CacheBytes: 1 << 30, CacheLoadInBackground: true, loadHook: func(string) {
		select {
		case release := <-hold:
			<-release
		default:
		}
	}})
	release := make(chan struct{})
	hold <- release
	q := cacheQuery("a", "wire hold release payment")
	f.check("first query of a", s, q)
	// The load has read version v; write v+1..v+3 before it reads documents.
	for s.CacheStats().Loading != 1 || len(hold) != 0 {
		time.Sleep(time.Millisecond)
	}
	f.put(cordontype.Document{Tenant: "a", DocID: "new", Text: "wire hold release for the new payment", Classification: cordontype.Public})
	f.put(cordontype.Document{Tenant: "a", DocID: "d001", Text: "replaced text about a payment release", Classification: cordontype.Public})
	f.delete("a", "d002")
	close(release)
	waitLoads(t, s)
	before := s.CacheStats()
	f.check("after writes during the load", s, q)
	if st := s.CacheStats(); st.MemoryAnswers != before.MemoryAnswers+1 {
		t.Fatalf("%+v: the query after the load should answer from memory", st)
	}

	// Evict a by loading b under a budget that holds one of them.
	one := s.CacheStats().Bytes
	small := f.open(Options{CacheBytes: one + one/4, CacheLoadInBackground: true, evictMinIdle: -1})
	f.check("a, small store", small, q)
	waitLoads(t, small)
	f.check("a from memory", small, q)
	f.check("b, small store", small, cacheQuery("b", "wire hold"))
	waitLoads(t, small)
	if st := small.CacheStats(); st.Evictions != 1 || st.Tenants != 1 {
		t.Fatalf("%+v: want a evicted for b", st)
	}
	f.put(cordontype.Document{Tenant: "a", DocID: "d003", Text: "wire hold raised", Classification: cordontype.Restricted})
	f.check("a after a write while evicted", small, q)
	waitLoads(t, small)
	f.check("a reloaded", small, q)
	if st := small.CacheStats(); st.PeakBytes > st.Budget {
		t.Fatalf("%+v: more than the budget", st)
	}
}

// TestCacheDoesNotThrash: when the tenants in use do not all fit, a tenant
// that would need a recently queried one evicted is not loaded (no load is
// even started): it is ranked in SQL, and the loaded tenants stay.
func TestCacheDoesNotThrash(t *testing.T) {
	f := newCacheFixture(t)
	const tenants = 5
	for i := range tenants {
		fillTenant(f, fmt.Sprintf("t%d", i), 12)
	}
	probe := f.open(Options{CacheBytes: 1 << 30})
	f.check("probe", probe, cacheQuery("t0", "wire release"))
	one := probe.CacheStats().Bytes
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			s := f.open(Options{CacheBytes: 2*one + one/2, CacheLoadInBackground: background, evictMinIdle: time.Hour})
			for round := range 3 {
				for i := range tenants {
					f.check(fmt.Sprintf("round %d tenant %d", round, i), s, cacheQuery(fmt.Sprintf("t%d", i), "wire release payment"))
					waitLoads(t, s)
				}
			}
			st := s.CacheStats()
			if st.Loads != 2 || st.Evictions != 0 || st.LoadFailures != 0 || st.Tenants != 2 || st.LoadsDeclined == 0 || st.PeakBytes > st.Budget {
				t.Fatalf("%+v: want the first two tenants loaded and kept, the others declined, never evicted", st)
			}
			// The two loaded tenants answer from memory, the others in SQL.
			if st.MemoryAnswers == 0 || st.SQLAnswers < 3*(tenants-2) {
				t.Fatalf("%+v: want the loaded tenants from memory, the others in SQL", st)
			}
		})
	}
}

// TestWarmCacheLoadsMostRecentFirst: WarmCache loads the tenants with an
// audit record, the most recently audited first, until one does not fit
// beside those loaded; it evicts nothing, skips a tenant never audited, and
// the loaded tenants answer as the reference does.
func TestWarmCacheLoadsMostRecentFirst(t *testing.T) {
	f := newCacheFixture(t)
	ctx := context.Background()
	// Same texts but for the tenant's name, of the same length: the
	// tenants' indexes take the same bytes.
	for _, tn := range []string{"warm_a", "warm_b", "warm_c", "warm_d"} {
		fillTenant(f, tn, 24)
	}
	for _, tn := range []string{"warm_b", "warm_a", "warm_c"} { // warm_d: never audited
		if _, err := f.write.AppendAudit(ctx, tn, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"warm_c", "warm_a", "warm_b"} // not name order
	warm := func(budget int64) (*Store, []string) {
		t.Helper()
		s := f.open(Options{CacheBytes: budget, CacheLoadInBackground: true, evictMinIdle: time.Hour})
		order, done, err := s.WarmCache(ctx)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the warm-up did not end within a minute")
		}
		return s, order
	}
	loaded := func(s *Store, tenant string) int64 {
		t.Helper()
		schema, err := SchemaName(tenant)
		if err != nil {
			t.Fatal(err)
		}
		ct := s.cache.entry(schema, true)
		ct.mu.RLock()
		defer ct.mu.RUnlock()
		if ct.x == nil {
			return 0
		}
		return ct.bytes
	}

	big, order := warm(1 << 30)
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("warm-up order %v, want %v", order, want)
	}
	one := loaded(big, "warm_a")
	for _, tn := range want {
		if b := loaded(big, tn); b == 0 || b != one {
			t.Fatalf("under a large budget %s holds %d bytes, want %d like warm_a", tn, b, one)
		}
	}
	if b := loaded(big, "warm_d"); b != 0 {
		t.Fatalf("warm_d, never audited, was loaded (%d bytes)", b)
	}

	// Room for two and a half: the two most recent are loaded, the third
	// does not fit and ends the warm-up; nothing is evicted.
	small, _ := warm(2*one + one/2)
	st := small.CacheStats()
	if loaded(small, "warm_c") == 0 || loaded(small, "warm_a") == 0 || loaded(small, "warm_b") != 0 || st.Evictions != 0 || st.Bytes > st.Budget {
		t.Fatalf("under room for two: warm_c %d, warm_a %d, warm_b %d bytes, stats %+v; want the two most recent, no eviction",
			loaded(small, "warm_c"), loaded(small, "warm_a"), loaded(small, "warm_b"), st)
	}
	f.check("warmed tenant", small, cacheQuery("warm_c", "wire hold release payment"))
	if st := small.CacheStats(); st.MemoryAnswers == 0 {
		t.Fatalf("the warmed tenant was not answered from memory: %+v", st)
	}
}
