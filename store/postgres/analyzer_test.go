package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

// TestSetAnalyzerReindexes: a tenant created under the exact analyzer
// without field terms and re-indexed under the English one with field
// terms answers, on the in-memory path and in SQL, exactly as a reference
// store built so from the start (a query word's other forms found under
// stem_weight, a title's words under field_weight); its
// documents (titles, metadata, labels, ticks) are unchanged; and back
// under exact it answers as the exact reference. A bad analyzer, an
// unknown tenant and a re-embedding tenant are refused, and nothing
// changes.
func TestSetAnalyzerReindexes(t *testing.T) {
	ctx := context.Background()
	url := testDatabase(t)
	exact := index.DefaultSettings()
	exact.Analyzer, exact.Fields = analysis.AnalyzerExact, false
	w, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.CreateTenant(ctx, "lab", exact); err != nil {
		t.Fatal(err)
	}
	// The exact reference has no field terms, the English one has them.
	refs := map[string]*memory.Store{}
	for _, a := range []string{analysis.AnalyzerExact, analysis.AnalyzerEnglish} {
		s := index.DefaultSettings()
		s.Analyzer, s.Fields = a, a == analysis.AnalyzerEnglish
		if refs[a], err = memory.New(s); err != nil {
			t.Fatal(err)
		}
	}
	var docs []cordontype.Document
	for i := range reindexPage + 40 { // more than a page
		docs = append(docs, cordontype.Document{Tenant: "lab", DocID: fmt.Sprintf("d%03d", i),
			Text:           fmt.Sprintf("# Findings %d\nThe contribution of mutation %d to growth; providers provided %d samples.", i, i%9, i%5),
			Classification: cordontype.Classification(i % 4), Barriers: []string{}, AsOfTick: int64(i), Title: fmt.Sprintf("Study %d", i),
			Metadata: map[string]any{"n": i, "tag": "x"}})
	}
	docs[7].Text = "Mutations contribute to growing tumours."
	if _, err := w.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		for _, d := range docs {
			if _, err := r.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	mem, err := Open(ctx, url, Options{CacheBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	sql, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sql.Close()
	check := func(step, analyzer string) {
		t.Helper()
		for _, text := range []string{"contributions of mutations", "contribute", "provide growth", "study 17 findings"} {
			pol := retrieval.ServicePolicy()
			pol.Limit, pol.FieldWeight = 20, 1
			q := retrieval.Query{Principal: cordontype.Principal{Tenant: "lab", Clearance: cordontype.Restricted, Barriers: []string{}}, Text: text, NowTick: 1000, Policy: pol}
			js := func(st retrieval.Store) string {
				t.Helper()
				r, err := retrieval.New(st).Retrieve(ctx, q)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				b, _ := json.Marshal(r)
				return string(b)
			}
			want := js(refs[analyzer])
			for name, st := range map[string]*Store{"in-memory path": mem, "SQL path": sql} {
				if got := js(st); got != want {
					t.Fatalf("%s, %q, %s:\n got %s\nwant %s", step, text, name, got, want)
				}
			}
		}
	}
	// The two analyzers answer these queries differently, so the checks
	// below tell them apart.
	pol := retrieval.ServicePolicy()
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "lab", Clearance: cordontype.Restricted, Barriers: []string{}}, Text: "contribute", NowTick: 1000, Policy: pol}
	re, errE := retrieval.New(refs[analysis.AnalyzerEnglish]).Retrieve(ctx, q)
	rx, errX := retrieval.New(refs[analysis.AnalyzerExact]).Retrieve(ctx, q)
	if errE != nil || errX != nil || len(re.Chunks) <= len(rx.Chunks) {
		t.Fatalf("\"contribute\": english finds %d chunks, exact %d (%v, %v); want more under english", len(re.Chunks), len(rx.Chunks), errE, errX)
	}
	// Only the titles hold "study": the overlap rerankers read the text,
	// so the lexical ranking alone shows the field terms.
	q.Text, q.Policy.FieldWeight, q.Policy.EnableRerank = "study", 1, false
	re, errE = retrieval.New(refs[analysis.AnalyzerEnglish]).Retrieve(ctx, q)
	rx, errX = retrieval.New(refs[analysis.AnalyzerExact]).Retrieve(ctx, q)
	if errE != nil || errX != nil || len(re.Chunks) == 0 || len(rx.Chunks) != 0 {
		t.Fatalf("\"study\": with field terms %d chunks, without %d (%v, %v); want some and none", len(re.Chunks), len(rx.Chunks), errE, errX)
	}
	check("created exact", analysis.AnalyzerExact)
	n, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, true, nil)
	if err != nil || n != int64(len(docs)) {
		t.Fatalf("SetAnalyzer: %d, %v; want %d documents", n, err, len(docs))
	}
	check("re-indexed english", analysis.AnalyzerEnglish)
	ts, err := w.Tenants(ctx)
	if err != nil || len(ts) != 1 || ts[0].Settings.Analyzer != analysis.AnalyzerEnglish || !ts[0].Settings.Fields || ts[0].Chunks != int64(len(docs)) {
		t.Fatalf("tenants after the re-index: %+v, %v", ts, err)
	}
	var title, meta string
	var tick int64
	if err := w.pool.QueryRow(ctx, `SELECT title, metadata::text, as_of_tick FROM cordon_t_lab.documents WHERE doc_id = 'd009'`).Scan(&title, &meta, &tick); err != nil ||
		title != "Study 9" || meta != `{"n": 9, "tag": "x"}` || tick != 9 {
		t.Fatalf("document d009 after the re-index: %q %q %d (%v)", title, meta, tick, err)
	}
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerExact, false, nil); err != nil {
		t.Fatal(err)
	}
	check("back to exact", analysis.AnalyzerExact)
	if _, err := w.SetAnalyzer(ctx, "lab", "porter", true, nil); !errors.Is(err, cordontype.ErrInvalid) {
		t.Fatalf("a bad analyzer: %v", err)
	}
	if _, err := w.SetAnalyzer(ctx, "nobody", analysis.AnalyzerEnglish, true, nil); !errors.Is(err, ErrTenantNotFound) {
		t.Fatalf("an unknown tenant: %v", err)
	}
	check("after refusals", analysis.AnalyzerExact)
}
