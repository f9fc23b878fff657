package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// pad returns b left-padded to n bytes (JWK EC coordinates are fixed-size).
func pad(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out[n-len(b):], b)
	return out
}

type testKeys struct {
	ed  ed25519.PrivateKey
	ec  *ecdsa.PrivateKey
	rsa *rsa.PrivateKey
}

func newTestKeys(t *testing.T) (testKeys, []byte) {
	t.Helper()
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "OKP", "crv": "Ed25519", "kid": "ed", "alg": "EdDSA", "use": "sig", "x": b64(ed.Public().(ed25519.PublicKey))},
		{"kty": "EC", "crv": "P-256", "kid": "ec", "alg": "ES256", "use": "sig", "x": b64(pad(ec.X.Bytes(), 32)), "y": b64(pad(ec.Y.Bytes(), 32))},
		{"kty": "RSA", "kid": "rsa", "alg": "RS256", "use": "sig", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
	}})
	return testKeys{ed: ed, ec: ec, rsa: rk}, jwks
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key crypto.PrivateKey, c Claims) string {
	t.Helper()
	tk := jwt.NewWithClaims(m, c)
	tk.Header["kid"] = kid
	s, err := tk.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string) Claims {
	return Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: sub, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		Tenant: "wholesale", Clearance: "internal", Roles: []string{"reader"}}
}

func checkVerifier(t *testing.T, v *Verifier, k testKeys) {
	t.Helper()
	for _, tc := range []struct {
		name string
		tok  string
	}{
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, claims("ed-user"))},
		{"ES256", sign(t, jwt.SigningMethodES256, "ec", k.ec, claims("ec-user"))},
		{"RS256", sign(t, jwt.SigningMethodRS256, "rsa", k.rsa, claims("rsa-user"))},
	} {
		// The second time from the cache, which checks the key again.
		for range 2 {
			id, err := v.Verify(tc.tok)
			if err != nil || id.Tenant != "wholesale" || !id.Has(RoleReader) {
				t.Errorf("%s: %+v, %v", tc.name, id, err)
			}
		}
	}
	if hits := v.cache.hits.Load(); hits != 3 {
		t.Errorf("%d tokens answered from the cache, want 3 (one per key type)", hits)
	}
	// HS256 signed with the RSA modulus as secret (algorithm confusion),
	// a key not in the set, and a token without exp are refused.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("x"))
	hs.Header["kid"] = "rsa"
	hsTok, _ := hs.SignedString(k.rsa.N.Bytes())
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	noExp := claims("x")
	noExp.ExpiresAt = nil
	for name, tok := range map[string]string{
		"alg confusion":  hsTok,
		"unknown key":    sign(t, jwt.SigningMethodEdDSA, "ed", other, claims("x")),
		"no exp":         sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, noExp),
		"garbage":        "a.b.c",
		"wrong kid type": sign(t, jwt.SigningMethodES256, "ed", k.ec, claims("x")),
	} {
		if id, err := v.Verify(tok); err == nil {
			t.Errorf("%s: accepted as %+v", name, id)
		}
	}
}

func TestVerifierJWKSFile(t *testing.T) {
	k, jwks := newTestKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(context.Background(), AuthConfig{JWKSFile: path})
	if err != nil {
		t.Fatal(err)
	}
	checkVerifier(t, v, k)
}

func TestVerifierOIDCIssuer(t *testing.T) {
	k, jwks := newTestKeys(t)
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	defer ts.Close()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": ts.URL, "jwks_uri": ts.URL + "/keys"})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(jwks) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v, err := NewVerifier(ctx, AuthConfig{OIDCIssuer: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	// The issuer's iss is required.
	c := claims("u")
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, c)); err == nil {
		t.Fatalf("a token without iss was accepted")
	}
	c.Issuer = ts.URL
	if _, err := v.Verify(sign(t, jwt.SigningMethodEdDSA, "ed", k.ed, c)); err != nil {
		t.Fatalf("a token from the issuer was refused: %v", err)
	}
	v2, err := NewVerifier(ctx, AuthConfig{JWKSURL: ts.URL + "/keys"})
	if err != nil {
		t.Fatal(err)
	}
	checkVerifier(t, v2, k)
}

func TestVerifierConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := NewVerifier(ctx, AuthConfig{}); err == nil {
		t.Errorf("no key source accepted")
	}
	if _, err := NewVerifier(ctx, AuthConfig{HS256Secret: "short"}); err == nil {
		t.Errorf("a short HS256 secret accepted")
	}
	if _, err := NewVerifier(ctx, AuthConfig{HS256Secret: string(make([]byte, 32)), JWKSFile: "x"}); err == nil {
		t.Errorf("two key sources accepted")
	}
	secret := "0123456789abcdef0123456789abcdef"
	v, err := NewVerifier(ctx, AuthConfig{HS256Secret: secret, Audience: "cordon"})
	if err != nil {
		t.Fatal(err)
	}
	c := claims("u")
	tok, _ := MintHS256(secret, c)
	if _, err := v.Verify(tok); err == nil {
		t.Errorf("a token without the audience accepted")
	}
	c.Audience = jwt.ClaimStrings{"cordon"}
	tok, _ = MintHS256(secret, c)
	if _, err := v.Verify(tok); err != nil {
		t.Errorf("a token with the audience refused: %v", err)
	}
}

