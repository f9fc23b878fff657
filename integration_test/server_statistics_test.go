package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/analysis"
)

// TestServerScoresIgnoreHiddenDocuments replays the attack of the issue that
// introduced the statistics scope over HTTP: a public reader queries a rare
// term that one public document holds and reads its own chunk's bm25 while
// restricted documents with and without the term are written. On an
// entitled tenant (the default for new tenants) the reader's response is
// byte-identical in all three states, on the SQL and the in-memory path; on
// a tenant switched to the tenant scope through PATCH it moves (so the probe
// can see a leak), and switching back through PATCH restores it.
func TestServerScoresIgnoreHiddenDocuments(t *testing.T) {
	for _, path := range servePaths {
		t.Run(path.name, func(t *testing.T) {
			a := startAPIServer(t, serverOpts{cache: path.cache})
			admin := tok(t, "root", "admin")
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "bank"}), http.StatusCreated)
			w := tok(t, "w", "tenant=bank", "writer")
			reader := tok(t, "r", "tenant=bank", "clearance=public", "reader")
			put := func(id, text, class string) {
				a.want(t, a.call(t, "PUT", "/v1/tenants/bank/documents/"+id, w,
					map[string]any{"text": text, "classification": class}), http.StatusOK)
			}
			put("pub-1", "Zephyr settlement window for public reporting.", "public")
			put("pub-2", "General settlement guidance for all staff members.", "public")
			query := map[string]any{"query": "zephyr settlement"}
			ask := func() string {
				t.Helper()
				r := a.want(t, a.call(t, "POST", "/v1/tenants/bank/retrieve", reader, query), http.StatusOK)
				m := r.json(t)
				delete(m, "request_id")
				return mustJSON(t, m["results"])
			}
			none := ask()
			put("res-x", "Zephyr zephyr restricted settlement notes.", "restricted")
			withTerm := ask()
			a.want(t, a.call(t, "DELETE", "/v1/tenants/bank/documents/res-x", w, nil), http.StatusOK)
			put("res-y", "Quarterly restricted settlement notes only.", "restricted")
			withoutTerm := ask()
			if withTerm != none || withoutTerm != none {
				t.Fatalf("entitled scope: the reader's results moved with hidden documents:\nnone:         %s\nwith term:    %s\nwithout term: %s", none, withTerm, withoutTerm)
			}

			a.want(t, a.call(t, "PATCH", "/v1/tenants/bank", admin, map[string]string{"bm25_statistics": "tenant"}), http.StatusOK)
			tenantScope := ask()
			if tenantScope == none {
				t.Fatalf("tenant scope: the reader's results did not move with a hidden document present; the probe cannot see a leak")
			}
			a.want(t, a.call(t, "PATCH", "/v1/tenants/bank", admin, map[string]string{"bm25_statistics": "entitled"}), http.StatusOK)
			if back := ask(); back != none {
				t.Fatalf("switched back to entitled: %s, want %s", back, none)
			}

			// The setting's edges: bad values, unknown tenants, roles.
			a.want(t, a.call(t, "PATCH", "/v1/tenants/bank", admin, map[string]string{"bm25_statistics": "everyone"}), http.StatusBadRequest)
			a.want(t, a.call(t, "PATCH", "/v1/tenants/bank", admin, map[string]string{}), http.StatusBadRequest)
			a.want(t, a.call(t, "PATCH", "/v1/tenants/nope", admin, map[string]string{"bm25_statistics": "tenant"}), http.StatusNotFound)
			a.want(t, a.call(t, "PATCH", "/v1/tenants/bank", w, map[string]string{"bm25_statistics": "tenant"}), http.StatusForbidden)
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "bank", "bm25_statistics": "tenant"}), http.StatusConflict)
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "legacy", "bm25_statistics": "tenant"}), http.StatusCreated)
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "odd", "bm25_statistics": "Entitled"}), http.StatusBadRequest)
		})
	}
}

