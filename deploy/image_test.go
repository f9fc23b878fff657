package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/cordon-rag/cordon/cordontest"
	"github.com/cordon-rag/cordon/internal/dockertest"
)

// TestImage smoke-tests the built image (CORDON_TEST_CORDON_IMAGE, e.g.
// cordon:local from scripts/docker-images.sh) as deploy/compose.yaml runs
// it: 'cordon migrate' in a one-shot container that must exit 0, then
// 'cordon serve' as the image's non-root user; a document in and a
// retrieve out through the API; then SIGTERM (docker stop), on which the
// server finishes and exits 0 well inside the stop timeout.
func TestImage(t *testing.T) {
	image := dockertest.CordonImage()
	if image == "" {
		if dockertest.Required() {
			t.Fatal("CORDON_REQUIRE_DOCKER is set and CORDON_TEST_CORDON_IMAGE names no image to smoke-test")
		}
		t.Skip("SKIPPING the image smoke test: CORDON_TEST_CORDON_IMAGE names no image (make test/containers builds cordon:local)")
	}
	dockertest.Require(t)
	ctx := context.Background()
	opts := append(dockertest.Options(), cordontest.WithCordonImage(image), cordontest.WithTenants("acme"))
	c, err := cordontest.Run(ctx, dockertest.PostgresImage(), opts...)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cordon == nil {
		t.Fatal("no Cordon container: the API is not served from the image")
	}
	in, err := c.Cordon.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.Config.User != "65532:65532" {
		t.Errorf("the server runs as user %q, want 65532:65532", in.Config.User)
	}

	writer, err := c.Token(cordontest.Principal{Subject: "loader", Tenant: "acme", Clearance: "internal", Roles: []string{"writer"}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, c.URL()+"/v1/tenants/acme/documents/holds",
		strings.NewReader(`{"text": "PMT-771 hold release requires dual approval by treasury.", "classification": "internal"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client(writer).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT a document: got %s, want 200", resp.Status)
	}
	reader, err := c.Token(cordontest.Principal{Subject: "alice", Tenant: "acme", Clearance: "internal", Roles: []string{"reader"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"query": "PMT-771 hold"})
	resp, err = c.Client(reader).Post(c.URL()+"/v1/tenants/acme/retrieve", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []struct {
			DocID string `json:"doc_id"`
		} `json:"results"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(out.Results) != 1 || out.Results[0].DocID != "holds" {
		t.Fatalf("retrieve: %s %+v (%v), want the one document", resp.Status, out, err)
	}

	// Graceful stop: SIGTERM, then exit 0 well before Docker would kill.
	timeout := 40 * time.Second
	start := time.Now()
	if err := c.Cordon.Stop(ctx, &timeout); err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	took := time.Since(start)
	st, err := c.Cordon.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := cordontest.Logs(ctx, c.Cordon)
	if st.Running || st.ExitCode != 0 || took > timeout/2 {
		t.Fatalf("after SIGTERM: running %v, exit code %d after %v, want 0 well inside %v\n%s", st.Running, st.ExitCode, took, timeout, logs)
	}
	for _, want := range []string{`"msg":"shutting down: finishing in-flight requests"`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the server's log lacks %s:\n%s", want, logs)
		}
	}
}
