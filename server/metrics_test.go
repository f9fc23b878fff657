package server

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// scrapeSeries reads srv's /metrics and returns every series of Cordon's
// own families (name and labels, without the value), and each label's
// values.
func scrapeSeries(t *testing.T, srv *Server) (series []string, values map[string][]string) {
	t.Helper()
	values = map[string][]string{}
	for name, f := range scrapeFamilies(t, srv) {
		for _, m := range f.GetMetric() {
			series = append(series, name+labelString(m))
			for _, l := range m.GetLabel() {
				if !slices.Contains(values[l.GetName()], l.GetValue()) {
					values[l.GetName()] = append(values[l.GetName()], l.GetValue())
				}
			}
		}
	}
	sort.Strings(series)
	return series, values
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// TestMetricsLabelsBounded: no request, authenticated or not, can add a
// label value of its choosing to the metrics. Made-up methods, random
// paths, random tenant names in URLs (without a token, with another
// tenant's token, with an invalid one) and paths the router redirects are
// counted under a fixed set of methods, route patterns and codes; a second
// round of different made-up values adds no series at all.
func TestMetricsLabelsBounded(t *testing.T) {
	srv := New(Config{MetricsTenantLabels: true}, nil, newHS256Verifier(t, AuthConfig{}))
	own := signMap(t, map[string]any{"sub": "u", "exp": inAnHour(), "tenant": "wholesale", "roles": []any{"reader", "writer"}})
	send := func(method, target, token string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/", strings.NewReader(`{"query": "x"}`))
		// httptest.NewRequest refuses some targets; the server sees
		// whatever a client sends.
		req.Method, req.RequestURI = method, target
		u, err := req.URL.Parse(target)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		req.URL = u
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}
	var madeUp []string
	round := func(r int) {
		for i := range 40 {
			word := fmt.Sprintf("zq%dx%03d", r, i)
			madeUp = append(madeUp, word)
			method := strings.ToUpper(word)
			send(method, "/healthz", "")
			send(method, "/v1/tenants/"+word+"/retrieve", "")
			send(method, "/"+word, "")
			send("GET", "/"+word+"/"+word+"?"+word+"=1", "")
			send("GET", "/v1/tenants/"+word+"/../../"+word, "")
			send("POST", "/v1/tenants/"+word+"/retrieve", "")
			send("POST", "/v1/tenants/"+word+"/retrieve", own)
			send("POST", "/v1/tenants/"+word+"/retrieve", "not-a-token-"+word)
			send("PATCH", "/v1/tenants/"+word, own)
			// The router answers these with a redirect to .../documents/.
			send("PUT", "/v1/tenants/"+word+"/documents", own)
			send("DELETE", "/v1/tenants/"+word+"/documents", "")
			send("PUT", "/v1/tenants/"+word+"/documents/"+word, "")
			send("CONNECT", "/v1/tenants/"+word+"/documents", "")
			send("HEAD", "/"+word, "")
		}
	}
	round(1)
	first, values := scrapeSeries(t, srv)
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "other"}
	routes := append(srv.Routes(), "unmatched")
	for _, v := range values["method"] {
		if !slices.Contains(methods, v) {
			t.Errorf("method label %q, want one of %v", v, methods)
		}
	}
	for _, v := range values["route"] {
		if !slices.Contains(routes, v) {
			t.Errorf("route label %q, want one of %v", v, routes)
		}
	}
	for _, v := range values["code"] {
		if c, err := strconv.Atoi(v); err != nil || http.StatusText(c) == "" {
			t.Errorf("code label %q, want a status code", v)
		}
	}
	if tl := values["tenant"]; len(tl) != 0 {
		t.Errorf("tenant labels %v, want none (no retrieval was served)", tl)
	}
	for _, s := range first {
		for _, w := range madeUp {
			if strings.Contains(strings.ToLower(s), w) {
				t.Fatalf("series %s carries the made-up %q", s, w)
			}
		}
	}
	round(2)
	second, _ := scrapeSeries(t, srv)
	if !slices.Equal(first, second) {
		var added []string
		for _, s := range second {
			if !slices.Contains(first, s) {
				added = append(added, s)
			}
		}
		t.Fatalf("a second round of made-up values added %d series (%d, then %d), e.g. %v", len(added), len(first), len(second), added[:min(3, len(added))])
	}
}