// cliRunner returns a function that runs cordon with env and args, fails
// the test unless it exits want, and returns its stdout and stderr.
func cliRunner(t *testing.T, env map[string]string) func(want int, args ...string) string {
	return func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("cordon %v: exit %d, want %d: %s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
}

// TestCLITenantStatistics: 'cordon tenant create --bm25-statistics', 'tenant
// set' and the BM25_STATISTICS column of 'tenant list', as the README shows
// them; bad values are usage errors.
func TestCLITenantStatistics(t *testing.T) {
	dbURL := migrated(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	run := cliRunner(t, env)
	run(0, "tenant", "create", "fresh")
	run(0, "tenant", "create", "--bm25-statistics", "tenant", "legacy")
	list := run(0, "tenant", "list")
	for _, want := range []string{"BM25_STATISTICS", "fresh", "legacy"} {
		if !strings.Contains(list, want) {
			t.Fatalf("tenant list lacks %q:\n%s", want, list)
		}
	}
	scopeOf := func(name string) string {
		t.Helper()
		for _, line := range strings.Split(run(0, "tenant", "list"), "\n") {
			if f := strings.Fields(line); len(f) > 7 && f[0] == name {
				return f[7]
			}
		}
		t.Fatalf("tenant %s not listed", name)
		return ""
	}
	if got := scopeOf("fresh"); got != "entitled" {
		t.Fatalf("fresh: %s, want entitled (the default)", got)
	}
	if got := scopeOf("legacy"); got != "tenant" {
		t.Fatalf("legacy: %s, want tenant", got)
	}
	if out := run(0, "tenant", "set", "--bm25-statistics", "entitled", "legacy"); !strings.Contains(out, "bm25_statistics entitled") {
		t.Fatalf("tenant set said %q", out)
	}
	if got := scopeOf("legacy"); got != "entitled" {
		t.Fatalf("legacy after set: %s, want entitled", got)
	}
	if out := run(2, "tenant", "set", "--bm25-statistics", "all", "legacy"); !strings.Contains(out, "bm25_statistics") {
		t.Fatalf("a bad scope said %q", out)
	}
	run(1, "tenant", "set", "--bm25-statistics", "tenant", "missing")
}

// TestServerAuditRecordsTheEffectivePolicy: the audit record of a retrieve
// names every policy field that shapes the ranking, the service profile's
// values when the request leaves them out, so two retrievals that ranked
// differently never leave the same record.
func TestServerAuditRecordsTheEffectivePolicy(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	a.seed(t)
	reader := tok(t, "r", "tenant=wholesale", "clearance=internal", "reader")
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury hold"}), http.StatusOK)
	a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury hold",
		"policy": map[string]any{"rerank": "overlap", "rerank_blend": 0, "rrf_weights": map[string]any{"bm25": 0}, "max_chunks_per_doc": 0, "stop_words": "english"}}), http.StatusOK)
	rows := queryStrings(t, a.dbURL, `SELECT policy FROM cordon_t_wholesale.audit WHERE op = 'retrieve' ORDER BY seq`)
	if len(rows) != 2 {
		t.Fatalf("%d retrieve records, want 2: %q", len(rows), rows)
	}
	for i, want := range [][]string{
		{`"rerank":"idf_overlap"`, `"rerank_blend":0.9`, `"rrf_weights":{"bm25":2,"cosine":1,"doc":1}`, `"rerank_proximity":0.25`, `"rerank_doc":0.1`, `"max_chunks_per_doc":1`, `"rrf_k":10`, `"min_score":0.1`},
		{`"rerank":"overlap"`, `"rerank_blend":0`, `"rrf_weights":{"bm25":0,"cosine":1,"doc":1}`, `"max_chunks_per_doc":0`, `"stop_words":"english"`},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("record %d: policy %s lacks %s", i+1, rows[i], w)
			}
		}
	}
	// No stop list is left out, so records of the default are unchanged.
	if strings.Contains(rows[0], "stop_words") {
		t.Errorf("record 1: policy %s names stop_words, which is off", rows[0])
	}
}

// queryStrings runs a query returning one text column.
func queryStrings(t *testing.T, dbURL, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
	return out
}

