package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// hiddenCounts are how many chunks the reader may not see hold each probe
// term; each term is also held by hiddenProbeVisible chunks the reader sees.
var hiddenCounts = []int{0, 200, 2000}

const (
	hiddenProbeFiller  = 5000 // visible chunks without any probe term
	hiddenProbeVisible = 20
)

func probeTerm(hidden int) string { return fmt.Sprintf("probe%04d", hidden) }

// seedHiddenProbe fills tenant "bank" with single-chunk documents of 60
// words: filler the reader sees, and for each count in hiddenCounts, a term
// held by 20 visible chunks and by that many restricted ones.
func seedHiddenProbe(b testing.TB, st *postgres.Store) {
	b.Helper()
	ctx := context.Background()
	if _, err := st.CreateTenant(ctx, "bank", index.DefaultSettings()); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	text := func(term string) string {
		words := make([]string, 60)
		for i := range words {
			words[i] = fmt.Sprintf("w%04d", int(5000*rng.Float64()*rng.Float64()*rng.Float64()))
		}
		if term != "" {
			words[rng.IntN(len(words))] = term
		}
		return strings.Join(words, " ")
	}
	var docs []cordontype.Document
	add := func(id, term string, class cordontype.Classification) {
		docs = append(docs, cordontype.Document{Tenant: "bank", DocID: id, Text: text(term), Classification: class, AsOfTick: 1})
	}
	for i := range hiddenProbeFiller {
		add(fmt.Sprintf("filler-%05d", i), "", cordontype.Internal)
	}
	for _, n := range hiddenCounts {
		for i := range hiddenProbeVisible {
			add(fmt.Sprintf("seen-%d-%03d", n, i), probeTerm(n), cordontype.Internal)
		}
		for i := range n {
			add(fmt.Sprintf("hidden-%d-%04d", n, i), probeTerm(n), cordontype.Restricted)
		}
	}
	for lo := 0; lo < len(docs); lo += 500 {
		if _, err := st.PutBatch(ctx, docs[lo:min(lo+500, len(docs))]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRetrieveHiddenTerm measures how retrieve latency for a reader
// depends on how many chunks it may not see hold the query term (0, 200,
// 2000), on the SQL path and on the in-memory path. Each iteration runs the
// three queries once, in rotating order, so drift on a shared machine hits
// all three alike; it reports each one's median and the medians'
// differences from the 0-hidden query. It measures, it asserts no time:
//
//	go test ./integration_test/ -run XXX -bench RetrieveHiddenTerm -benchtime 400x
func BenchmarkRetrieveHiddenTerm(b *testing.B) {
	ctx := context.Background()
	dbURL := newDatabase(b)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		b.Fatal(err)
	}
	open := func(cache int64) *postgres.Store {
		st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 4, CacheBytes: cache})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(st.Close)
		return st
	}
	sql := open(0)
	seedHiddenProbe(b, sql)
	reader := cordontype.Principal{Tenant: "bank", Clearance: cordontype.Internal}
	for _, path := range []struct {
		name string
		st   *postgres.Store
	}{{"sql", sql}, {"memindex", open(256 << 20)}} {
		b.Run(path.name, func(b *testing.B) {
			r := retrieval.New(path.st)
			run := func(n int) time.Duration {
				t0 := time.Now()
				res, err := r.Retrieve(ctx, retrieval.Query{Principal: reader, Text: probeTerm(n), NowTick: 2, Policy: retrieval.DefaultPolicy()})
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				if res.ExcludedByEntitlement < n || len(res.Chunks) == 0 {
					b.Fatalf("query %s: %d excluded, %d results: the probe tenant is not what it should be", probeTerm(n), res.ExcludedByEntitlement, len(res.Chunks))
				}
				return d
			}
			for range 10 { // warm up (and load the in-memory index)
				for _, n := range hiddenCounts {
					run(n)
				}
			}
			lat := make([][]time.Duration, len(hiddenCounts))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range hiddenCounts {
					j := (i + k) % len(hiddenCounts)
					lat[j] = append(lat[j], run(hiddenCounts[j]))
				}
			}
			b.StopTimer()
			med := make([]float64, len(lat))
			for j, l := range lat {
				slices.Sort(l)
				med[j] = float64(l[len(l)/2].Microseconds())
				b.ReportMetric(med[j], fmt.Sprintf("p50-us/hidden=%d", hiddenCounts[j]))
			}
			for j := 1; j < len(med); j++ {
				b.ReportMetric(med[j]-med[0], fmt.Sprintf("p50-diff-us/hidden=%d", hiddenCounts[j]))
			}
		})
	}
}
