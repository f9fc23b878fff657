package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/adversarial"
	"github.com/cordon-rag/cordon/retrieval"
)

// chargeTolerance is how far the budget's charge for a loaded tenant may
// be from the live heap its index holds.
const chargeTolerance = 0.20

// TestLoadChargeWithinLiveHeap: a load of each adversarial corpus (long
// unique tokens, many tiny documents, a few huge documents, non-Latin text),
// through the cache's own path from stored chunk rows (buildRows, fed the
// rows a chunkRowsSQL query returns), charges the budget within 20% of the
// live heap the loaded index holds. A charge per chunk, which left out the
// term strings and dictionary, was a quarter of the heap for long unique
// tokens.
func TestLoadChargeWithinLiveHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("loads indexes of tens of MB")
	}
	ti := tenantInfo{name: "t", schema: "t", settings: index.DefaultSettings()}
	for _, c := range adversarial.Corpora(ti.name, 1) {
		t.Run(c.Name, func(t *testing.T) {
			rows := &storedRows{}
			for i := range c.Docs {
				pcs, err := index.Prepare(&c.Docs[i], ti.settings)
				if err != nil {
					t.Fatal(err)
				}
				for j := range pcs {
					rows.add(&pcs[j], c.Docs[i].Title)
				}
			}
			cache := newCache(1<<40, false, 0)
			before := liveHeap()
			x, charged, _, err := cache.buildRows(rows, ti, int64(len(rows.rows)), false)
			if err != nil || x == nil {
				t.Fatalf("load: %v", err)
			}
			heap := liveHeap() - before
			t.Logf("%d chunks: charged %d bytes, live heap %d (%+.1f%%); %.0f and %.0f bytes a chunk", x.Len(), charged, heap,
				100*(float64(charged)/float64(heap)-1), float64(charged)/float64(x.Len()), float64(heap)/float64(x.Len()))
			if math.Abs(float64(charged-heap)) > chargeTolerance*float64(heap) {
				t.Errorf("charged %d bytes, want within 20%% of the live heap %d", charged, heap)
			}
			if used := cache.CacheUsed(); used != charged {
				t.Errorf("the cache holds %d bytes reserved, want the %d charged", used, charged)
			}
			runtime.KeepAlive(x)
			runtime.KeepAlive(rows)
		})
	}
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// CacheUsed is the bytes the cache counts as held and reserved.
func (c *cache) CacheUsed() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// storedRows are chunk rows as a chunkRowsSQL query run with binaryRows
// returns them, without a database.
type storedRows struct {
	rows [][][]byte
	at   int
}

// add appends pc's row, each column in PostgreSQL's binary format, its
// document titled title.
func (r *storedRows) add(pc *index.PreparedChunk, title string) {
	c := &pc.Chunk
	int4 := func(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(int32(v))) }
	barriers := binary.BigEndian.AppendUint32(nil, 0) // no dimensions
	if len(c.Barriers) > 0 {
		barriers = appendArrayHeader(nil, oidText, len(c.Barriers))
		for _, l := range c.Barriers {
			barriers = binary.BigEndian.AppendUint32(barriers, uint32(len(l)))
			barriers = append(barriers, l...)
		}
	} else {
		barriers = binary.BigEndian.AppendUint32(barriers, 0)
		barriers = binary.BigEndian.AppendUint32(barriers, oidText)
	}
	vec := binary.BigEndian.AppendUint16(nil, uint16(len(pc.Vector)))
	vec = binary.BigEndian.AppendUint16(vec, 0)
	for _, v := range pc.Vector {
		vec = binary.BigEndian.AppendUint32(vec, math.Float32bits(float32(v)))
	}
	r.rows = append(r.rows, [][]byte{[]byte(c.DocID), []byte(c.ChunkID), []byte(c.Section), []byte(c.Text),
		int4(c.StartChar), int4(c.EndChar), int4(c.Length), binary.BigEndian.AppendUint16(nil, uint16(c.Classification)),
		barriers, binary.BigEndian.AppendUint64(nil, uint64(c.AsOfTick)), vec, []byte(title), []byte(pc.Path),
		binary.BigEndian.AppendUint64(nil, uint64(len(r.rows)+1))})
}

