package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cordon-rag/cordon/internal/version"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// signMap signs claims (any JSON shape, as an identity provider issues
// them) with the test HS256 secret.
func signMap(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return signRaw(t, testHS256Secret, string(payload))
}

func newHS256Verifier(t *testing.T, cfg AuthConfig) *Verifier {
	t.Helper()
	cfg.HS256Secret = testHS256Secret
	v, err := NewVerifier(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func inAnHour() int64 { return time.Now().Add(time.Hour).Unix() }

// TestVerifyIgnoresUnknownRoles: roles Cordon does not know, as identity
// providers add them, are ignored; the known ones still count. A token with
// no known role is an identity without roles (403 on every endpoint, see
// TestNoKnownRoleForbidden).
func TestVerifyIgnoresUnknownRoles(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{})
	tests := []struct {
		name  string
		roles []any
		want  []string
	}{
		{"reader and offline_access", []any{"reader", "offline_access"}, []string{RoleReader}},
		{"provider roles around two of Cordon's", []any{"uma_authorization", "writer", "default-roles-bank", "auditor", "writer"}, []string{RoleWriter, RoleAuditor}},
		{"case variants are not Cordon's", []any{"Reader", "ADMIN"}, nil},
		{"only unknown roles", []any{"offline_access"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(signMap(t, map[string]any{"sub": "u", "exp": inAnHour(), "tenant": "wholesale", "roles": tt.roles}))
			if err != nil {
				t.Fatalf("Verify: %v; want the token accepted", err)
			}
			if !slices.Equal(id.Roles, tt.want) {
				t.Fatalf("roles = %q, want %q", id.Roles, tt.want)
			}
		})
	}
}

// TestNoKnownRoleForbidden: a valid token holding none of Cordon's roles
// gets 403 on every role-gated endpoint of its own tenant (and 404 on
// another's), never a 2xx.
func TestNoKnownRoleForbidden(t *testing.T) {
	srv := newTestServer(t)
	tok := signMap(t, map[string]any{"sub": "u", "exp": inAnHour(), "tenant": "wholesale", "roles": []any{"offline_access", "uma_authorization"}})
	tests := []struct {
		method, path string
		want         int
	}{
		{"POST", "/v1/tenants", http.StatusForbidden},
		{"PATCH", "/v1/tenants/wholesale", http.StatusForbidden},
		{"PUT", "/v1/tenants/wholesale/documents/d", http.StatusForbidden},
		{"DELETE", "/v1/tenants/wholesale/documents/d", http.StatusForbidden},
		{"POST", "/v1/tenants/wholesale/documents:batch", http.StatusForbidden},
		{"POST", "/v1/tenants/wholesale/retrieve", http.StatusForbidden},
		{"POST", "/v1/tenants/wholesale/ground", http.StatusForbidden},
		{"POST", "/v1/tenants/wholesale/assemble", http.StatusForbidden},
		{"POST", "/v1/tenants/other/retrieve", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// keycloakToken is shaped as Keycloak issues an access token: roles under
// realm_access.roles beside Keycloak's own, Cordon's attributes as custom
// claims of other names.
func keycloakToken(t *testing.T, edit func(c map[string]any)) string {
	t.Helper()
	c := map[string]any{
		"exp": inAnHour(), "iat": time.Now().Unix(), "jti": "3f1c", "iss": "https://login.example.com/realms/bank",
		"aud": "account", "sub": "5b0e-alice", "typ": "Bearer", "azp": "cordon", "scope": "openid profile email",
		"realm_access":       map[string]any{"roles": []any{"default-roles-bank", "offline_access", "uma_authorization", "reader"}},
		"resource_access":    map[string]any{"account": map[string]any{"roles": []any{"manage-account"}}},
		"org":                map[string]any{"tenant": "wholesale", "clearance": "confidential"},
		"groups":             []any{"deal-x"},
		"preferred_username": "alice",
	}
	if edit != nil {
		edit(c)
	}
	return signMap(t, c)
}

// TestVerifyMappedClaims: Cordon's claims read from an identity provider's
// names, flat and nested.
func TestVerifyMappedClaims(t *testing.T) {
	keycloak := ClaimPaths{Tenant: "org.tenant", Clearance: "org.clearance", Barriers: "groups", Roles: "realm_access.roles"}
	tests := []struct {
		name   string
		paths  ClaimPaths
		claims map[string]any
		tok    string
		want   Identity
	}{
		{
			name:  "flat names",
			paths: ClaimPaths{Tenant: "org_id", Clearance: "level", Barriers: "walls", Roles: "groups"},
			claims: map[string]any{"sub": "u", "exp": inAnHour(), "org_id": "wholesale", "level": "internal", "walls": []any{"deal-x"},
				"groups": []any{"writer", "staff"}, "roles": []any{"admin"}, "tenant": "retail"},
			want: Identity{Sub: "u", Tenant: "wholesale", Barriers: []string{"deal-x"}, Roles: []string{RoleWriter}},
		},
		{
			name:  "keycloak nested",
			paths: keycloak,
			tok:   "keycloak",
			want:  Identity{Sub: "5b0e-alice", Tenant: "wholesale", Barriers: []string{"deal-x"}, Roles: []string{RoleReader}},
		},
		{
			name:  "namespaced claim with dots read as it is",
			paths: ClaimPaths{Roles: "https://cordon.example.com/roles"},
			claims: map[string]any{"sub": "u", "exp": inAnHour(), "tenant": "wholesale",
				"https://cordon.example.com/roles": []any{"auditor"}},
			want: Identity{Sub: "u", Tenant: "wholesale", Roles: []string{RoleAuditor}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newHS256Verifier(t, AuthConfig{Claims: tt.paths})
			tok := tt.tok
			if tok == "keycloak" {
				tok = keycloakToken(t, nil)
			} else {
				tok = signMap(t, tt.claims)
			}
			id, err := v.Verify(tok)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.Sub != tt.want.Sub || id.Tenant != tt.want.Tenant || !slices.Equal(id.Barriers, tt.want.Barriers) || !slices.Equal(id.Roles, tt.want.Roles) {
				t.Fatalf("got %+v, want %+v", id, tt.want)
			}
			if tt.name == "flat names" && id.Clearance.String() != "internal" || tt.name == "keycloak nested" && id.Clearance.String() != "confidential" {
				t.Fatalf("clearance = %v", id.Clearance)
			}
		})
	}
}

// TestVerifyMappedClaimErrors: a mapped claim that is missing, of the wrong
// type or ambiguous makes the token invalid, with a reason naming the path.
func TestVerifyMappedClaimErrors(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{Claims: ClaimPaths{Tenant: "org.tenant", Roles: "realm_access.roles"}})
	tests := []struct {
		name    string
		edit    func(c map[string]any)
		wantErr string
	}{
		{"roles missing", func(c map[string]any) { delete(c, "realm_access") }, `claim "realm_access.roles" (mapped to roles) is missing`},
		{"roles null", func(c map[string]any) { c["realm_access"] = map[string]any{"roles": nil} }, `claim "realm_access.roles" (mapped to roles) is missing`},
		{"tenant missing though roles are there", func(c map[string]any) { delete(c["org"].(map[string]any), "tenant") }, `claim "org.tenant" (mapped to tenant) is missing`},
		{"parent not an object", func(c map[string]any) { c["realm_access"] = []any{"reader"} }, `"realm_access" is not an object`},
		{"roles not strings", func(c map[string]any) { c["realm_access"] = map[string]any{"roles": []any{"reader", 7}} }, "must be an array of strings"},
		{"tenant not a string", func(c map[string]any) { c["org"] = map[string]any{"tenant": []any{"wholesale"}} }, "must be a string"},
		{"ambiguous", func(c map[string]any) { c["realm_access.roles"] = []any{"admin"} }, "ambiguous"},
		{"bad tenant value", func(c map[string]any) { c["org"] = map[string]any{"tenant": "Whole Sale"} }, "tenant claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(keycloakToken(t, tt.edit))
			if err == nil || !errors.Is(err, errBadToken) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Verify = %+v, %v; want an unauthorized error containing %q", id, err, tt.wantErr)
			}
		})
	}
}

// TestMappedClaimMissingLogged: over HTTP, a token without the mapped claim
// is a 401, and the request log says which claim was missing.
func TestMappedClaimMissingLogged(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{Claims: ClaimPaths{Roles: "realm_access.roles"}})
	var logs bytes.Buffer
	srv := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil, v)
	tok := signMap(t, map[string]any{"sub": "u", "exp": inAnHour(), "tenant": "wholesale", "roles": []any{"reader"}})
	req := httptest.NewRequest("POST", "/v1/tenants/wholesale/retrieve", strings.NewReader(`{"query": "x"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("got %d %s, want 401", rec.Code, rec.Body)
	}
	if want := `claim \"realm_access.roles\" (mapped to roles) is missing`; !strings.Contains(logs.String(), want) {
		t.Fatalf("the request log does not say %s:\n%s", want, logs.String())
	}
}

