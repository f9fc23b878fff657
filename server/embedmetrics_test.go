package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// TestEmbedMetrics: the embedding provider's calls are counted by outcome
// and timed, its requests' sizes and its retries counted; the series exist
// at 0 before any call, and without a provider.
func TestEmbedMetrics(t *testing.T) {
	toy := &embedtest.Toy{Dims: 8}
	up := httptest.NewServer(embedtest.Handler("toy-8", toy, 0))
	t.Cleanup(up.Close)
	slow := httptest.NewServer(embedtest.Handler("toy-8", toy, time.Minute))
	t.Cleanup(slow.Close)
	var reg embed.Registry
	register := func(model, url string, timeout time.Duration) {
		t.Helper()
		h, err := embed.NewHTTP(embed.HTTPConfig{API: embed.APIOpenAI, URL: url, Model: "toy-8", Dims: 8, Batch: 2,
			Retries: 1, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(model, h); err != nil {
			t.Fatal(err)
		}
	}
	register("toy-8", up.URL, 0)
	register("slow", slow.URL, 10*time.Millisecond)
	s := newModelServer(t, &reg)
	m := scrape(t, s)
	for _, o := range embed.Outcomes {
		if line := fmt.Sprintf(`cordon_embed_calls_total{outcome=%q} 0`, o); !strings.Contains(m, line) {
			t.Errorf("metrics lack %s before any call", line)
		}
	}
	ctx := context.Background()
	spec := embed.Spec{Model: "toy-8", Dims: 8}
	if _, err := reg.Vectors(ctx, spec, []string{"a", "b", "c", "d", "e"}, embed.Document); err != nil {
		t.Fatal(err)
	}
	toy.Fail.Store(true)
	if _, err := reg.Vectors(ctx, spec, []string{"f"}, embed.Query); err == nil {
		t.Fatal("a failing provider embedded")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := reg.Vectors(canceled, spec, []string{"g"}, embed.Query); err == nil {
		t.Fatal("a canceled call embedded")
	}
	if _, err := reg.Vectors(ctx, embed.Spec{Model: "slow", Dims: 8}, []string{"h"}, embed.Query); err == nil {
		t.Fatal("a provider that never answers embedded")
	}
	m = scrape(t, s)
	for _, line := range []string{
		`cordon_embed_calls_total{outcome="ok"} 1`,
		`cordon_embed_calls_total{outcome="error"} 1`,
		`cordon_embed_calls_total{outcome="canceled"} 1`,
		`cordon_embed_calls_total{outcome="timeout"} 1`,
		`cordon_embed_duration_seconds_count 4`,
		// 5 texts in requests of 2, 2 and 1, then three of 1.
		`cordon_embed_batch_texts_count 6`,
		`cordon_embed_batch_texts_sum 8`,
		`cordon_embed_batch_texts_bucket{le="1"} 4`,
		// The failing and the slow request were each sent again once.
		`cordon_embed_retries_total 2`,
		`cordon_embed_texts_total 5`,
	} {
		if !strings.Contains(m, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	if m := scrape(t, newTestServer(t)); !strings.Contains(m, `cordon_embed_calls_total{outcome="ok"} 0`) || !strings.Contains(m, "cordon_embed_batch_texts_count 0") {
		t.Errorf("a server without an embedding provider lacks the zero series")
	}
}

// newModelServer is a server whose store embeds with reg and has nothing
// else to report: the embedding metrics observe the store's registry.
func newModelServer(t *testing.T, reg *embed.Registry) *Server {
	t.Helper()
	v, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{}, modelsOnly{reg: reg}, v)
}

// modelsOnly is a store with a registry and empty statistics; any other
// method panics (the embedded nil Store).
type modelsOnly struct {
	Store
	reg *embed.Registry
}

func (m modelsOnly) Models() *embed.Registry       { return m.reg }
func (modelsOnly) Pool() *pgxpool.Pool             { return nil }
func (modelsOnly) AuditStats() audit.Stats         { return audit.Stats{} }
func (modelsOnly) CacheStats() postgres.CacheStats { return postgres.CacheStats{} }
func (modelsOnly) ReadStats() postgres.ReadStats   { return postgres.ReadStats{} }
