package memindex_test

import (
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/lab/bench"
	"github.com/cordon-rag/cordon/retrieval"
)

var (
	scaleChunks  = flag.Int("scale-chunks", 0, "chunks of the one tenant BenchmarkRankScale builds (0 skips it)")
	scaleService = flag.Bool("scale-service", false, "rank BenchmarkRankScale's queries under the service profile (retrieval.ServicePolicy) instead of the bench policy")
	scaleExact   = flag.Bool("scale-exact", false, "build BenchmarkRankScale's tenant with exact words only (analyzer exact, no field terms) instead of the default settings")
)

var (
	scaleHeap    float64 // live heap bytes per chunk of scaleIndex
	scaleOnce    sync.Once
	scaleIndex   *memindex.Index
	scaleQueries []retrieval.RankRequest
)

// scaleTenant builds, once per process, the index of cordon-lab bench's
// corpus (seed 1, one tenant of n chunks, the default settings or, with
// -scale-exact, exact words alone) as the
// store's cache loads it,
// and the RankRequests the bench's retriever sends for its first 200
// queries under the bench policy (the service profile with -scale-service).
func scaleTenant(b *testing.B, n int) (*memindex.Index, []retrieval.RankRequest) {
	scaleOnce.Do(func() {
		g, err := bench.NewGenerator(bench.Config{Seed: 1, Chunks: n, Tenants: 1})
		if err != nil {
			b.Fatal(err)
		}
		s := index.DefaultSettings()
		if *scaleExact {
			s.Analyzer, s.Fields = analysis.AnalyzerExact, false
		}
		// Documents are prepared on every core, their terms counted by each
		// core's vocabulary as a cache's load counts them, and added in
		// corpus order.
		type counted struct {
			pcs   []index.PreparedChunk
			ids   [][]int32
			vocab *analysis.Vocabulary
		}
		type job struct {
			doc cordontype.Document
			pcs chan counted
		}
		jobs := make(chan job, 256)
		order := make(chan job, 256)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vocab, counter, stemmer := analysis.NewVocabulary(), analysis.NewCounter(), analysis.NewStemmer()
				for j := range jobs {
					pcs, err := index.Prepare(&j.doc, s)
					if err != nil {
						panic(err)
					}
					ids := make([][]int32, len(pcs))
					for i := range pcs {
						// The settings' terms: words and, by default, their
						// stems and the title's and headings' field terms.
						ids[i], pcs[i].TF = vocab.CountIDs(pcs[i].Chunk.Text)
						if s.Stems() {
							ids[i], pcs[i].TF = vocab.AppendStemIDs(ids[i], pcs[i].TF)
						}
						if s.Fields {
							ids[i], pcs[i].TF = s.AppendFieldIDs(vocab, ids[i], pcs[i].TF, j.doc.Title, pcs[i].Path, pcs[i].Chunk.Section, counter, stemmer)
						}
						if want := pcs[i].Terms; !slices.Equal(vocab.Names(ids[i]), want) {
							panic(fmt.Sprintf("doc %s chunk %d: counted %q, prepared %q", j.doc.DocID, i, vocab.Names(ids[i]), want))
						}
						pcs[i].Terms = nil
					}
					j.pcs <- counted{pcs, ids, vocab}
				}
			}()
		}
		go func() {
			defer close(order)
			defer close(jobs)
			_ = g.Each(func(doc cordontype.Document, _ int) error {
				j := job{doc: doc, pcs: make(chan counted, 1)}
				order <- j
				jobs <- j
				return nil
			})
		}()
		heap := liveHeap()
		builder := memindex.NewBuilder(s, n)
		for j := range order {
			c := <-j.pcs
			builder.AddCounted(j.doc.DocID, c.pcs, c.vocab, c.ids)
		}
		wg.Wait()
		scaleIndex = builder.Index()
		scaleHeap = float64(liveHeap()-heap) / float64(n)
		p := bench.BasePolicy()
		if *scaleService {
			p = retrieval.ServicePolicy()
		}
		for _, q := range g.Queries(200) {
			p.MaxStaleTicks = q.MaxStaleTicks
			rq := retrieval.Query{Principal: q.Principal, Text: q.Text, NowTick: q.NowTick, Policy: p}
			scaleQueries = append(scaleQueries, rq.RankRequest())
		}
		runtime.GC()
	})
	if scaleIndex == nil {
		b.Fatal("the scale index was not built")
	}
	return scaleIndex, scaleQueries
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRankScale ranks cordon-lab bench's queries (clearance
// confidential, barrier mna, max_stale_ticks on every other query, top_n
// 50) over one tenant of -scale-chunks chunks of the bench corpus, with 1,
// 2 and 8 goroutines querying at once, each query on one goroutine
// (parallel=false) or spread over GOMAXPROCS (parallel=true, what Rank does
// at this size); cpu-ns/op is the process's CPU time per query, p50-ns the
// median latency of one client. It logs the live heap a chunk, the postings
// and funnel candidates a query, and how many of the postings are of the
// terms dynamic pruning (MaxScore) would still have to score had it known
// the final top list's floor from the start (x.EssentialPostings). The
// index is built once per process (about 5 KB and a few seconds of CPU per
// thousand chunks):
//
//	go test ./index/memindex -run '^$' -bench RankScale -benchtime 200x -scale-chunks 1000000
func BenchmarkRankScale(b *testing.B) {
	if *scaleChunks <= 0 {
		b.Skip("-scale-chunks not set")
	}
	x, queries := scaleTenant(b, *scaleChunks)
	var lexical, essential, dense int
	for _, q := range queries {
		rk, err := x.Rank(q)
		if err != nil {
			b.Fatal(err)
		}
		floor := math.Inf(-1)
		if n := len(rk.Lexical); n > 0 && n == q.TopN {
			floor = rk.Lexical[n-1].Score
		}
		all, ess := x.EssentialPostings(q, floor)
		if all != x.Postings(q.Terms) {
			b.Fatalf("%d postings counted, %d held", all, x.Postings(q.Terms))
		}
		lexical += all
		essential += ess
		dense += rk.Considered
	}
	n := float64(len(queries))
	b.Logf("%d chunks, %.0f bytes of live heap a chunk; per query %.0f postings of its terms, %.0f chunks ranked by either side (Considered); "+
		"%.0f postings (%.1f%%) in the terms a chunk needs to reach the final top list (MaxScore's essential terms, the final floor known)",
		x.Len(), scaleHeap, float64(lexical)/n, float64(dense)/n, float64(essential)/n, 100*float64(essential)/float64(max(lexical, 1)))
	// A principal's first query, or one whose bitmap was evicted, computes
	// its visibility bitmap.
	start := time.Now()
	for range 10 {
		x.ComputeVisibility(queries[0].Principal)
	}
	b.Logf("%.2f ms to compute a principal's visibility bitmap", float64(time.Since(start))/10/1e6)
	for _, run := range []struct {
		clients  int
		parallel bool
	}{{1, false}, {1, true}, {2, false}, {2, true}, {8, false}, {8, true}} {
		clients := run.clients
		b.Run(fmt.Sprintf("chunks=%d/clients=%d/parallel=%t", x.Len(), clients, run.parallel), func(b *testing.B) {
			if !run.parallel {
				memindex.SetRankParts(b, math.MaxInt32, 1, 1, false)
			}
			b.ReportAllocs()
			cpu := cpuTime()
			if clients == 1 {
				var took []time.Duration
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					if _, err := x.Rank(queries[i%len(queries)]); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2]), "p50-ns")
			} else {
				b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				var next sync.Mutex
				i := 0
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						next.Lock()
						q := queries[i%len(queries)]
						i++
						next.Unlock()
						if _, err := x.Rank(q); err != nil {
							panic(err)
						}
					}
				})
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