// TestRequestLabels: the latency histogram's labels are taken from fixed
// sets whatever the request carried.
func TestRequestLabels(t *testing.T) {
	tests := []struct {
		name                        string
		pattern, method             string
		code                        int
		wantRoute, wantMethod, want string
	}{
		{"known", "GET /healthz", "GET", 200, "GET /healthz", "GET", "200"},
		{"HEAD on a GET route", "GET /healthz", "HEAD", 200, "GET /healthz", "HEAD", "200"},
		{"made-up method", "", "ZQABCDEFGHIJ", 405, "unmatched", "other", "405"},
		{"lower-case method", "", "get", 405, "unmatched", "other", "405"},
		{"catch-all", "/", "GET", 404, "unmatched", "GET", "404"},
		{"pattern not a route", "/v1/tenants/zq/documents/", "PUT", 307, "unmatched", "PUT", "307"},
		{"unknown code", "GET /healthz", "GET", 999, "GET /healthz", "GET", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMetrics(func() *pgxpool.Pool { return nil }, func() (audit.Stats, bool) { return audit.Stats{}, false }, false)
			m.routes = []string{"GET /healthz"}
			m.request(tt.pattern, tt.method, tt.code, time.Millisecond)
			h, err := m.latency.GetMetricWithLabelValues(tt.wantRoute, tt.wantMethod, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			var out dto.Metric
			if err := h.(prometheus.Histogram).Write(&out); err != nil {
				t.Fatal(err)
			}
			if n := out.GetHistogram().GetSampleCount(); n != 1 {
				t.Fatalf("got %d observations under route=%q method=%q code=%q, want 1", n, tt.wantRoute, tt.wantMethod, tt.want)
			}
		})
	}
}

// scrapeFamilies reads srv's /metrics into Cordon's own metric families.
func scrapeFamilies(t *testing.T, srv *Server) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	for name := range families {
		if !strings.HasPrefix(name, "cordon_") {
			delete(families, name)
		}
	}
	return families
}

// registeredNames returns the names of the Cordon families on reg.
func registeredNames(reg *prometheus.Registry) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && strings.HasPrefix(m[1], "cordon_") && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// TestMetricsAtZero: before any request, every Cordon family is exported
// but the latency histogram (whose series are made by requests), every
// counter reads 0, and each counter whose labels come from a known set has
// every one of its series, so a rate or an alert over it reads 0, not no
// data.
func TestMetricsAtZero(t *testing.T) {
	srv := New(Config{}, nil, newHS256Verifier(t, AuthConfig{}))
	families := scrapeFamilies(t, srv)
	registered := registeredNames(srv.metrics.reg)
	if len(registered) < 40 {
		t.Fatalf("got %d registered Cordon families, want the server's (at least 40): %v", len(registered), registered)
	}
	for _, name := range registered {
		if _, ok := families[name]; !ok && name != "cordon_http_request_duration_seconds" {
			t.Errorf("%s is registered but not exported before the first request", name)
		}
	}
	var counters int
	for name, f := range families {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range f.GetMetric() {
			counters++
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%s = %v before any request, want 0", name, labelString(m), v)
			}
		}
	}
	var want []string
	for _, stage := range retrieval.DegradedStages {
		want = append(want, `cordon_retrieval_degraded_total{stage="`+stage+`"}`)
	}
	for _, o := range rerank.Outcomes {
		want = append(want, `cordon_rerank_model_calls_total{outcome="`+string(o)+`"}`)
	}
	for _, o := range embed.Outcomes {
		want = append(want, `cordon_embed_calls_total{outcome="`+string(o)+`"}`)
	}
	for _, op := range admittedOps {
		for _, reason := range []string{reasonTenantLimit, reasonQueueTimeout} {
			want = append(want, `cordon_requests_refused_total{op="`+op+`",reason="`+reason+`"}`)
		}
	}
	for _, op := range []string{opGround, opAssemble} {
		want = append(want, `cordon_requests_refused_total{op="`+op+`",reason="`+reasonChunkIDs+`"}`)
	}
	for _, name := range []string{"cordon_retrievals_total", "cordon_retrieval_considered_total",
		"cordon_retrieval_excluded_by_entitlement_total", "cordon_retrieval_excluded_by_freshness_total",
		"cordon_audit_append_failures_total", "cordon_request_timeouts_total", "cordon_unknown_tenant_requests_total"} {
		want = append(want, name+"{}")
	}
	var got []string
	for name, f := range families {
		for _, m := range f.GetMetric() {
			got = append(got, name+labelString(m))
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no series %s before any request", w)
		}
	}
	t.Logf("%d families, %d counter series, all at 0", len(families), counters)
}