func TestClaimPathsConfig(t *testing.T) {
	tests := []struct {
		name    string
		paths   ClaimPaths
		wantErr string
	}{
		{"empty part", ClaimPaths{Roles: "realm_access..roles"}, "single dots"},
		{"leading dot", ClaimPaths{Roles: ".roles"}, "single dots"},
		{"space", ClaimPaths{Tenant: " org"}, "single dots"},
		{"registered claim", ClaimPaths{Tenant: "sub"}, "registered JWT claim"},
		{"two claims one path", ClaimPaths{Tenant: "org", Clearance: "org"}, "both read from"},
		{"mapped onto another's default", ClaimPaths{Tenant: "roles"}, "both read from"},
		{"too deep", ClaimPaths{Roles: "a.b.c.d.e.f.g.h.i"}, "more than 8 parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret, Claims: tt.paths})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewVerifier = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	for _, l := range []time.Duration{-time.Second, MaxLeeway + time.Second} {
		if _, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret, Leeway: l}); err == nil {
			t.Errorf("leeway %v accepted", l)
		}
	}
}

// TestVerifyLeeway: a token that expired 20 s ago is accepted with 30 s of
// leeway and refused with 5 s; likewise a token not valid for another 20 s,
// and one issued (iat) 20 s in the future.
// The tokens are minted with times in the past (or future); nothing sleeps.
func TestVerifyLeeway(t *testing.T) {
	now := time.Now()
	expired := signMap(t, map[string]any{"sub": "u", "exp": now.Add(-20 * time.Second).Unix(), "tenant": "wholesale", "roles": []any{"reader"}})
	early := signMap(t, map[string]any{"sub": "u", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(20 * time.Second).Unix(), "tenant": "wholesale"})
	issued := func(d time.Duration) string {
		return signMap(t, map[string]any{"sub": "u", "exp": now.Add(48 * time.Hour).Unix(), "iat": now.Add(d).Unix(), "tenant": "wholesale"})
	}
	tests := []struct {
		name   string
		leeway time.Duration
		tok    string
		ok     bool
	}{
		{"expired 20s ago, leeway 30s", 30 * time.Second, expired, true},
		{"expired 20s ago, leeway 5s", 5 * time.Second, expired, false},
		{"expired 20s ago, default leeway", DefaultLeeway, expired, true},
		{"valid in 20s, leeway 30s", 30 * time.Second, early, true},
		{"valid in 20s, leeway 5s", 5 * time.Second, early, false},
		{"issued in 20s, leeway 30s", 30 * time.Second, issued(20 * time.Second), true},
		{"issued in 20s, leeway 5s", 5 * time.Second, issued(20 * time.Second), false},
		{"issued a day ahead, default leeway", DefaultLeeway, issued(24 * time.Hour), false},
		{"issued an hour ago, leeway 0s", 0, issued(-time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newHS256Verifier(t, AuthConfig{Leeway: tt.leeway}).Verify(tt.tok)
			if (err == nil) != tt.ok {
				t.Fatalf("Verify = %v, want accepted %v", err, tt.ok)
			}
		})
	}
}

