package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/cordontype"
)

// The roles a token may carry in its "roles" claim.
const (
	RoleReader  = "reader"  // retrieve, ground, assemble
	RoleWriter  = "writer"  // put, delete, batch
	RoleAuditor = "auditor" // sees the retrieval funnel counters and index version
	RoleAdmin   = "admin"   // creates tenants
)

var knownRoles = []string{RoleReader, RoleWriter, RoleAuditor, RoleAdmin}

// AuthConfig chooses how tokens are verified. Exactly one key source must be
// set: HS256Secret (development and tests), JWKSFile, JWKSURL or OIDCIssuer
// (RS256, ES256 and EdDSA keys from a JSON Web Key Set).
type AuthConfig struct {
	HS256Secret string
	JWKSFile    string
	JWKSURL     string
	OIDCIssuer  string
	// Issuer and Audience, when set, must match the token's iss and aud.
	Issuer   string
	Audience string
	// Leeway tolerates clock skew on exp and nbf.
	Leeway time.Duration
}

// MinHS256SecretLen is the shortest HS256 secret accepted: 32 bytes, the
// HMAC-SHA256 output size (RFC 7518 section 3.2).
const MinHS256SecretLen = 32

// Identity is the verified caller: the only source of a principal. Nothing in
// a request body can change it.
type Identity struct {
	Sub       string
	Tenant    string
	Clearance cordontype.Classification
	Barriers  []string
	Roles     []string
}

// Has reports whether the identity holds role.
func (id Identity) Has(role string) bool { return slices.Contains(id.Roles, role) }

// Principal is the identity as a retrieval principal.
func (id Identity) Principal() cordontype.Principal {
	return cordontype.Principal{Tenant: id.Tenant, Clearance: id.Clearance, Barriers: id.Barriers}
}

// Claims are Cordon's JWT claims.
type Claims struct {
	jwt.RegisteredClaims
	Tenant    string   `json:"tenant,omitempty"`
	Clearance string   `json:"clearance,omitempty"`
	Barriers  []string `json:"barriers,omitempty"`
	Roles     []string `json:"roles,omitempty"`
}

// Verifier checks bearer tokens.
type Verifier struct {
	keyfunc jwt.Keyfunc
	opts    []jwt.ParserOption
}

// NewVerifier builds a verifier from cfg. A JWKS URL or OIDC issuer is
// fetched now and refreshed in the background until ctx ends.
func NewVerifier(ctx context.Context, cfg AuthConfig) (*Verifier, error) {
	sources := 0
	for _, s := range []string{cfg.HS256Secret, cfg.JWKSFile, cfg.JWKSURL, cfg.OIDCIssuer} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return nil, errors.New("set exactly one token key source: CORDON_JWT_HS256_SECRET (development), --jwks-file, --jwks-url or --oidc-issuer")
	}
	v := &Verifier{opts: []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(cfg.Leeway)}}
	if cfg.Issuer != "" {
		v.opts = append(v.opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		v.opts = append(v.opts, jwt.WithAudience(cfg.Audience))
	}
	asymmetric := jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"})
	switch {
	case cfg.HS256Secret != "":
		if len(cfg.HS256Secret) < MinHS256SecretLen {
			return nil, fmt.Errorf("the HS256 secret is %d bytes; use at least %d random bytes", len(cfg.HS256Secret), MinHS256SecretLen)
		}
		key := []byte(cfg.HS256Secret)
		v.keyfunc = func(*jwt.Token) (any, error) { return key, nil }
		v.opts = append(v.opts, jwt.WithValidMethods([]string{"HS256"}))
	case cfg.JWKSFile != "":
		raw, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("read JWKS file: %w", err)
		}
		k, err := keyfunc.NewJWKSetJSON(json.RawMessage(raw))
		if err != nil {
			return nil, fmt.Errorf("JWKS file %s: %w", cfg.JWKSFile, err)
		}
		v.keyfunc = k.Keyfunc
		v.opts = append(v.opts, asymmetric)
	default:
		u := cfg.JWKSURL
		if u == "" {
			var err error
			if u, err = discoverJWKS(ctx, cfg.OIDCIssuer); err != nil {
				return nil, err
			}
			if cfg.Issuer == "" {
				v.opts = append(v.opts, jwt.WithIssuer(cfg.OIDCIssuer))
			}
		}
		k, err := keyfunc.NewDefaultCtx(ctx, []string{u})
		if err != nil {
			return nil, fmt.Errorf("JWKS %s: %w", u, err)
		}
		v.keyfunc = k.Keyfunc
		v.opts = append(v.opts, asymmetric)
	}
	return v, nil
}

// discoverJWKS reads an OIDC issuer's discovery document for its jwks_uri.
func discoverJWKS(ctx context.Context, issuer string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("OIDC issuer %q: %w", issuer, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("OIDC discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("OIDC discovery %s: HTTP %d", u, resp.StatusCode)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&doc); err != nil || doc.JWKSURI == "" {
		return "", fmt.Errorf("OIDC discovery %s: no jwks_uri", u)
	}
	return doc.JWKSURI, nil
}

// errBadToken is wrapped by every Verify error.
var errBadToken = errors.New("unauthorized")

// Verify checks a token's signature, algorithm, expiry (required) and
// Cordon's claims, and returns the identity it proves.
func (v *Verifier) Verify(token string) (Identity, error) {
	var c Claims
	if _, err := jwt.ParseWithClaims(token, &c, v.keyfunc, v.opts...); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", errBadToken, err)
	}
	return IdentityFromClaims(c)
}

// IdentityFromClaims checks Cordon's claims (sub, tenant, clearance, barriers,
// roles) as [Verifier.Verify] does after the signature.
func IdentityFromClaims(c Claims) (Identity, error) {
	bad := func(msg string) (Identity, error) { return Identity{}, fmt.Errorf("%w: %s", errBadToken, msg) }
	if c.Subject == "" {
		return bad("the token has no sub claim")
	}
	id := Identity{Sub: c.Subject, Tenant: c.Tenant, Clearance: cordontype.Public}
	if c.Tenant != "" {
		if err := cordontype.ValidateTenant(c.Tenant); err != nil {
			return bad("tenant claim: " + err.Error())
		}
	}
	if c.Clearance != "" {
		cl, err := cordontype.ParseClassification(c.Clearance)
		if err != nil {
			return bad("clearance claim: " + err.Error())
		}
		id.Clearance = cl
	}
	b, err := cordontype.ValidateBarriers(c.Barriers)
	if err != nil {
		return bad("barriers claim: " + err.Error())
	}
	id.Barriers = b
	for _, r := range c.Roles {
		if !slices.Contains(knownRoles, r) {
			return bad(fmt.Sprintf("unknown role %q (want reader, writer, auditor or admin)", r))
		}
		if !slices.Contains(id.Roles, r) {
			id.Roles = append(id.Roles, r)
		}
	}
	return id, nil
}

// MintHS256 signs a development token with secret. It is what 'cordon token'
// and the tests use; production tokens come from an identity provider.
func MintHS256(secret string, c Claims) (string, error) {
	if len(secret) < MinHS256SecretLen {
		return "", fmt.Errorf("the HS256 secret is %d bytes; use at least %d random bytes", len(secret), MinHS256SecretLen)
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
}

type identityKey struct{}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
