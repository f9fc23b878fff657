package integration_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeDefaultCache: 'cordon serve' with no cache flag ranks from
// memory: it logs the budget it chose (a quarter of what the process may
// use), answers a tenant's first retrieve in SQL while the tenant loads in
// the background, then from memory with the same results, and reports it
// all on the metrics listener.
func TestServeDefaultCache(t *testing.T) {
	dbURL := newDatabase(t)
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_DATABASE_URL": dbURL, "CORDON_LISTEN": "127.0.0.1:0", "CORDON_MIGRATE": "1",
		"CORDON_AUDIT_KEY_FILE": keyringFile(t, testKeyring("k1")), "CORDON_METRICS_ADDR": "127.0.0.1:0"}
	base, metricsURL, stderr := startServe(t, env)

	var config struct {
		Msg        string `json:"msg"`
		CacheBytes int64  `json:"cache_bytes"`
		Rule       string `json:"cache_budget_rule"`
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"config"`) {
			if err := json.Unmarshal([]byte(line), &config); err != nil {
				t.Fatal(err)
			}
		}
	}
	if config.CacheBytes <= 0 || !strings.HasPrefix(config.Rule, "auto: 1/4 of ") {
		t.Fatalf("config log: cache_bytes %d, rule %q; want an automatic budget", config.CacheBytes, config.Rule)
	}

	a := &apiServer{url: base, dbURL: dbURL, client: &http.Client{Timeout: 30 * time.Second}}
	a.seed(t)
	reader := tok(t, "p", "tenant=wholesale", "clearance=confidential", "reader")
	retrieve := func() string {
		r := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury hold approval"}), http.StatusOK)
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		return strings.Join(resultIDs(t, m), ",")
	}
	metric := func(body, name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks %s", name)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := retrieve()
	if first == "" {
		t.Fatal("the first retrieve found nothing")
	}
	body := a.get(t, metricsURL)
	if got := metric(body, `cordon_cache_answers_total{path="sql"}`); got != 1 {
		t.Fatalf("first retrieve: %v answers in SQL, want 1 (the tenant was not loaded yet)", got)
	}
	if metric(body, "cordon_cache_budget_bytes") != float64(config.CacheBytes) {
		t.Fatalf("budget metric %v, want the logged %d", metric(body, "cordon_cache_budget_bytes"), config.CacheBytes)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		body = a.get(t, metricsURL)
		if metric(body, "cordon_cache_loads_in_progress") == 0 && metric(body, "cordon_cache_loads_total") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant was not loaded within a minute:\n%s", body)
		}
	}
	if got := retrieve(); got != first {
		t.Fatalf("from memory: %s, in SQL: %s", got, first)
	}
	body = a.get(t, metricsURL)
	if metric(body, `cordon_cache_answers_total{path="memory"}`) != 1 || metric(body, "cordon_cache_tenants") != 1 ||
		metric(body, "cordon_cache_bytes") <= 0 || metric(body, "cordon_cache_load_seconds_total") <= 0 || metric(body, "cordon_cache_evictions_total") != 0 {
		t.Fatalf("after the load:\n%s", body)
	}
}
