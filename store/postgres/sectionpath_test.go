package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// TestSectionPathFields: a tenant indexed under older field rules (before
// section paths, or before length-normalised frequencies) keeps them, on
// both query paths, byte for byte with a reference store under the same
// rules, and stays readable by the releases that created it (reader_min
// 16, 17); re-indexed with field terms it is under the current rules and
// needs migration 18, and without field terms it is readable by those
// releases again.
func TestSectionPathFields(t *testing.T) {
	ctx := context.Background()
	url := testDatabase(t)
	legacy := index.DefaultSettings()
	legacy.FieldRules = analysis.FieldsSectionVersion
	unnorm := index.DefaultSettings()
	unnorm.FieldRules = analysis.FieldsPathVersion
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
	if _, err := w.CreateTenant(ctx, "paths", unnorm); err != nil {
		t.Fatal(err)
	}
	readerMin := func(tenant string) (v int, tok string) {
		t.Helper()
		if err := w.pool.QueryRow(ctx, `SELECT reader_min, tokenizer_version FROM cordon.tenants WHERE name = $1`, tenant).Scan(&v, &tok); err != nil {
			t.Fatal(err)
		}
		return v, tok
	}
	if v, tok := readerMin("lab"); v != 16 || tok != analysis.RulesVersion(analysis.AnalyzerEnglish, analysis.FieldsSectionVersion) {
		t.Fatalf("a tenant without section paths: reader_min %d, tokenizer %q", v, tok)
	}
	if v, tok := readerMin("paths"); v != pathFieldsReaderMin || tok != analysis.RulesVersion(analysis.AnalyzerEnglish, analysis.FieldsPathVersion) {
		t.Fatalf("a tenant with field counts: reader_min %d, tokenizer %q", v, tok)
	}
	if v, tok := readerMin("fresh"); v != fieldsReaderMin || tok != analysis.Version(analysis.AnalyzerEnglish, true) {
		t.Fatalf("a tenant created now: reader_min %d, tokenizer %q; want %d", v, tok, fieldsReaderMin)
	}
	rules := []string{"", analysis.FieldsPathVersion, analysis.FieldsSectionVersion}
	refs := map[string]*memory.Store{} // by field rules
	for _, r := range rules {
		s := index.DefaultSettings()
		s.FieldRules = r
		if refs[r], err = memory.New(s); err != nil {
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
	pathDocs := make([]cordontype.Document, len(docs))
	for i, d := range docs {
		d.Tenant = "paths"
		pathDocs[i] = d
	}
	if _, err := w.PutBatch(ctx, pathDocs); err != nil {
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
	answerAs := func(st retrieval.Store, tenant, text string) (string, int) {
		t.Helper()
		pol := retrieval.ServicePolicy()
		pol.Limit, pol.EnableRerank = 20, false
		q := retrieval.Query{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Restricted, Barriers: []string{}}, Text: text, NowTick: 1000, Policy: pol}
		r, err := retrieval.New(st).Retrieve(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		// The reference stores hold the documents as tenant "lab".
		return strings.ReplaceAll(string(b), `"Tenant":"paths"`, `"Tenant":"lab"`), len(r.Chunks)
	}
	answer := func(st retrieval.Store, text string) (string, int) { return answerAs(st, "lab", text) }
	check := func(step, tenant, rules string) {
		t.Helper()
		for _, text := range []string{"installation apt", "linux packages", "installation", "debian release 3", "handbook windows", "operations queue", "handbook"} {
			want, _ := answer(refs[rules], text)
			for name, st := range map[string]*Store{"in-memory path": mem, "SQL path": sql} {
				if got, _ := answerAs(st, tenant, text); got != want {
					t.Fatalf("%s, %q, %s:\n got %s\nwant %s", step, text, name, got, want)
				}
			}
		}
	}
	// "installation" is only a heading enclosing the sections with text:
	// only a section path finds it.
	if _, n := answer(refs[analysis.FieldsSectionVersion], "installation"); n != 0 {
		t.Fatalf("without section paths \"installation\" finds %d chunks, want none", n)
	}
	if _, n := answer(refs[""], "installation"); n == 0 {
		t.Fatal("with section paths \"installation\" finds nothing")
	}
	// Field counts and length-normalised field frequencies rank apart.
	if a, _ := answer(refs[""], "handbook"); a == func() string { b, _ := answer(refs[analysis.FieldsPathVersion], "handbook"); return b }() {
		t.Fatal("normalised and counted field frequencies answer \"handbook\" alike")
	}
	check("created before section paths", "lab", analysis.FieldsSectionVersion)
	check("created before normalised fields", "paths", analysis.FieldsPathVersion)
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, true, nil); err != nil {
		t.Fatal(err)
	}
	if v, tok := readerMin("lab"); v != fieldsReaderMin || tok != analysis.Version(analysis.AnalyzerEnglish, true) {
		t.Fatalf("re-indexed with field terms: reader_min %d, tokenizer %q", v, tok)
	}
	check("re-indexed under the current rules", "lab", "")
	if _, err := w.SetAnalyzer(ctx, "lab", analysis.AnalyzerEnglish, false, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := readerMin("lab"); v != pathFieldsReaderMin-1 {
		t.Fatalf("re-indexed without field terms: reader_min %d, want %d", v, pathFieldsReaderMin-1)
	}
	if _, err := w.SetAnalyzer(ctx, "paths", analysis.AnalyzerEnglish, false, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := readerMin("paths"); v != pathFieldsReaderMin-1 {
		t.Fatalf("field counts re-indexed without field terms: reader_min %d, want %d", v, pathFieldsReaderMin-1)
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
	if v, _ := readerMin("lab"); v != fieldsReaderMin || !hasPath("cordon_t_lab") || hasPath("cordon_t_fresh") {
		t.Fatalf("after the downgrade: lab reader_min %d, lab has section_path %t, fresh %t; want %d, true, false",
			v, hasPath("cordon_t_lab"), hasPath("cordon_t_fresh"), fieldsReaderMin)
	}
	if _, err := migrate.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if v, _ := readerMin("lab"); v != fieldsReaderMin || !hasPath("cordon_t_fresh") {
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
	check("down to 16 and up again", "lab", "")
}
