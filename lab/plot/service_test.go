package plot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/lab/bench"
)

func serviceReport(tenants, clients int, store, http float64) *bench.Report {
	return &bench.Report{Tenants: tenants, Concurrency: clients, Systems: map[string]*bench.SystemResult{
		bench.SystemCordon: {QPS: store}, bench.SystemHTTP: {QPS: http}}}
}

func TestServiceChart(t *testing.T) {
	png := filepath.Join(t.TempDir(), "service.png")
	reports := []*bench.Report{
		serviceReport(1, 1, 1000, 500), serviceReport(1, 8, 2000, 1200), serviceReport(1, 8, 2100, 1300),
		serviceReport(1, 32, 1900, 1200), serviceReport(20, 8, 2800, 1250),
	}
	if err := Service(reports, png); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) || len(b) < 10_000 {
		t.Fatalf("service.png: %d bytes, not a chart", len(b))
	}
	// Reports without the service path have nothing to compare.
	noHTTP := &bench.Report{Tenants: 1, Concurrency: 8, Systems: map[string]*bench.SystemResult{bench.SystemCordon: {QPS: 1}}}
	if err := Service([]*bench.Report{noHTTP}, png); err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("a report without http: %v, want an error naming it", err)
	}
}