// TestIssuedInTheFutureUnauthorized: over HTTP, a token issued (iat) a day
// ahead of the server's clock is a 401 like any invalid token, every time
// it is sent, and the request log says why.
func TestIssuedInTheFutureUnauthorized(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{Leeway: DefaultLeeway})
	var logs bytes.Buffer
	srv := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, nil, v)
	now := time.Now()
	tok := signMap(t, map[string]any{"sub": "u", "exp": now.Add(48 * time.Hour).Unix(), "iat": now.Add(24 * time.Hour).Unix(),
		"tenant": "wholesale", "roles": []any{"reader"}})
	for i := range 2 {
		req := httptest.NewRequest("POST", "/v1/tenants/wholesale/retrieve", strings.NewReader(`{"query": "x"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"unauthorized"`) {
			t.Fatalf("request %d: got %d %s, want 401 unauthorized", i+1, rec.Code, rec.Body)
		}
	}
	if want := "token used before issued"; !strings.Contains(logs.String(), want) {
		t.Fatalf("the request log does not say %s:\n%s", want, logs.String())
	}
	if n := v.cache.len(); n != 0 {
		t.Fatalf("%d tokens remembered, want 0", n)
	}
}

// TestBuildInfoMetric: the metrics listener names the running build.
func TestBuildInfoMetric(t *testing.T) {
	m := newMetrics(func() *pgxpool.Pool { return nil }, func() (audit.Stats, bool) { return audit.Stats{}, false }, false)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	info := version.Get()
	want := `cordon_build_info{goversion="` + info.GoVersion + `",revision="` + info.Revision + `",version="` + info.Version + `"} 1`
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("got %d, want a line %s in:\n%s", rec.Code, want, rec.Body)
	}
}

