package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/cordon-rag/cordon/store/postgres"
)

// monitoringFiles are the alert rules and the dashboard shipped in deploy/:
// every metric and label they name must be one the server exports.
var monitoringFiles = []string{
	"../deploy/prometheus/cordon-rules.yaml",
	"../deploy/prometheus/cordon-rules.test.yaml",
	"../deploy/k8s/prometheusrule/prometheusrule.yaml",
	"../deploy/grafana/cordon.json",
}

// targetLabels are the labels Prometheus adds to every series it scrapes;
// the rules and the dashboard may select on them.
var targetLabels = []string{"job", "instance"}

// selectorRE finds a Cordon metric name followed by a label selector; the
// matchers are read by matcherRE one at a time (a value may hold braces,
// as the route pattern "POST /v1/tenants/{tenant}/retrieve" does).
var (
	metricNameRE = regexp.MustCompile(`\bcordon_[a-z_]+\b`)
	selectorRE   = regexp.MustCompile(`\b(cordon_[a-z_]+)\{`)
	matcherRE    = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?`)
)

// stringsOf returns every string in a decoded YAML or JSON value.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, stringsOf(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, stringsOf(e)...)
		}
		return out
	}
	return nil
}

// TestAlertsNameExportedMetrics: every metric the alert rules, their unit
// tests, the PrometheusRule and the Grafana dashboard name is one the
// server exports (a histogram's _bucket, _sum and _count included); every
// label they select on is one of its labels (or job and instance, which
// Prometheus adds); and every value they select is one the label takes,
// so a renamed metric, label or route fails here, not silently on call.
// The server is made over a store with two replicas, so the replica series
// (replica="1", "2") are among those exported.
func TestAlertsNameExportedMetrics(t *testing.T) {
	// A store with two replicas: the replica series exist only with
	// replicas configured, one set per replica (replica="1", "2").
	st := replicaStats{stats: postgres.ReadStats{Replicas: []postgres.ReplicaStats{{Healthy: true}, {Healthy: true}}}}
	srv := New(Config{}, st, newHS256Verifier(t, AuthConfig{}))
	// One request, so the latency histogram has a series.
	srv.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	families := scrapeFamilies(t, srv)
	labels := map[string][]string{} // family -> label names
	values := map[string][]string{} // label -> values exported
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels[name], l.GetName()) {
					labels[name] = append(labels[name], l.GetName())
				}
				if !slices.Contains(values[l.GetName()], l.GetValue()) {
					values[l.GetName()] = append(values[l.GetName()], l.GetValue())
				}
			}
		}
	}
	// Values a label takes that one request does not show.
	values["route"] = append(srv.Routes(), "unmatched")
	values["method"] = append(slices.Clone(httpMethods), "other")
	values["code"] = []string{"other"}
	for c := 100; c < 600; c++ {
		if http.StatusText(c) != "" {
			values["code"] = append(values["code"], strconv.Itoa(c))
		}
	}
	// family resolves a name as the rules write it to its family.
	family := func(name string) (string, bool) {
		if _, ok := families[name]; ok {
			return name, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base, ok := strings.CutSuffix(name, suffix)
			if !ok {
				continue
			}
			f, ok := families[base]
			if ok && (f.GetType() == dto.MetricType_HISTOGRAM || suffix != "_bucket" && f.GetType() == dto.MetricType_SUMMARY) {
				return base, true
			}
		}
		return "", false
	}
	for _, path := range monitoringFiles {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if strings.HasSuffix(path, ".json") {
				err = json.Unmarshal(raw, &doc)
			} else {
				err = yaml.Unmarshal(raw, &doc)
			}
			if err != nil {
				t.Fatalf("does not parse: %v", err)
			}
			names := 0
			for _, s := range stringsOf(doc) {
				for _, name := range metricNameRE.FindAllString(s, -1) {
					names++
					if _, ok := family(name); !ok {
						t.Errorf("names %s, which the server does not export", name)
					}
				}
				for _, loc := range selectorRE.FindAllStringSubmatchIndex(s, -1) {
					name := s[loc[2]:loc[3]]
					fam, ok := family(name)
					if !ok {
						continue // reported above
					}
					rest := s[loc[1]:]
					for !strings.HasPrefix(strings.TrimSpace(rest), "}") {
						m := matcherRE.FindStringSubmatch(rest)
						if m == nil {
							t.Errorf("%s{%s: cannot read the matchers", name, rest[:min(len(rest), 60)])
							break
						}
						rest = rest[len(m[0]):]
						label, op, value := m[1], m[2], m[3]
						if slices.Contains(targetLabels, label) {
							continue
						}
						if !slices.Contains(labels[fam], label) {
							t.Errorf("%s selects on label %q; %s has labels %v", name, label, fam, labels[fam])
							continue
						}
						if strings.Contains(value, "$") {
							continue // a dashboard variable
						}
						match := func(v string) bool { return v == value }
						if op == "=~" || op == "!~" {
							re, err := regexp.Compile("^(?:" + value + ")$")
							if err != nil {
								t.Errorf("%s{%s%s%q}: %v", name, label, op, value, err)
								continue
							}
							match = re.MatchString
						}
						if !slices.ContainsFunc(values[label], match) {
							t.Errorf("%s{%s%s%q} matches none of the values %s takes: %v", name, label, op, value, label, values[label])
						}
					}
				}
			}
			if names == 0 {
				t.Fatal("names no Cordon metric")
			}
		})
	}
}
