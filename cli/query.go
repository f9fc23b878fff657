package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/retrieval"
)

func queryCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "query",
		Summary: "retrieve through a running 'cordon serve', with citations",
		Usage: `Usage: cordon query [flags] QUERY...

Sends QUERY to a running server's retrieve endpoint with a bearer token and
prints the results with their citations (chunk id, document, section and
code-point span) and digests (pass them to ground or assemble as "digests"
to refuse a chunk whose document has been replaced since). --json prints the
server's JSON response unchanged, for scripts. The tenant defaults to the token's tenant claim.

Examples:
  export CORDON_TOKEN=$(cordon token --sub alice --tenant wholesale --clearance confidential --role reader)
  cordon query --server http://127.0.0.1:8080 "PMT-771 hold release"
  cordon query --json --limit 10 --max-stale-ticks 86400 "settlement window" | jq .results
  cordon query --rerank model --rerank-budget 500ms "why was PMT-771 held"
`,
		Run: runQuery,
	}
}

// tokenTenant reads the tenant claim of a JWT without verifying it (the
// server verifies); it only picks the default path.
func tokenTenant(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Tenant string `json:"tenant"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Tenant
}

func runQuery(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	srv := cmdline.EnvString(fs, env, "server", "CORDON_SERVER", "http://127.0.0.1:8080", "server base URL")
	token := cmdline.EnvString(fs, env, "token", "CORDON_TOKEN", "", "bearer token")
	tenant := fs.String("tenant", "", "tenant (default: the token's tenant claim)")
	asJSON := fs.Bool("json", false, "print the server's JSON response")
	limit := fs.Int("limit", 0, "results to return (default: the server's, 5)")
	nowTick := fs.Int64("now-tick", -1, "now_tick (default: the server clock)")
	maxStale := fs.Int64("max-stale-ticks", -1, "freshness contract: drop chunks older than this many ticks")
	noRerank := fs.Bool("no-rerank", false, "shed the rerank stage (reported as degraded)")
	prfDocs := fs.Int("prf-docs", 0, "query expansion from your top N BM25 chunks (0: off; see docs/decisions.md)")
	rerankKind := fs.String("rerank", "", "rerank kind: overlap, idf_overlap, or model (the server's cross-encoder; default: the server's, idf_overlap)")
	rerankBudget := fs.Duration("rerank-budget", 0, "latency budget of the model reranker, e.g. 500ms (default: the server's for your tenant)")
	timeout := fs.Duration("timeout", 30*time.Second, "request timeout")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: give a QUERY", cmdline.ErrUsage)
	}
	if *token == "" {
		return fmt.Errorf("%w: give --token or set CORDON_TOKEN (see 'cordon token')", cmdline.ErrUsage)
	}
	tn := *tenant
	if tn == "" {
		tn = tokenTenant(*token)
	}
	if tn == "" {
		return fmt.Errorf("%w: the token has no tenant claim; give --tenant", cmdline.ErrUsage)
	}
	body := map[string]any{"query": strings.Join(fs.Args(), " ")}
	if *nowTick >= 0 {
		body["now_tick"] = *nowTick
	}
	policy := map[string]any{}
	if *limit > 0 {
		policy["limit"] = *limit
	}
	if *maxStale >= 0 {
		policy["max_stale_ticks"] = *maxStale
	}
	if *noRerank {
		policy["enable_rerank"] = false
	}
	if *prfDocs != 0 {
		policy["prf_docs"] = *prfDocs
	}
	if *rerankKind != "" {
		policy["rerank"] = *rerankKind
	}
	if *rerankBudget != 0 {
		d, err := cmdline.ParseBudget("--rerank-budget", rerankBudget.String())
		if err != nil {
			return err
		}
		policy["rerank_budget_ms"] = cmdline.BudgetMS(d)
	}
	if len(policy) > 0 {
		body["policy"] = policy
	}
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	u := strings.TrimSuffix(*srv, "/") + "/v1/tenants/" + url.PathEscape(tn) + "/retrieve"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+*token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("query %s: %w", *srv, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("server answered %d %s: %s", res.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("server answered %d", res.StatusCode)
	}
	if *asJSON {
		_, err := env.Stdout.Write(raw)
		return err
	}
	var out struct {
		Results               []retrieval.ScoredJSON `json:"results"`
		Degraded              []string               `json:"degraded"`
		Expansion             []string               `json:"expansion"`
		Considered            *int                   `json:"considered"`
		ExcludedByEntitlement *int                   `json:"excluded_by_entitlement"`
		ExcludedByFreshness   *int                   `json:"excluded_by_freshness"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("the server's response is not a retrieve result: %w", err)
	}
	if len(out.Results) == 0 {
		fmt.Fprintln(env.Stdout, "no results")
	}
	for i, r := range out.Results {
		score := fmt.Sprintf("fused %.4f", r.Fused)
		if r.Rerank != nil {
			score = fmt.Sprintf("overlap %.2f, %s", *r.Rerank, score)
		}
		fmt.Fprintf(env.Stdout, "%d. [%s | %s | %s | %d-%d]  (%s)\n", i+1, r.ChunkID, r.DocID, r.Section, r.StartChar, r.EndChar, score)
		fmt.Fprintf(env.Stdout, "   %s\n", r.Digest)
		fmt.Fprintf(env.Stdout, "   %s\n\n", excerpt(r.Text, 300))
	}
	if len(out.Degraded) > 0 {
		fmt.Fprintf(env.Stdout, "degraded: %s\n", strings.Join(out.Degraded, ", "))
	}
	if len(out.Expansion) > 0 {
		fmt.Fprintf(env.Stdout, "expansion: %s\n", strings.Join(out.Expansion, ", "))
	}
	if out.Considered != nil {
		fmt.Fprintf(env.Stdout, "considered %d, excluded by entitlement %d, by freshness %d\n", *out.Considered, deref(out.ExcludedByEntitlement), deref(out.ExcludedByFreshness))
	}
	return nil
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// excerpt collapses whitespace and cuts s to n code points.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