func (r *storedRows) Close()                        {}
func (r *storedRows) Err() error                    { return nil }
func (r *storedRows) CommandTag() pgconn.CommandTag { return pgconn.CommandTag{} }
func (r *storedRows) FieldDescriptions() []pgconn.FieldDescription {
	fd := make([]pgconn.FieldDescription, chunkRowCols)
	for i := range fd {
		fd[i] = pgconn.FieldDescription{Name: "c", Format: pgx.BinaryFormatCode}
	}
	return fd
}
func (r *storedRows) Next() bool {
	r.at++
	return r.at <= len(r.rows)
}
func (r *storedRows) Scan(...any) error      { panic("not used") }
func (r *storedRows) Values() ([]any, error) { panic("not used") }
func (r *storedRows) RawValues() [][]byte    { return r.rows[r.at-1] }
func (r *storedRows) Conn() *pgx.Conn        { return nil }
func (r *storedRows) TypeMap() *pgtype.Map   { return nil }

// TestCacheBudgetHoldsAdversarialTenant: a tenant of long unique tokens
// whose chunks a charge per chunk priced at a quarter of their memory
// (5.4 MB for 24 MB of live heap: a 12 MiB budget admitted it) is refused
// by a 12 MiB budget: its load gives up within the budget, it is ranked in
// SQL with the SQL path's answer, and the live heap does not grow by more
// than the budget. Under a budget with room for it, the store's charge is
// within 20% of the live heap the load added.
func TestCacheBudgetHoldsAdversarialTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads a tenant of tens of MB")
	}
	f := newCacheFixture(t)
	ctx := context.Background()
	c := adversarial.LongUniqueTokens("lut", 400)
	for docs := c.Docs; len(docs) > 0; {
		n := min(len(docs), 50)
		if _, err := f.write.PutBatch(ctx, docs[:n]); err != nil {
			t.Fatal(err)
		}
		docs = docs[n:]
	}
	q := cacheQuery("lut", c.Docs[7].Text[:200])
	want := retrieveJSON(t, f.sql, q)
	for _, tt := range []struct {
		name   string
		budget int64
		held   bool
	}{
		{"12 MiB", 12 << 20, false},
		{"256 MiB", 256 << 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := f.open(Options{CacheBytes: tt.budget})
			before := liveHeap()
			rss := peakRSS()
			got := retrieveJSON(t, s, q)
			peak := rss()
			heap := liveHeap() - before
			st := s.CacheStats()
			t.Logf("%+v; live heap grew %d bytes, RSS by %d at most", st, heap, peak)
			if got != want {
				t.Fatalf("the cached store answered\n  %s\nwant (SQL path)\n  %s", got, want)
			}
			if st.PeakBytes > st.Budget {
				t.Errorf("%+v: more than the budget", st)
			}
			if !tt.held {
				if st.Tenants != 0 || st.MemoryAnswers != 0 || heap > tt.budget {
					t.Fatalf("%+v, live heap grew %d bytes: want nothing held, the query in SQL, the heap within the budget", st, heap)
				}
				return
			}
			if st.Tenants != 1 || st.MemoryAnswers == 0 {
				t.Fatalf("%+v: want the tenant held", st)
			}
			if math.Abs(float64(st.Bytes-heap)) > chargeTolerance*float64(heap) {
				t.Errorf("charged %d bytes, want within 20%% of the live heap the load added, %d", st.Bytes, heap)
			}
		})
	}
}

// retrieveJSON is q's answer from s as JSON.
func retrieveJSON(t *testing.T, s *Store, q retrieval.Query) string {
	t.Helper()
	r, err := retrieval.New(s).Retrieve(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// peakRSS samples the process's resident set every millisecond until the
// function it returns is called, which returns the most it grew by (a
// measurement to log: the collector's pacing and memory freed earlier but
// still mapped make it no bound).
func peakRSS() func() int64 {
	read := func() int64 {
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			return 0
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0
		}
		pages, _ := strconv.ParseInt(f[1], 10, 64)
		return pages * int64(os.Getpagesize())
	}
	base := read()
	var most atomic.Int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			most.Store(max(most.Load(), read()-base))
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return most.Load()
	}
}
