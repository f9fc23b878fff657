package integration_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/server"
)

// latencies collects request durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return "no requests"
	}
	d := slices.Clone(l.d)
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("n=%d p50=%v p95=%v p99=%v max=%v", len(d), q(0.50).Round(10*time.Microsecond), q(0.95).Round(10*time.Microsecond),
		q(0.99).Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond))
}

// report logs the summary under label and reports p50 and p99 (ms).
func (l *latencies) report(b *testing.B, label, suffix string) {
	b.Helper()
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	b.ReportMetric(float64(q(0.50))/1e6, "p50-ms")
	b.ReportMetric(float64(q(0.99))/1e6, "p99-ms")
	b.Logf("%s: %s%s", label, l.summary(), suffix)
}

var versionRE = regexp.MustCompile(`ver(\d+)`)

// TestServerLoad runs writers and readers concurrently over HTTP on
// loopback (bounded: a few hundred requests): every request succeeds, a
// writer always reads its own write, and no reader ever sees two chunks of
// one document from different versions (a torn read).
func TestServerLoad(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cache int64
	}{{"sql", 0}, {"memindex", 256 << 20}} {
		t.Run(tt.name, func(t *testing.T) { serverLoad(t, tt.cache) })
	}
}

func serverLoad(t *testing.T, cacheBytes int64) {
	a := startAPIServer(t, serverOpts{cache: cacheBytes})
	a.want(t, a.call(t, "POST", "/v1/tenants", tok(t, "root", "admin"), map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	const writers, readers, putsPerWriter, docsPerWriter = 4, 4, 25, 3
	var putLat, readLat latencies
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		failures.Add(1)
		t.Errorf(format, args...)
	}
	docText := func(w, d, v int) string {
		tag := fmt.Sprintf("load%dx%d ver%d", w, d, v)
		return fmt.Sprintf("# Part A\n%s alpha ledger entry.\n# Part B\n%s beta ledger entry.\n", tag, tag)
	}
	start := time.Now()
	var writersDone atomic.Bool
	var wg, rg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := tok(t, fmt.Sprintf("writer%d", w), "tenant=wholesale", "clearance=restricted", "reader", "writer")
			for v := 1; v <= putsPerWriter && failures.Load() == 0; v++ {
				d := v % docsPerWriter
				docID := fmt.Sprintf("w%d-d%d", w, d)
				t0 := time.Now()
				r, err := a.try("PUT", "/v1/tenants/wholesale/documents/"+docID, token, map[string]any{"text": docText(w, d, v), "classification": "internal", "as_of_tick": v})
				putLat.add(time.Since(t0))
				if err != nil || r.status != http.StatusOK {
					fail("put %s v%d: %v %d %s", docID, v, err, r.status, r.body)
					return
				}
				t0 = time.Now()
				r, err = a.try("POST", "/v1/tenants/wholesale/retrieve", token, map[string]any{"query": fmt.Sprintf("load%dx%d ver%d", w, d, v), "policy": map[string]any{"limit": 10, "max_chunks_per_doc": 0}})
				readLat.add(time.Since(t0))
				if err != nil || r.status != http.StatusOK {
					fail("read-your-write %s v%d: %v %d %s", docID, v, err, r.status, r.body)
					return
				}
				var res struct {
					Results []struct {
						DocID string `json:"doc_id"`
						Text  string `json:"text"`
					} `json:"results"`
				}
				_ = json.Unmarshal(r.body, &res)
				seen := 0
				for _, c := range res.Results {
					if c.DocID != docID {
						continue
					}
					seen++
					if !strings.Contains(c.Text, fmt.Sprintf("ver%d ", v)) {
						fail("writer %d read %s at an old version after writing v%d: %q", w, docID, v, c.Text)
					}
				}
				if seen != 2 {
					fail("writer %d: its own write %s v%d returned %d of 2 chunks: %s", w, docID, v, seen, r.body)
				}
			}
		}()
	}
	for rd := 0; rd < readers; rd++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			token := tok(t, fmt.Sprintf("reader%d", rd), "tenant=wholesale", "clearance=internal", "reader")
			rng := rand.New(rand.NewPCG(uint64(rd), 7))
			for !writersDone.Load() && failures.Load() == 0 {
				w, d := rng.IntN(writers), rng.IntN(docsPerWriter)
				t0 := time.Now()
				r, err := a.try("POST", "/v1/tenants/wholesale/retrieve", token, map[string]any{"query": fmt.Sprintf("load%dx%d ledger", w, d), "policy": map[string]any{"limit": 10, "max_chunks_per_doc": 0}})
				readLat.add(time.Since(t0))
				if err != nil || r.status != http.StatusOK {
					fail("reader %d: %v %d %s", rd, err, r.status, r.body)
					return
				}
				var res struct {
					Results []struct {
						DocID string `json:"doc_id"`
						Text  string `json:"text"`
					} `json:"results"`
				}
				_ = json.Unmarshal(r.body, &res)
				versions := map[string]string{}
				for _, c := range res.Results {
					m := versionRE.FindStringSubmatch(c.Text)
					if m == nil {
						fail("chunk without a version: %q", c.Text)
						continue
					}
					if prev, ok := versions[c.DocID]; ok && prev != m[1] {
						fail("torn read: %s has chunks of versions %s and %s in one answer", c.DocID, prev, m[1])
					}
					versions[c.DocID] = m[1]
				}
			}
		}()
	}
	wg.Wait()
	writersDone.Store(true)
	rg.Wait()
	el := time.Since(start)
	total := len(putLat.d) + len(readLat.d)
	t.Logf("load: %d writers x %d puts (each followed by a read-your-write retrieve) + %d readers, %d requests in %v (%.0f req/s), 0 errors",
		writers, putsPerWriter, readers, total, el.Round(time.Millisecond), float64(total)/el.Seconds())
	t.Logf("load: PUT %s", putLat.summary())
	t.Logf("load: retrieve %s", readLat.summary())
	if failures.Load() == 0 {
		if sum, err := a.store.VerifyAudit(t.Context(), "wholesale"); err != nil || sum.Rows != int64(len(readLat.d)) {
			t.Errorf("audit after load: %+v %v, want %d intact rows", sum, err, len(readLat.d))
		}
	}
}