// replicaStats is a store of read stats only; any other method panics (the
// embedded nil Store).
type replicaStats struct {
	Store
	stats postgres.ReadStats
}

func (r replicaStats) ReadStats() postgres.ReadStats { return r.stats }
func (replicaStats) Pool() *pgxpool.Pool             { return nil }
func (replicaStats) AuditStats() audit.Stats         { return audit.Stats{} }
func (replicaStats) CacheStats() postgres.CacheStats { return postgres.CacheStats{} }
func (replicaStats) Models() *embed.Registry         { return nil }

// TestReplicaMetrics: without replicas there is no replica series; with
// two, each has its lag, its exclusions and its reads under its place in
// --replica-url's order, at the values the store reports.
func TestReplicaMetrics(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{})
	families := scrapeFamilies(t, New(Config{}, replicaStats{}, v))
	for name := range families {
		if strings.HasPrefix(name, "cordon_replica_") {
			t.Errorf("without replicas, %s is exported", name)
		}
	}
	st := replicaStats{stats: postgres.ReadStats{Primary: 9, Replicas: []postgres.ReplicaStats{
		{Served: 5, Behind: 1, Failed: 2, Lagging: 3, Healthy: true, Lag: 2500 * time.Millisecond, OverLag: true},
		{Served: 7, Healthy: false, Lag: 40 * time.Millisecond},
	}}}
	families = scrapeFamilies(t, New(Config{}, st, v))
	got := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if strings.HasPrefix(name, "cordon_replica_") {
				got[name+labelString(m)] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		`cordon_replica_lag_seconds{replica="1"}`:                   2.5,
		`cordon_replica_lag_seconds{replica="2"}`:                   0.04,
		`cordon_replica_excluded{reason="lag",replica="1"}`:         1,
		`cordon_replica_excluded{reason="failed",replica="1"}`:      0,
		`cordon_replica_excluded{reason="lag",replica="2"}`:         0,
		`cordon_replica_excluded{reason="failed",replica="2"}`:      1,
		`cordon_replica_reads_total{outcome="served",replica="1"}`:  5,
		`cordon_replica_reads_total{outcome="behind",replica="1"}`:  1,
		`cordon_replica_reads_total{outcome="failed",replica="1"}`:  2,
		`cordon_replica_reads_total{outcome="lagging",replica="1"}`: 3,
		`cordon_replica_reads_total{outcome="served",replica="2"}`:  7,
		`cordon_replica_reads_total{outcome="behind",replica="2"}`:  0,
		`cordon_replica_reads_total{outcome="failed",replica="2"}`:  0,
		`cordon_replica_reads_total{outcome="lagging",replica="2"}`: 0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("replica series:\ngot  %v\nwant %v", got, want)
	}
}