// signRaw signs payload as it is (duplicates and all) with HS256.
func signRaw(t *testing.T, secret, payload string) string {
	t.Helper()
	signing := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(signing, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
}

// TestVerifyStrictClaims: claims are decoded as strictly as request bodies.
// Cordon's claim names match exactly (encoding/json would take "ROLES" or
// "ſub" for them), no key repeats (the last would win), and exp, nbf and iat
// are JSON numbers (RFC 7519 NumericDate), not strings. Claims Cordon does
// not know stay allowed: identity providers add their own.
func TestVerifyStrictClaims(t *testing.T) {
	v, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: testHS256Secret})
	if err != nil {
		t.Fatal(err)
	}
	exp := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	base := `"sub": "u", "exp": ` + exp + `, "tenant": "wholesale"`
	tests := []struct {
		name    string
		payload string
		wantErr string
	}{
		{"ok", `{` + base + `, "roles": ["reader"]}`, ""},
		{"unknown claims allowed", `{` + base + `, "email": "a@b", "Email": "c", "groups": [{"x": 1}], "iat": 1, "nbf": 1.5}`, ""},
		{"case-variant roles after roles", `{` + base + `, "roles": ["reader"], "ROLES": ["admin"]}`, `"ROLES"`},
		{"case-variant roles alone", `{` + base + `, "Roles": ["admin"]}`, `"Roles"`},
		{"case-variant tenant", `{"sub": "u", "exp": ` + exp + `, "TENANT": "wholesale"}`, `"TENANT"`},
		{"long s folds to sub", `{"ſub": "admin", "exp": ` + exp + `}`, "sub"},
		{"duplicate roles", `{` + base + `, "roles": ["reader"], "roles": ["admin"]}`, `duplicate key "roles"`},
		{"duplicate sub", `{"sub": "a", "sub": "b", "exp": ` + exp + `}`, `duplicate key "sub"`},
		{"duplicate unknown claim", `{` + base + `, "email": "a", "email": "b"}`, `duplicate key "email"`},
		{"duplicate inside unknown claim", `{` + base + `, "ext": {"k": 1, "k": 2}}`, `duplicate key "ext.k"`},
		{"exp as a string", `{"sub": "u", "exp": "` + exp + `"}`, `"exp"`},
		{"nbf as a string", `{` + base + `, "nbf": "1"}`, `"nbf"`},
		{"iat as a string", `{` + base + `, "iat": "1"}`, `"iat"`},
		{"iat null", `{` + base + `, "iat": null}`, `"iat"`},
		{"deep unknown claim", `{` + base + `, "ext": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "deeper than 64 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(signRaw(t, testHS256Secret, tt.payload))
			if tt.wantErr == "" {
				if err != nil || id.Sub != "u" || id.Tenant != "wholesale" {
					t.Fatalf("Verify = %+v, %v; want the token accepted", id, err)
				}
				return
			}
			if err == nil || !errors.Is(err, errBadToken) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Verify = %+v, %v; want an unauthorized error containing %q", id, err, tt.wantErr)
			}
		})
	}
}

// FuzzCheckClaims: the strict claims check accepts exactly a JSON object
// that walkJSON accepts (depth, duplicates, syntax) whose top-level keys are
// Cordon's claim names spelt exactly or names that no claim name folds to,
// with exp, nbf and iat as numbers.
func FuzzCheckClaims(f *testing.F) {
	for _, s := range []string{
		`{"sub": "u", "exp": 1, "roles": ["reader"]}`,
		`{"sub": "u", "roles": ["reader"], "ROLES": ["admin"]}`,
		`{"sub": "u", "sub": "v"}`,
		`{"exp": "1"}`, `{"nbf": null}`, `{"iat": -1.5e3}`,
		`{"ſub": "x"}`, `{"\u0073ub": "x"}`, `{"email": "a", "Email": "b"}`,
		`{"ext": {"k": 1, "k": 2}}`,
		`{"ext": ` + strings.Repeat("[", 12_000) + `}`,
		`{"ext": ` + strings.Repeat(`{"a":`, 12_000) + `}`,
		`{"groups": [` + strings.Repeat(`"g",`, 5_000) + `"g"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		err := checkClaims(payload)
		want := jsonstrict.ValidUTF8(payload) && jsonstrict.Walk(payload, "the claims", nil) == nil
		if want {
			var top map[string]json.RawMessage
			if json.Unmarshal(payload, &top) != nil {
				t.Fatalf("walkJSON accepted %q, encoding/json did not", payload)
			}
			for k, v := range top {
				for _, name := range claimNames {
					if k != name && strings.EqualFold(k, name) {
						want = false
					}
				}
				if (k == "exp" || k == "nbf" || k == "iat") && !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
					want = false
				}
			}
		}
		if (err == nil) != want {
			t.Fatalf("checkClaims(%q) = %v, want accepted %v", payload, err, want)
		}
	})
}
