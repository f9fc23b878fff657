package memindex_test

import (
	"flag"
	"runtime"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/lab/bench"
)

var buildChunks = flag.Int("build-chunks", 20_000, "chunks of the tenant BenchmarkBuild builds")

// BenchmarkBuild builds the index of cordon-lab bench's corpus (seed 1,
// one tenant of -build-chunks chunks) as a cache's load does once the
// chunk rows are decoded: GOMAXPROCS workers count the terms of batches of
// documents in turn, and the documents are added to a memindex.Builder in
// order. counter counts each chunk with an analysis.Counter and adds it
// with Add; vocabulary counts with a worker's analysis.Vocabulary and adds
// with AddCounted (what the load does). cpu-s/op is the process's CPU time
// per build:
//
//	go test ./index/memindex -run '^$' -bench Build -benchtime 5x -build-chunks 100000
func BenchmarkBuild(b *testing.B) {
	g, err := bench.NewGenerator(bench.Config{Seed: 1, Chunks: *buildChunks, Tenants: 1})
	if err != nil {
		b.Fatal(err)
	}
	s := index.DefaultSettings()
	type doc struct {
		id  string
		pcs []index.PreparedChunk
	}
	var docs []doc
	if err := g.Each(func(d cordontype.Document, _ int) error {
		pcs, err := index.Prepare(&d, s)
		for i := range pcs {
			pcs[i].Terms, pcs[i].TF = nil, nil
		}
		docs = append(docs, doc{d.DocID, pcs})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	const batch = 64 // documents a worker counts at once
	for _, counted := range []bool{false, true} {
		name := "counter"
		if counted {
			name = "vocabulary"
		}
		b.Run(name, func(b *testing.B) {
			var cpu float64
			for b.Loop() {
				runtime.GC()
				before := cpuTime()
				workers := runtime.GOMAXPROCS(0)
				pcs := make([][]index.PreparedChunk, len(docs))
				ids := make([][][]int32, len(docs))
				vocabs := make([]*analysis.Vocabulary, len(docs))
				done := make([]chan struct{}, (len(docs)+batch-1)/batch)
				for i := range done {
					done[i] = make(chan struct{})
				}
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						counter, vocab := analysis.NewCounter(), analysis.NewVocabulary()
						for k := w; k < len(done); k += workers {
							for i := k * batch; i < min(len(docs), (k+1)*batch); i++ {
								ps := make([]index.PreparedChunk, len(docs[i].pcs))
								copy(ps, docs[i].pcs)
								ids[i], vocabs[i] = make([][]int32, len(ps)), vocab
								for j := range ps {
									if counted {
										ids[i][j], ps[j].TF = vocab.CountIDs(ps[j].Chunk.Text)
									} else {
										ps[j].Terms, ps[j].TF = counter.Count(ps[j].Chunk.Text)
									}
								}
								pcs[i] = ps
							}
							close(done[k])
						}
					})
				}
				bl := memindex.NewBuilder(s, *buildChunks)
				for i, d := range docs {
					<-done[i/batch]
					if counted {
						bl.AddCounted(d.id, pcs[i], vocabs[i], ids[i])
					} else {
						bl.Add(d.id, pcs[i])
					}
				}
				wg.Wait()
				if x := bl.Index(); x.Len() != *buildChunks {
					b.Fatalf("%d chunks, want %d", x.Len(), *buildChunks)
				}
				cpu += (cpuTime() - before).Seconds()
			}
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
		})
	}
}
