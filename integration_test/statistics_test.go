package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex/memindextest"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// scopePath is one store and query path under test, holding tenant "full"
// (every document) and tenant "seen" (only the documents one principal may
// see).
type scopePath struct {
	name  string
	store retrieval.Store
	put   func(cordontype.Document)
}

// scopePaths opens the four paths with the same settings: the reference,
// memindex, the Postgres SQL path and the Postgres in-memory path.
func scopePaths(t *testing.T, dbURL string, settings index.Settings) []scopePath {
	t.Helper()
	ctx := context.Background()
	ref, err := memory.New(settings)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := memindextest.NewStore(settings)
	if err != nil {
		t.Fatal(err)
	}
	sql := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	cached := openStore(t, dbURL, postgres.Options{CacheBytes: 1 << 28})
	putOn := func(p interface {
		Put(context.Context, cordontype.Document) ([]cordontype.Chunk, error)
	}) func(cordontype.Document) {
		return func(d cordontype.Document) {
			t.Helper()
			if _, err := p.Put(ctx, d); err != nil {
				t.Fatalf("put %s/%s: %v", d.Tenant, d.DocID, err)
			}
		}
	}
	return []scopePath{
		{"reference", ref, putOn(ref)},
		{"memindex", mi, putOn(mi)},
		// Both Postgres paths read the same database: the SQL store writes.
		{"postgres sql", sql, putOn(sql)},
		{"postgres in-memory", cached, func(cordontype.Document) {}},
	}
}