// TestInvalidTokenChallenge: a 401 says why in the WWW-Authenticate
// challenge (RFC 6750 section 3): error="invalid_token" and a description
// from a fixed set for a token that did not verify, the bare challenge
// for a request without one; the body's message says the same.
func TestInvalidTokenChallenge(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{Leeway: DefaultLeeway})
	srv := New(Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, nil, v)
	now := time.Now()
	claims := func(exp, iat time.Time) map[string]any {
		return map[string]any{"sub": "u", "exp": exp.Unix(), "iat": iat.Unix(), "tenant": "wholesale", "roles": []any{"reader"}}
	}
	for _, tt := range []struct {
		name, authz, want string
	}{
		{"no token", "", `Bearer realm="cordon"`},
		{"expired", "Bearer " + signMap(t, claims(now.Add(-time.Hour), now.Add(-2*time.Hour))),
			`Bearer realm="cordon", error="invalid_token", error_description="the token has expired"`},
		{"issued in the future", "Bearer " + signMap(t, claims(now.Add(48*time.Hour), now.Add(24*time.Hour))),
			`Bearer realm="cordon", error="invalid_token", error_description="the token is issued in the future (iat)"`},
		{"malformed", "Bearer not.a-token\"x",
			`Bearer realm="cordon", error="invalid_token", error_description="the token is malformed"`},
		{"bad signature", "Bearer " + signMap(t, claims(now.Add(time.Hour), now))[:20] + "x" + signMap(t, claims(now.Add(time.Hour), now))[21:],
			""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/tenants/wholesale/retrieve", strings.NewReader(`{"query": "x"}`))
			if tt.authz != "" {
				req.Header.Set("Authorization", tt.authz)
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			got := rec.Header().Values("WWW-Authenticate")
			if rec.Code != http.StatusUnauthorized || len(got) != 1 {
				t.Fatalf("got %d with challenges %q, want 401 with one", rec.Code, got)
			}
			if tt.want != "" && got[0] != tt.want {
				t.Fatalf("challenge %q, want %q", got[0], tt.want)
			}
			if tt.want == "" && !strings.Contains(got[0], `error="invalid_token"`) {
				t.Fatalf("challenge %q lacks error=\"invalid_token\"", got[0])
			}
			if strings.Contains(got[0], "not.a-token") {
				t.Fatalf("the challenge echoes the token: %q", got[0])
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			wantMsg := "a valid bearer token is required"
			if d, ok := strings.CutPrefix(got[0], `Bearer realm="cordon", error="invalid_token", error_description="`); ok {
				wantMsg += ": " + strings.TrimSuffix(d, `"`)
			}
			if body.Error.Code != "unauthorized" || body.Error.Message != wantMsg {
				t.Fatalf("body %+v, want code unauthorized, message %q", body.Error, wantMsg)
			}
		})
	}
}