// BenchmarkServerLatency10k measures retrieve through HTTP with 10,000
// chunks in the tenant, through the SQL and the in-memory query paths, with
// one client and with eight; each sub-benchmark logs its latency
// percentiles and reports p50 and p99 beside ns/op:
//
//	go test ./integration_test/ -run '^$' -bench ServerLatency10k -benchtime 300x
func BenchmarkServerLatency10k(b *testing.B) {
	a := startAPIServer(b, serverOpts{cfg: serverCfgLargeBatch()})
	a.want(b, a.call(b, "POST", "/v1/tenants", tok(b, "root", "admin"), map[string]string{"tenant": "bank"}), http.StatusCreated)
	w := tok(b, "w", "tenant=bank", "writer")
	rng := rand.New(rand.NewPCG(42, 42))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%04d", i)
	}
	zipf := func() string { // a rough Zipf: small ids are frequent
		return vocab[int(float64(len(vocab))*rng.Float64()*rng.Float64()*rng.Float64())]
	}
	classes := []string{"public", "internal", "confidential", "restricted"}
	const docs, perBatch = 10000, 1000
	t0 := time.Now()
	for n := 0; n < docs/perBatch; n++ {
		var sb strings.Builder
		for i := 0; i < perBatch; i++ {
			d := n*perBatch + i
			words := make([]string, 60)
			for k := range words {
				words[k] = zipf()
			}
			line, _ := json.Marshal(map[string]any{"doc_id": fmt.Sprintf("doc-%05d", d), "text": strings.Join(words, " "),
				"classification": classes[d%4], "as_of_tick": d})
			sb.Write(line)
			sb.WriteByte('\n')
		}
		r := a.want(b, a.call(b, "POST", "/v1/tenants/bank/documents:batch", w, sb.String(), "application/x-ndjson"), http.StatusOK).json(b)
		if r["failed"] != float64(0) {
			b.Fatalf("batch failed: %v", r["results"])
		}
	}
	b.Logf("ingest: %d single-chunk documents (60 words each) via NDJSON batches of %d in %v", docs, perBatch, time.Since(t0).Round(time.Millisecond))
	reader := tok(b, "r", "tenant=bank", "clearance=confidential", "reader")

	// The same database through a server with the in-memory query path.
	mem := startAPIServer(b, serverOpts{dbURL: a.dbURL, cache: 1 << 30})
	t0 = time.Now()
	mem.want(b, mem.call(b, "POST", "/v1/tenants/bank/retrieve", reader, map[string]any{"query": zipf()}), http.StatusOK)
	b.Logf("memindex: first query (loads the tenant into memory) %v", time.Since(t0).Round(time.Millisecond))

	for _, path := range []struct {
		name, label string
		a           *apiServer
	}{{"sql", "SQL path", a}, {"memory", "in-memory path", mem}} {
		b.Run(path.name+"/1client", func(b *testing.B) {
			query := func() resp {
				return path.a.call(b, "POST", "/v1/tenants/bank/retrieve", reader, map[string]any{"query": zipf() + " " + zipf() + " " + zipf()})
			}
			for i := 0; i < 20; i++ { // warm up
				path.a.want(b, query(), http.StatusOK)
			}
			var lat latencies
			for b.Loop() {
				t0 := time.Now()
				path.a.want(b, query(), http.StatusOK)
				lat.add(time.Since(t0))
			}
			lat.report(b, fmt.Sprintf("retrieve, 10k chunks, %s, 1 client", path.label), "")
		})
		b.Run(path.name+"/8clients", func(b *testing.B) {
			var lat latencies
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for c := 0; c < 8; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
						s := time.Now()
						r, err := path.a.try("POST", "/v1/tenants/bank/retrieve", reader, map[string]any{"query": vocab[i%len(vocab)] + " " + vocab[(c*7+i)%100]})
						if err != nil || r.status != http.StatusOK {
							b.Errorf("retrieve: %v %d", err, r.status)
							return
						}
						lat.add(time.Since(s))
					}
				}()
			}
			wg.Wait()
			lat.report(b, fmt.Sprintf("retrieve, 10k chunks, %s, 8 clients", path.label), fmt.Sprintf(", %.0f req/s", float64(b.N)/time.Since(t0).Seconds()))
		})
	}
}

func serverCfgLargeBatch() server.Config { return server.Config{MaxBatchBytes: 64 << 20} }