// answer is what a principal receives for one query: the results without
// the funnel counters (withheld from non-auditors), a grounding report and an
// assembled context over them.
func answer(t *testing.T, st retrieval.Store, p cordontype.Principal, query string, pol retrieval.Policy) (received, counters string) {
	t.Helper()
	res, err := retrieval.New(st).Retrieve(context.Background(), retrieval.Query{Principal: p, Text: query, NowTick: 150, Policy: pol})
	if err != nil {
		t.Fatalf("retrieve %q: %v", query, err)
	}
	chunks := make([]cordontype.Chunk, len(res.Chunks))
	for i := range res.Chunks {
		res.Chunks[i].Chunk.Tenant = "" // the two tenants' copies differ only here
		chunks[i] = res.Chunks[i].Chunk
	}
	rep, err := grounding.Check([]string{query, "settlement window closes"}, chunks, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	ctxt, err := assemble.Context(assemble.Request{Question: query, Retrieved: chunks, BudgetTokens: 120, Instructions: "cite"})
	var asm any = ctxt
	if err != nil {
		asm = err.Error()
	}
	b, err := json.Marshal(map[string]any{"results": res.Chunks, "degraded": res.Degraded, "expansion": res.Expansion, "ground": rep, "assemble": asm})
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fmt.Sprintf("considered=%d hidden=%d stale=%d", res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness)
}

// hiddenRounds is how many random corpora
// TestHiddenDocumentsChangeNothingAPrincipalReceives builds per scope.
var hiddenRounds = 8

// TestHiddenDocumentsChangeNothingAPrincipalReceives: under the entitled
// scope, for random corpora, principals and label sets, a principal's
// retrieve, ground and assemble answers are byte-identical whether or not
// the tenant holds documents it may not see, on every store and query path.
// The auditor's view (the funnel counters) still changes. Under the tenant
// scope the same corpora move the scores, which shows the test can fail.
func TestHiddenDocumentsChangeNothingAPrincipalReceives(t *testing.T) {
	words := []string{"zephyr", "settlement", "window", "closes", "wire", "hold", "release", "ledger", "desk", "margin", "swap", "breach", "limit", "audit"}
	labels := []string{"deal-a", "deal-b", "deal-c"}
	policies := map[string]retrieval.Policy{"default": retrieval.DefaultPolicy()}
	p := retrieval.DefaultPolicy()
	p.Rerank, p.RerankBlend, p.RRFK, p.RRFWeights = retrieval.RerankIDFOverlap, 0.5, 10, retrieval.Weights{BM25: 2, Cosine: 1}
	policies["idf_overlap blend"] = p
	p = retrieval.DefaultPolicy()
	p.EnableRerank, p.TopN = false, 3
	stale := int64(20)
	p.MaxStaleTicks = &stale
	policies["no rerank, fresh only"] = p
	// Query expansion reads the principal's top chunks and idf: neither may
	// depend on hidden documents.
	p = retrieval.DefaultPolicy()
	p.EnableRerank, p.PRFDocs, p.PRFTerms, p.PRFWeight = false, 3, 4, 0.5
	policies["prf, no rerank"] = p
	p = retrieval.DefaultPolicy()
	p.Rerank, p.PRFDocs, p.PRFTerms, p.PRFWeight = retrieval.RerankIDFOverlap, 2, 10, 1
	policies["prf, idf_overlap"] = p
	// Document evidence: the document ranking's N, df and lengths, and
	// which documents it ranks, may not depend on hidden documents either.
	p = retrieval.DefaultPolicy()
	p.RRFWeights.Doc = 1
	policies["doc evidence"] = p
	p = retrieval.ServicePolicy()
	p.RRFWeights.Doc, p.MaxStaleTicks = 2, &stale
	policies["doc evidence, service profile, fresh only"] = p
	p = retrieval.DefaultPolicy()
	p.EnableRerank, p.PRFDocs, p.PRFTerms, p.RRFWeights = false, 2, 4, retrieval.Weights{BM25: 1, Cosine: 0, Doc: 3}
	policies["doc evidence, prf, no rerank"] = p
	// rerank_doc reads the document ranking's scores in the rerank.
	p = retrieval.DefaultPolicy()
	p.Rerank, p.RerankBlend, p.RRFWeights.Doc, p.RerankDoc = retrieval.RerankIDFOverlap, 0.5, 1, 0.5
	policies["doc evidence in the rerank"] = p
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	slices.Sort(names)

	for _, scope := range []bm25.Scope{bm25.ScopeEntitled, bm25.ScopeTenant} {
		settings := index.DefaultSettings()
		settings.Statistics = scope
		settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 8, 2
		moved, countersMoved, compared := 0, 0, 0
		for round := range hiddenRounds {
			r := rand.New(rand.NewPCG(uint64(round), 7))
			principal := cordontype.Principal{
				Clearance: cordontype.Classification(r.IntN(4)),
				Barriers:  []string{labels[r.IntN(3)]},
			}
			paths := scopePaths(t, migrated(t), settings)
			var docs []cordontype.Document
			for i := range 40 {
				var text strings.Builder
				for range 5 + r.IntN(20) {
					text.WriteString(words[r.IntN(len(words))] + " ")
				}
				d := cordontype.Document{DocID: fmt.Sprintf("d%02d", i), Text: text.String(),
					Classification: cordontype.Classification(r.IntN(4)), AsOfTick: int64(100 + r.IntN(50))}
				if r.IntN(3) == 0 {
					d.Barriers = []string{labels[r.IntN(3)]}
				}
				docs = append(docs, d)
			}
			hidden := 0
			for _, d := range docs {
				c := cordontype.Chunk{Tenant: "full", Classification: d.Classification, Barriers: d.Barriers}
				visible := retrieval.Visible(cordontype.Principal{Tenant: "full", Clearance: principal.Clearance, Barriers: principal.Barriers}, &c)
				for _, path := range paths {
					full := d
					full.Tenant = "full"
					path.put(full)
					if visible {
						seen := d
						seen.Tenant = "seen"
						path.put(seen)
					}
				}
				if !visible {
					hidden++
				}
			}
			if hidden == 0 || hidden == len(docs) {
				t.Fatalf("round %d: %d of %d documents hidden: the corpus does not test anything", round, hidden, len(docs))
			}
			for q := range 12 {
				var query strings.Builder
				for range 1 + r.IntN(4) {
					query.WriteString(words[r.IntN(len(words))] + " ")
				}
				for _, pname := range names {
					var reference string
					for _, path := range paths {
						pf, ps := principal, principal
						pf.Tenant, ps.Tenant = "full", "seen"
						gotFull, cFull := answer(t, path.store, pf, query.String(), policies[pname])
						gotSeen, cSeen := answer(t, path.store, ps, query.String(), policies[pname])
						compared++
						if gotFull != gotSeen {
							moved++
							if scope == bm25.ScopeEntitled {
								t.Fatalf("%s, round %d, query %d %q, policy %s: hidden documents changed what the principal receives:\nwith:    %s\nwithout: %s",
									path.name, round, q, query.String(), pname, gotFull, gotSeen)
							}
						}
						if cFull != cSeen {
							countersMoved++
						}
						// Every path answers exactly as the reference does.
						if reference == "" {
							reference = gotFull
						} else if gotFull != reference {
							t.Fatalf("%s, scope %s, round %d, query %q, policy %s: differs from the reference:\ngot:  %s\nwant: %s",
								path.name, scope, round, query.String(), pname, gotFull, reference)
						}
					}
				}
			}
		}
		t.Logf("scope %s: %d comparisons, answers moved in %d, counters moved in %d", scope, compared, moved, countersMoved)
		if countersMoved == 0 {
			t.Errorf("scope %s: the funnel counters never changed with hidden documents: the auditor's view must still see them", scope)
		}
		if scope == bm25.ScopeTenant && moved == 0 {
			t.Errorf("scope tenant: hidden documents never moved an answer: the corpus cannot detect a leak")
		}
	}
}

// TestStatisticsScopeMigration: migration 7 keeps existing tenants on the
// tenant scope (their ranking unchanged) and fills the label-set counters
// from their chunks, so switching such a tenant to entitled needs no
// re-index; a tenant created afterwards defaults to entitled; down and up
// again keep results equal to the reference's.
func TestStatisticsScopeMigration(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	tenantScope := index.DefaultSettings()
	tenantScope.Statistics = bm25.ScopeTenant
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &tenantScope})
	words := []string{"wire", "hold", "release", "ledger", "swap", "margin", "tx4096", "desk", "limit", "breach"}
	var docs []cordontype.Document
	for i := range 30 {
		var text strings.Builder
		for j := range 10 + i%9 {
			text.WriteString(words[(i*j+j*j+i)%len(words)] + " ")
		}
		d := cordontype.Document{Tenant: "mig", DocID: fmt.Sprintf("d%d", i), Text: text.String(),
			Classification: cordontype.Classification(i % 4)}
		if i%5 == 0 {
			d.Barriers = []string{"deal-x"}
		}
		docs = append(docs, d)
		put(t, st, d)
	}
	if _, err := st.Delete(ctx, "mig", "d7"); err != nil {
		t.Fatal(err)
	}
	docs = slices.DeleteFunc(docs, func(d cordontype.Document) bool { return d.DocID == "d7" })
	st.Close()

	if err := migrate.DownTo(ctx, dbURL, 6); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM information_schema.tables WHERE table_name = 'label_stats'`); n != 0 {
		t.Fatalf("down to 6 left %d label_stats tables", n)
	}
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dbURL, postgres.Options{})
	ts, err := st.Tenants(ctx)
	if err != nil || len(ts) != 1 || ts[0].Settings.Statistics != bm25.ScopeTenant {
		t.Fatalf("after the upgrade: tenants %+v (err %v), want mig on the tenant scope", ts, err)
	}
	if n, want := queryInt(t, dbURL, `SELECT coalesce(sum(n_chunks), 0)::bigint FROM cordon_t_mig.label_stats`),
		queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_mig.chunks`); n != want {
		t.Fatalf("label_stats count %d chunks, the tenant has %d", n, want)
	}
	principals := []cordontype.Principal{
		{Tenant: "mig", Clearance: cordontype.Public},
		{Tenant: "mig", Clearance: cordontype.Confidential},
		{Tenant: "mig", Clearance: cordontype.Internal, Barriers: []string{"deal-x"}},
		{Tenant: "mig", Clearance: cordontype.Restricted, Barriers: []string{"deal-x"}},
	}
	check := func(step string, scope bm25.Scope) {
		t.Helper()
		settings := index.DefaultSettings()
		settings.Statistics = scope
		ref, err := memory.New(settings)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if _, err := ref.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range principals {
			for _, text := range []string{"wire hold", "tx4096 ledger breach", "desk limit margin swap"} {
				q := retrieval.Query{Principal: p, Text: text, Policy: retrieval.DefaultPolicy()}
				want, err := retrieval.New(ref).Retrieve(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := retrieval.New(st).Retrieve(ctx, q)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
					t.Fatalf("%s, %+v, %q:\ngot  %s\nwant %s", step, p, text, g, w)
				}
			}
		}
	}
	check("upgraded, tenant scope", bm25.ScopeTenant)
	if found, err := st.SetStatistics(ctx, "mig", bm25.ScopeEntitled); err != nil || !found {
		t.Fatalf("SetStatistics: %v, %v", found, err)
	}
	check("switched to entitled, no re-index", bm25.ScopeEntitled)
	if found, err := st.SetStatistics(ctx, "nope", bm25.ScopeEntitled); err != nil || found {
		t.Fatalf("SetStatistics on an unknown tenant: found %v, err %v; want false, nil", found, err)
	}
	if _, err := st.SetStatistics(ctx, "mig", "everyone"); err == nil {
		t.Fatal("SetStatistics accepted an unknown scope")
	}
	if _, err := st.CreateTenant(ctx, "fresh", index.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTenant(ctx, "fresh", tenantScope); err == nil {
		t.Fatal("creating an existing tenant with another scope succeeded")
	}
	// A row inserted without naming the scope takes the column default.
	execSQL(t, dbURL, `INSERT INTO cordon.tenants (name, schema_name, dims, k1, b, max_words, overlap_words, tokenizer_version, incarnation)
		VALUES ('bare', 'cordon_t_bare', 256, 1.5, 0.75, 200, 40, 'x', nextval('cordon.tenant_incarnation'))`)
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon.tenants WHERE name IN ('fresh', 'bare') AND bm25_statistics = 'entitled'`); n != 2 {
		t.Fatalf("%d of the 2 tenants created after the migration are entitled", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
