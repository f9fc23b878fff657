package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/cordon-rag/cordon/lab/corpus"
	"github.com/cordon-rag/cordon/lab/eval"
)

// The committed subset: 58 man pages (sections 1, 5, 8, every 20th page,
// pages under 6,000 bytes) and their known-item queries, built by
// testdata/eval/build.sh. Being committed, it gives the same numbers on any
// machine.
const (
	subsetCorpus  = "../../testdata/eval/corpus"
	subsetQueries = "../../testdata/eval/queries.jsonl"
)

func loadSubset(t *testing.T) ([]eval.Document, []eval.Query) {
	t.Helper()
	docs, err := corpus.Load(subsetCorpus)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(subsetQueries)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := eval.ReadQueries(f)
	if err != nil {
		t.Fatal(err)
	}
	queries := eval.Select(all, []string{"name"}, "")
	out := make([]eval.Document, len(docs))
	for i, d := range docs {
		out[i] = eval.Document{ID: d.ID, Text: d.Text}
	}
	return out, queries
}

// TestSubsetQueriesReproducible: the committed query file is exactly what
// 'cordon-lab corpus queries' builds from the committed corpus.
func TestSubsetQueriesReproducible(t *testing.T) {
	docs, err := corpus.Load(subsetCorpus)
	if err != nil {
		t.Fatal(err)
	}
	built, _ := corpus.Queries(docs, corpus.Kinds)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, q := range built {
		if err := enc.Encode(q); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(subsetQueries)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, b.Bytes()) {
		t.Errorf("testdata/eval/queries.jsonl is not what KnownItemQueries builds from testdata/eval/corpus; rerun testdata/eval/build.sh")
	}
}

// TestSubsetHybridRecall checks the ordering the design promises, on the
// committed subset with the known-item queries as built (each page's NAME
// line is in the index): hybrid RRF + rerank finds at least as many relevant
// documents in its first 10 as the better of BM25 only and dense only.
//
// It holds here, but only at the ceiling (all three reach recall@10 = 1 on
// this subset). With the NAME section held out (--drop-section NAME) the
// promise does NOT hold on this subset (hybrid + rerank 0.845 against BM25
// 0.914 when this test was written) nor on the 402-page evaluation corpus of
// docs/quality.md, so no test asserts it there; TestSubsetHeldOut only logs
// the numbers. See docs/quality.md for why.
func TestSubsetHybridRecall(t *testing.T) {
	docs, queries := loadSubset(t)
	rep, err := eval.Run(context.Background(), docs, queries, eval.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	bm25 := rep.Result(eval.BM25Only).RecallAt10
	dense := rep.Result(eval.DenseOnly).RecallAt10
	hybrid := rep.Result(eval.HybridRerank).RecallAt10
	t.Logf("recall@10: bm25 %.3f, dense %.3f, hybrid+rerank %.3f", bm25, dense, hybrid)
	if hybrid < max(bm25, dense) {
		t.Errorf("hybrid RRF + rerank recall@10 %.3f < max(bm25 %.3f, dense %.3f)", hybrid, bm25, dense)
	}
}

// TestSubsetHeldOut runs the held-out condition and checks only that it is
// deterministic (any number of workers gives the same report); it logs the
// numbers and deliberately asserts no ordering (see TestSubsetHybridRecall).
func TestSubsetHeldOut(t *testing.T) {
	docs, queries := loadSubset(t)
	opts := eval.DefaultOptions()
	opts.DropSections = []string{"NAME"}
	opts.Workers = 1
	one, err := eval.Run(context.Background(), docs, queries, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Workers = 4
	four, err := eval.Run(context.Background(), docs, queries, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, four) {
		t.Errorf("1 worker and 4 workers gave different reports")
	}
	for _, r := range one.Results {
		t.Logf("NAME held out: %-18s recall@10 %.3f MRR@10 %.3f", r.Pipeline, r.RecallAt10, r.MRRAt10)
	}
}

// TestSubsetBakeOff runs the bake-off on the subset: every variant indexes
// the same documents; fixed windows see one section per document.
func TestSubsetBakeOff(t *testing.T) {
	if testing.Short() {
		t.Skip("bake-off on the subset takes a few seconds")
	}
	docs, queries := loadSubset(t)
	reps, err := eval.BakeOff(context.Background(), docs, queries, eval.DefaultVariants(), eval.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 9 {
		t.Fatalf("got %d variant reports, want 9", len(reps))
	}
	for _, v := range reps {
		if v.Report.Documents != len(docs) || v.Report.Queries != len(queries) || v.Report.Chunks < len(docs) {
			t.Errorf("%s: %d docs, %d queries, %d chunks", v.Variant.Name, v.Report.Documents, v.Report.Queries, v.Report.Chunks)
		}
		if v.Report.MaxWords != v.Variant.Chunking.MaxWords || v.Report.Strategy != v.Variant.Strategy {
			t.Errorf("%s: report says %s %d", v.Variant.Name, v.Report.Strategy, v.Report.MaxWords)
		}
	}
	// Overlap adds windows: structure 50/10 has more chunks than 50/0.
	if reps[2].Report.Chunks <= reps[1].Report.Chunks {
		t.Errorf("structure 50/10 has %d chunks, 50/0 %d: overlap should add windows", reps[2].Report.Chunks, reps[1].Report.Chunks)
	}
}
