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
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
		id, err := v.Verify(tc.tok)
		if err != nil || id.Tenant != "wholesale" || !id.Has(RoleReader) {
			t.Errorf("%s: %+v, %v", tc.name, id, err)
		}
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
