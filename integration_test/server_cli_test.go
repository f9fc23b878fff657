package integration_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerCLI runs cordon serve, token, ingest and query together.
func TestServerCLI(t *testing.T) {
	dbURL := newDatabase(t)
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(u.User.Username(), "hunter2-password")
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_DATABASE_URL": u.String(), "CORDON_LISTEN": "127.0.0.1:0", "CORDON_MIGRATE": "1",
		"CORDON_AUDIT_KEY_FILE": keyringFile(t, testKeyring("k1")), "CORDON_METRICS_ADDR": "127.0.0.1:0"}

	// serve, until the test ends.
	base, metricsURL, stderr := startServe(t, env)
	logs := stderr.String()
	if strings.Contains(logs, "hunter2") || strings.Contains(logs, testSecret) || !strings.Contains(logs, "REDACTED") {
		t.Fatalf("the config log is not redacted: %s", logs)
	}
	a := &apiServer{url: base, dbURL: dbURL, client: &http.Client{Timeout: 30 * time.Second}}
	a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)
	a.want(t, a.call(t, "GET", "/metrics", "", nil), http.StatusNotFound)
	if m := a.get(t, metricsURL); !strings.Contains(m, "cordon_retrievals_total 0") {
		t.Fatalf("the metrics listener %q serves no aggregate counters: %s", metricsURL, m)
	}

	// token
	code, admin, errs := runCLI(t, env, "token", "--sub", "ops", "--role", "admin")
	if code != 0 {
		t.Fatalf("token: %d %s", code, errs)
	}
	a.want(t, a.call(t, "POST", "/v1/tenants", strings.TrimSpace(admin), map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	if code, _, errs := runCLI(t, env, "token", "--sub", "x", "--role", "superuser"); code != 2 {
		t.Fatalf("token with a bad role: exit %d %s, want 2", code, errs)
	}
	// serve refuses to run without an audit key, unless told to chain
	// unkeyed; a keyring with several keys needs the id to write with.
	noKey := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_DATABASE_URL": u.String()}
	if code, _, errs := runCLI(t, noKey, "serve"); code != 2 || !strings.Contains(errs, "no audit key") || !strings.Contains(errs, "--audit-unkeyed") {
		t.Fatalf("serve without an audit key: exit %d %s, want 2", code, errs)
	}
	if code, _, errs := runCLI(t, noKey, "serve", "--audit-key-file", keyringFile(t, testKeyring("k1", "k2"))); code != 2 || !strings.Contains(errs, "--audit-key-id") {
		t.Fatalf("serve with two keys and no key id: exit %d %s, want 2", code, errs)
	}
	if code, _, _ := runCLI(t, map[string]string{}, "token", "--sub", "x"); code != 2 {
		t.Fatalf("token without a secret: exit %d, want 2", code)
	}

	// ingest: a folder with Markdown, text, an invalid file and a skipped
	// extension.
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("payments/holds.md", "# Holds\nPMT-771 hold release requires dual approval by treasury.\n")
	write("payments/settlement window.txt", "Settlement for wholesale payments is T+1.")
	write("bad.md", "caf\xe9 latin-1")
	write("image.png", "not text")
	code, out, errs := runCLI(t, env, "ingest", "--tenant", "wholesale", "--classification", "internal", dir)
	if code != 1 || !strings.Contains(out, "ingested 2, unchanged 0, failed 1 of 3") || !strings.Contains(out, "bad.md") ||
		!strings.Contains(out, "skipped 1: 1 not Markdown, HTML or text by name (-v lists them)") {
		t.Fatalf("ingest: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "files/s") || !strings.Contains(errs, "ETA") {
		t.Fatalf("no progress bar on stderr: %q", errs)
	}
	write("bad.md", "fixed now")
	code, out, errs = runCLI(t, env, "ingest", "--tenant", "wholesale", "--quiet", dir)
	if code != 0 || !strings.Contains(out, "ingested 1, unchanged 2, failed 0 of 3") {
		t.Fatalf("resumed ingest: exit %d\n%s\n%s", code, out, errs)
	}

	// query, pretty and JSON.
	code, reader, _ := runCLI(t, env, "token", "--sub", "alice", "--tenant", "wholesale", "--clearance", "internal", "--role", "reader")
	if code != 0 {
		t.Fatal("token")
	}
	qenv := map[string]string{"CORDON_SERVER": base, "CORDON_TOKEN": strings.TrimSpace(reader)}
	code, out, errs = runCLI(t, qenv, "query", "PMT-771", "hold")
	if code != 0 || !strings.Contains(out, "1. [payments/holds::0 | payments/holds | Holds | ") || !strings.Contains(out, "dual approval") ||
		!strings.Contains(out, "\n   blake2b-256:") {
		t.Fatalf("query: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, qenv, "query", "--prf-docs", "1", "--no-rerank", "PMT-771", "hold")
	if code != 0 || !strings.Contains(out, "\nexpansion: ") {
		t.Fatalf("query --prf-docs: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCLI(t, qenv, "query", "--json", "settlement")
	var res map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(resultIDs(t, res)) != 1 || resultIDs(t, res)[0] != "payments/settlement_window.txt::0" {
		t.Fatalf("query --json: exit %d %s", code, out)
	}
	code, _, errs = runCLI(t, map[string]string{"CORDON_SERVER": base, "CORDON_TOKEN": "bogus.token.x"}, "query", "--tenant", "wholesale", "x")
	if code != 1 || !strings.Contains(errs, "401") {
		t.Fatalf("query with a bad token: exit %d %s", code, errs)
	}
}
