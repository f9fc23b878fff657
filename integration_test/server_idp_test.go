package integration_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	buildversion "github.com/cordon-rag/cordon/internal/version"
)

// idpToken signs claims shaped as Keycloak issues them, roles under
// realm_access.roles and the tenant under org.tenant, expiring at exp.
func idpToken(t *testing.T, exp time.Time, roles []any, edit func(c jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{
		"sub": "5b0e-alice", "exp": exp.Unix(), "iat": exp.Add(-time.Hour).Unix(), "typ": "Bearer", "azp": "cordon",
		"realm_access": map[string]any{"roles": roles},
		"org":          map[string]any{"tenant": "wholesale", "clearance": "internal"},
	}
	if edit != nil {
		edit(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServerCLIIdentityProvider: serve's --jwt-leeway and --claim-* flags
// (and their environment variables) reach the verifier: a Keycloak-shaped
// token is read through the mapped paths, unknown roles are ignored, a
// missing mapped claim is a 401 whose reason is in the log, and a token
// that expired 20 s ago passes the default 30 s leeway but not 5 s. The
// metrics listener names the build.
func TestServerCLIIdentityProvider(t *testing.T) {
	dbURL := newDatabase(t)
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_DATABASE_URL": dbURL, "CORDON_LISTEN": "127.0.0.1:0",
		"CORDON_MIGRATE": "1", "CORDON_AUDIT_UNKEYED": "1", "CORDON_METRICS_ADDR": "127.0.0.1:0"}
	client := &http.Client{Timeout: 30 * time.Second}
	retrieve := "/v1/tenants/wholesale/retrieve"
	query := map[string]any{"query": "hold"}

	// Bad settings are usage errors, before anything is opened.
	for _, args := range [][]string{
		{"--jwt-leeway", "-1s"}, {"--jwt-leeway", "11m"}, {"--claim-roles", "realm_access..roles"}, {"--claim-tenant", "sub"},
		{"--claim-tenant", "org", "--claim-clearance", "org"},
	} {
		if code, _, errs := runCLI(t, env, append([]string{"serve"}, args...)...); code != 2 {
			t.Errorf("serve %q: exit %d %s, want 2", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, map[string]string{"CORDON_JWT_LEEWAY": "soon"}, "serve"); code != 2 || !strings.Contains(errs, "CORDON_JWT_LEEWAY") {
		t.Errorf("serve with CORDON_JWT_LEEWAY=soon: exit %d %s, want 2", code, errs)
	}

	// Cordon's own claim names and the default leeway.
	base, metricsURL, logs := startServe(t, env)
	a := &apiServer{url: base, dbURL: dbURL, client: client}
	a.want(t, a.call(t, "POST", "/v1/tenants", tok(t, "ops", "admin"), map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	if !strings.Contains(logs.String(), `"jwt_leeway":"30s"`) {
		t.Errorf("the config log does not show the default leeway: %s", logs)
	}
	a.want(t, a.call(t, "POST", retrieve, expired20sAgo(t), query), http.StatusOK)
	info := buildversion.Get()
	build := `cordon_build_info{goversion="` + info.GoVersion + `",revision="` + info.Revision + `",version="` + info.Version + `"} 1`
	if m := a.get(t, metricsURL); !strings.Contains(m, build) {
		t.Errorf("the metrics listener has no %s", build)
	}

	// An identity provider's names, from flags and the environment, and a
	// 5 s leeway.
	kc := map[string]string{}
	for k, v := range env {
		kc[k] = v
	}
	kc["CORDON_JWT_LEEWAY"] = "5s"
	kc["CORDON_CLAIM_TENANT"] = "org.tenant"
	base, _, logs = startServe(t, kc, "--claim-roles", "realm_access.roles", "--claim-clearance", "org.clearance")
	b := &apiServer{url: base, dbURL: dbURL, client: client}
	now := time.Now()
	tests := []struct {
		name string
		tok  string
		want int
	}{
		{"keycloak reader", idpToken(t, now.Add(time.Hour), []any{"default-roles-bank", "offline_access", "reader"}, nil), http.StatusOK},
		{"only provider roles", idpToken(t, now.Add(time.Hour), []any{"offline_access", "uma_authorization"}, nil), http.StatusForbidden},
		{"expired 20s ago, leeway 5s", idpToken(t, now.Add(-20*time.Second), []any{"reader"}, nil), http.StatusUnauthorized},
		{"mapped roles missing", idpToken(t, now.Add(time.Hour), nil, func(c jwt.MapClaims) { delete(c, "realm_access") }), http.StatusUnauthorized},
		{"Cordon's own names are not read", tok(t, "x", "tenant=wholesale", "reader"), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.want(t, b.call(t, "POST", retrieve, tt.tok, query), tt.want)
		})
	}
	if want := `claim \"realm_access.roles\" (mapped to roles) is missing`; !strings.Contains(logs.String(), want) {
		t.Errorf("the request log does not say %s:\n%s", want, logs)
	}
}

// expired20sAgo mints a reader token for wholesale that expired 20 s ago.
func expired20sAgo(t *testing.T) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-20 * time.Second).Unix(), "tenant": "wholesale", "roles": []string{"reader"}}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
