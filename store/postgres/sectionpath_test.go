package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// TestSectionPathFields: a tenant indexed under the field rules before
// section paths (what the previous release created) keeps them, on both
// query paths, byte for byte with a reference store under the same rules,
// and stays readable by that release (reader_min 16); re-indexed with
// field terms it counts section paths and needs migration 17, and without
// field terms it is readable by the previous release again.
func TestSectionPathFields(t *testing.T) {
	ctx := context.Background()
	url := testDatabase(t)
	legacy := index.DefaultSettings()
	legacy.SectionOnly = true
	w, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.CreateTenant(ctx, "lab", legacy); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateTenant(ctx, "fresh", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	readerMin := func(tenant string) (v int, tok string) {
		t.Helper()
		if err := w.pool.QueryRow(ctx, `SELECT reader_min, tokenizer_version FROM cordon.tenants WHERE name = $1`, tenant).Scan(&v, &tok); err != nil {
			t.Fatal(err)
		}
		return v, tok
	}
	if v, tok := readerMin("lab"); v != 16 || tok != analysis.SectionFieldsVersion(analysis.AnalyzerEnglish) {
		t.Fatalf("a tenant without section paths: reader_min %d, tokenizer %q", v, tok)
	}
	if v, tok := readerMin("fresh"); v != pathFieldsReaderMin || tok != analysis.Version(analysis.AnalyzerEnglish, true) {
		t.Fatalf("a tenant created now: reader_min %d, tokenizer %q; want %d", v, tok, pathFieldsReaderMin)
	}
	refs := map[bool]*memory.Store{} // by SectionOnly
	for _, so := range []bool{false, true} {
		s := index.DefaultSettings()
		s.SectionOnly = so
		if refs[so], err = memory.New(s); err != nil {
			t.Fatal(err)
		}
	}
	var docs []cordontype.Document
	for i := range 30 {
		docs = append(docs, cordontype.Document{Tenant: "lab", DocID: fmt.Sprintf("d%02d", i), Title: fmt.Sprintf("Handbook %d", i%4),
			Text:           fmt.Sprintf("# Installation\n## Linux packages %d\n### Debian\nrun apt for release %d\n## Windows\nrun winget %d\n# Operations\nwatch the queue %d", i%3, i, i%5, i%7),
			Classification: cordontype.Classification(i % 3), Barriers: []string{}, AsOfTick: int64(i)})
	}
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
	answer := func(st retrieval.Store, text string) (string, int) {
		t.Helper()
		pol := retrieval.ServicePolicy()
		pol.Limit, pol.EnableRerank = 20, false
		q := retrieval.Query{Principal: cordontype.Principal{Tenant: "lab", Clearance: cordontype.Restricted, Barriers: []string{}}, Text: text, NowTick: 1000, Policy: pol}
		r, err := retrieval.New(st).Retrieve(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		return string(b), len(r.Chunks)
	}
	check := func(step string, sectionOnly bool) {
		t.Helper()
		for _, text := range []string{"installation apt", "linux packages", "installation", "debian release 3", "handbook windows", "operations queue"} {
			want, _ := answer(refs[sectionOnly], text)
			for name, st := range map[string]*Store{"in-memory path": mem, "SQL path": sql} {
				if got, _ := answer(st, text); got != want {
					t.Fatalf("%s, %q, %s:\n got %s\nwant %s", step, text, name, got, want)
				}
			}
		}
	}
	// "installation" is only a heading enclosing the sections with text:
	// only a section path finds it.
	if _, n := answer(refs[true], "installation"); n != 0 {
		t.Fatalf("without section paths \"installation\" finds %d chunks, want none", n)
	}
	if _, n := answer(refs[false], "installation"); n == 0 {
		t.Fatal("with section paths \"installation\" finds nothing")
	}
	check("created before section paths", true)
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, true, nil); err != nil {
		t.Fatal(err)
	}
	if v, tok := readerMin("lab"); v != pathFieldsReaderMin || tok != analysis.Version(analysis.AnalyzerEnglish, true) {
		t.Fatalf("re-indexed with field terms: reader_min %d, tokenizer %q", v, tok)
	}
	check("re-indexed with section paths", false)
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, false, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := readerMin("lab"); v != pathFieldsReaderMin-1 {
		t.Fatalf("re-indexed without field terms: reader_min %d, want %d", v, pathFieldsReaderMin-1)
	}
	// Down to migration 16 and up again: a tenant with section paths
	// stays whole and refused by migration 16's binaries meanwhile; the
	// column of one without goes.
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetAnalyzer(ctx, "fresh", analysis.AnalyzerEnglish, false, nil); err != nil {
		t.Fatal(err)
	}
	mem.Close()
	sql.Close()
	if err := migrate.DownTo(ctx, url, 16); err != nil {
		t.Fatal(err)
	}
	hasPath := func(schema string) (has bool) {
		t.Helper()
		if err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = $1 AND table_name = 'chunks' AND column_name = 'section_path')`, schema).Scan(&has); err != nil {
			t.Fatal(err)
		}
		return has
	}
	if v, _ := readerMin("lab"); v != pathFieldsReaderMin || !hasPath("cordon_t_lab") || hasPath("cordon_t_fresh") {
		t.Fatalf("after the downgrade: lab reader_min %d, lab has section_path %t, fresh %t; want %d, true, false",
			v, hasPath("cordon_t_lab"), hasPath("cordon_t_fresh"), pathFieldsReaderMin)
	}
	if _, err := migrate.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if v, _ := readerMin("lab"); v != pathFieldsReaderMin || !hasPath("cordon_t_fresh") {
		t.Fatalf("up again: lab reader_min %d, fresh has section_path %t", v, hasPath("cordon_t_fresh"))
	}
	if mem, err = Open(ctx, url, Options{CacheBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if sql, err = Open(ctx, url, Options{}); err != nil {
		t.Fatal(err)
	}
	defer sql.Close()
	check("down to 16 and up again", false)
}
