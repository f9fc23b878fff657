package cordontest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
	"github.com/cordon-rag/cordon/internal/dockertest"
	"github.com/cordon-rag/cordon/store/postgres"
)

// TestRun starts Cordon in the test process over a PostgreSQL container
// and checks what a user's test relies on: the tenant exists, tokens carry
// their principal (a document above a reader's clearance stays hidden),
// requests without a token are refused, and the database URL reaches the
// migrated schema.
func TestRun(t *testing.T) {
	dockertest.Require(t)
	ctx := context.Background()
	c, err := cordontest.Run(ctx, dockertest.PostgresImage(), append(dockertest.Options(), cordontest.WithTenants("acme"))...)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:") && !strings.HasPrefix(c.URL(), "http://localhost:") {
		t.Errorf("URL %q is not on loopback", c.URL())
	}

	writer := token(t, c, cordontest.Principal{Subject: "loader", Tenant: "acme", Clearance: "restricted", Roles: []string{"writer"}})
	put(t, c.Client(writer), c.URL()+"/v1/tenants/acme/documents/holds", map[string]any{
		"text": "PMT-771 hold release requires dual approval by treasury.", "classification": "internal"})
	put(t, c.Client(writer), c.URL()+"/v1/tenants/acme/documents/limits", map[string]any{
		"text": "PMT-771 hold limits for the board only.", "classification": "restricted"})

	tests := []struct {
		name      string
		clearance string
		want      []string
	}{
		{"internal reader", "internal", []string{"holds"}},
		{"restricted reader", "restricted", []string{"holds", "limits"}},
		{"public reader", "public", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := token(t, c, cordontest.Principal{Subject: "alice", Tenant: "acme", Clearance: tt.clearance, Roles: []string{"reader"}})
			got := retrieve(t, c.Client(tok), c.URL()+"/v1/tenants/acme/retrieve", "PMT-771 hold")
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got documents %q, want %q", got, tt.want)
			}
		})
	}

	resp, err := http.Post(c.URL()+"/v1/tenants/acme/retrieve", "application/json", strings.NewReader(`{"query":"hold"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: got %s, want 401", resp.Status)
	}

	st, err := postgres.Open(ctx, c.DatabaseURL(), postgres.Options{})
	if err != nil {
		t.Fatalf("open the store at DatabaseURL: %v", err)
	}
	st.Close()
}

// TestToken: claims the server would refuse fail at minting.
func TestToken(t *testing.T) {
	var c cordontest.Container
	tests := []struct {
		name string
		p    cordontest.Principal
	}{
		{"no subject", cordontest.Principal{Roles: []string{"reader"}}},
		{"unknown role", cordontest.Principal{Subject: "a", Roles: []string{"superuser"}}},
		{"unknown clearance", cordontest.Principal{Subject: "a", Clearance: "secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tok, err := c.Token(tt.p); err == nil {
				t.Fatalf("got token %q, want an error", tok)
			}
		})
	}
}

func token(t *testing.T, c *cordontest.Container, p cordontest.Principal) string {
	t.Helper()
	tok, err := c.Token(p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func put(t *testing.T, client *http.Client, url string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: got %s, want 200", url, resp.Status)
	}
}

// retrieve returns the doc_id of each result.
func retrieve(t *testing.T, client *http.Client, url, query string) []string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query})
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retrieve: got %s, want 200", resp.Status)
	}
	var out struct {
		Results []struct {
			DocID string `json:"doc_id"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range out.Results {
		ids = append(ids, r.DocID)
	}
	return ids
}
