package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/internal/jsontext"
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
// Cordon's claims, and returns the identity it proves. The claims must be as
// strict as a request body ([checkClaims]).
func (v *Verifier) Verify(token string) (Identity, error) {
	var c Claims
	p := jwt.NewParser(v.opts...)
	if _, err := p.ParseWithClaims(token, &c, v.keyfunc); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", errBadToken, err)
	}
	// The signature holds, so the token has exactly three segments. The
	// library decoded the claims leniently; accept them only if the payload
	// it decoded passes the strict check.
	_, rest, _ := strings.Cut(token, ".")
	seg, _, _ := strings.Cut(rest, ".")
	payload, err := p.DecodeSegment(seg)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %w", errBadToken, err)
	}
	if err := checkClaims(payload); err != nil {
		return Identity{}, fmt.Errorf("%w: claims: %w", errBadToken, err)
	}
	return IdentityFromClaims(c)
}

// claimNames are the JSON names of [Claims]' fields, registered claims
// included.
var claimNames = func() []string {
	var names []string
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for f := range t.Fields() {
			if f.Anonymous {
				add(f.Type)
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				names = append(names, name)
			}
		}
	}
	add(reflect.TypeFor[Claims]())
	return names
}()

// checkClaims checks a token's decoded payload as [DecodeStrict] checks a
// request body: valid UTF-8, one JSON object, nesting at most
// [MaxJSONDepth], no key repeated anywhere (encoding/json would let the last
// win), no key that differs from one of Cordon's claim names only in case or
// Unicode folding ("ROLES", "ſub": encoding/json would decode it into that
// claim), and the registered time claims exp, nbf and iat as JSON numbers
// (RFC 7519 NumericDate; golang-jwt also takes a numeric string). Other
// claims are allowed, whatever their name: identity providers add their own.
func checkClaims(payload []byte) error {
	if !jsontext.ValidUTF8(payload) {
		return errors.New("the claims are not valid UTF-8 (or have an unpaired surrogate escape)")
	}
	return walkJSON(payload, "the claims", claimKey)
}

func claimKey(w *jsonWalker, key []byte, value byte) error {
	if len(w.frames) != 1 || !w.frames[0].object {
		return nil
	}
	for _, name := range claimNames {
		if string(key) == name {
			if (name == "exp" || name == "nbf" || name == "iat") && value != '-' && (value < '0' || value > '9') {
				return fmt.Errorf("claim %q must be a JSON number (RFC 7519 NumericDate)", name)
			}
			return nil
		}
		if bytes.EqualFold(key, []byte(name)) {
			return fmt.Errorf("claim %q differs from %q only in case", key, name)
		}
	}
	return nil
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