// TestCLITenantFields: 'cordon tenant create --fields', 'tenant set
// --fields' and '--analyzer' (each keeping the setting it does not name),
// as 'tenant list --json' reports them; the default is english with field
// terms, and set without a flag is a usage error.
func TestCLITenantFields(t *testing.T) {
	dbURL := migrated(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	run := cliRunner(t, env)
	type tenant struct {
		Name, Analyzer string
		Fields         bool
		SectionPaths   bool `json:"section_paths"`
		FieldNorm      bool `json:"field_norm"`
	}
	settingsOf := func(name string) tenant {
		t.Helper()
		var out struct{ Tenants []tenant }
		if err := json.Unmarshal([]byte(run(0, "tenant", "list", "--json")), &out); err != nil {
			t.Fatal(err)
		}
		for _, x := range out.Tenants {
			if x.Name == name {
				return x
			}
		}
		t.Fatalf("tenant %s not listed", name)
		return tenant{}
	}
	run(0, "tenant", "create", "titled")
	run(0, "tenant", "create", "--fields=false", "--analyzer", "exact", "plain")
	if got := settingsOf("titled"); got.Analyzer != "english" || !got.Fields {
		t.Fatalf("titled: %+v, want english with fields (the defaults)", got)
	}
	if got := settingsOf("plain"); got.Analyzer != "exact" || got.Fields {
		t.Fatalf("plain: %+v, want exact without fields", got)
	}
	if out := run(0, "tenant", "set", "--fields=true", "plain"); !strings.Contains(out, "analyzer exact, fields true") {
		t.Fatalf("tenant set --fields said %q", out)
	}
	if got := settingsOf("plain"); got.Analyzer != "exact" || !got.Fields {
		t.Fatalf("plain after --fields=true: %+v, want exact with fields", got)
	}
	run(0, "tenant", "set", "--analyzer", "english", "plain")
	if got := settingsOf("plain"); got.Analyzer != "english" || !got.Fields {
		t.Fatalf("plain after --analyzer english: %+v, want english with fields kept", got)
	}
	if list := run(0, "tenant", "list"); !strings.Contains(list, "FIELDS") {
		t.Fatalf("tenant list lacks FIELDS:\n%s", list)
	}
	if got := settingsOf("titled"); !got.SectionPaths {
		t.Fatalf("titled: %+v, want section paths (the default)", got)
	}
	// A tenant of the release before section paths, as it recorded it:
	// listed as section-only until --fields=true re-indexes it.
	run(0, "tenant", "create", "older")
	execSQL(t, dbURL, `UPDATE cordon.tenants SET tokenizer_version = $1, reader_min = 16 WHERE name = 'older'`,
		analysis.RulesVersion(analysis.AnalyzerEnglish, analysis.FieldsSectionVersion))
	if got := settingsOf("older"); !got.Fields || got.SectionPaths {
		t.Fatalf("older: %+v, want fields without section paths", got)
	}
	if list := run(0, "tenant", "list"); !strings.Contains(list, "section-only") {
		t.Fatalf("tenant list does not show older as section-only:\n%s", list)
	}
	run(0, "tenant", "set", "--fields=true", "older")
	if got := settingsOf("older"); !got.Fields || !got.SectionPaths || !got.FieldNorm {
		t.Fatalf("older after --fields=true: %+v, want section paths and normalised field frequencies", got)
	}
	// A tenant of the release before length-normalised field frequencies:
	// listed as unnormalised until --fields=true re-indexes it.
	run(0, "tenant", "create", "counted")
	execSQL(t, dbURL, `UPDATE cordon.tenants SET tokenizer_version = $1, reader_min = 17 WHERE name = 'counted'`,
		analysis.RulesVersion(analysis.AnalyzerEnglish, analysis.FieldsPathVersion))
	if got := settingsOf("counted"); !got.Fields || !got.SectionPaths || got.FieldNorm {
		t.Fatalf("counted: %+v, want section paths without normalised field frequencies", got)
	}
	if list := run(0, "tenant", "list"); !strings.Contains(list, "unnormalised") {
		t.Fatalf("tenant list does not show counted as unnormalised:\n%s", list)
	}
	run(0, "tenant", "set", "--fields=true", "counted")
	if got := settingsOf("counted"); !got.FieldNorm {
		t.Fatalf("counted after --fields=true: %+v, want normalised field frequencies", got)
	}
	run(2, "tenant", "set", "plain")
	run(1, "tenant", "set", "--fields=false", "missing")
}

// TestServerCreateTenantFields: POST /v1/tenants takes analyzer and fields
// (defaults english and true); a title found only through field terms is
// retrieved under field_weight on both query paths, and not without it;
// a non-boolean fields is a 400.
func TestServerCreateTenantFields(t *testing.T) {
	for _, path := range servePaths {
		t.Run(path.name, func(t *testing.T) {
			a := startAPIServer(t, serverOpts{cache: path.cache})
			admin := tok(t, "root", "admin")
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]any{"tenant": "titled"}), http.StatusCreated)
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]any{"tenant": "plain", "analyzer": "exact", "fields": false}), http.StatusCreated)
			a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]any{"tenant": "odd", "fields": "yes"}), http.StatusBadRequest)
			ts, err := a.store.Tenants(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, x := range ts {
				got[x.Name] = fmt.Sprintf("%s %t", x.Settings.Analyzer, x.Settings.Fields)
			}
			if got["titled"] != "english true" || got["plain"] != "exact false" || got["odd"] != "" {
				t.Fatalf("tenants: %v; want titled english true, plain exact false, no odd", got)
			}
			for _, tenant := range []string{"titled", "plain"} {
				w := tok(t, "w", "tenant="+tenant, "writer")
				reader := tok(t, "r", "tenant="+tenant, "clearance=internal", "reader")
				a.want(t, a.call(t, "PUT", "/v1/tenants/"+tenant+"/documents/vacuum", w,
					map[string]any{"text": "# Reclaiming storage\nDead tuples are removed.", "title": "VACUUM", "classification": "internal"}), http.StatusOK)
				for _, fw := range []float64{0, 1} {
					r := a.want(t, a.call(t, "POST", "/v1/tenants/"+tenant+"/retrieve", reader,
						map[string]any{"query": "vacuum", "policy": map[string]any{"field_weight": fw, "enable_rerank": false}}), http.StatusOK)
					n := len(r.json(t)["results"].([]any))
					if want := tenant == "titled" && fw > 0; (n > 0) != want {
						t.Errorf("%s, field_weight %v: %d results, want some: %t", tenant, fw, n, want)
					}
				}
			}
		})
	}
}
