package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/internal/jsonstrict"
)

// The roles a token may carry in its "roles" claim.
const (
	RoleReader  = "reader"  // retrieve, ground, assemble
	RoleWriter  = "writer"  // put, delete, batch
	RoleAuditor = "auditor" // sees the retrieval funnel counters and index version
	RoleAdmin   = "admin"   // creates tenants
)

var knownRoles = []string{RoleReader, RoleWriter, RoleAuditor, RoleAdmin}

// IsRole reports whether r is one of Cordon's roles. A token's other roles
// (an identity provider's "offline_access", "uma_authorization", ...) are
// ignored by [Verifier.Verify]; 'cordon token' refuses them as typos.
func IsRole(r string) bool { return slices.Contains(knownRoles, r) }

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
	// Leeway tolerates clock skew on exp, nbf and iat; at most [MaxLeeway].
	Leeway time.Duration
	// Claims says where a token carries Cordon's claims when an identity
	// provider names them otherwise.
	Claims ClaimPaths
}

// DefaultLeeway is the clock skew 'cordon serve' tolerates unless told
// otherwise; MaxLeeway bounds it, since a leeway extends every token's life.
const (
	DefaultLeeway = 30 * time.Second
	MaxLeeway     = 10 * time.Minute
)

// ClaimPaths maps Cordon's claims to where an identity provider puts them.
// Each is a top-level claim name ("groups") or a dotted path into nested
// objects ("realm_access.roles", as Keycloak issues roles); empty means
// Cordon's own name. A top-level claim whose name is the whole path, dots
// included (Auth0's "https://example.com/roles"), is read as it is; a token
// holding both that claim and the nested path is refused as ambiguous.
//
// A claim read under Cordon's own name may be absent (no tenant, clearance
// public, no barriers, no roles); a mapped claim must be present in every
// token, so a provider that stops sending it fails loudly (401, with the
// reason in the request log) instead of quietly issuing weaker identities.
type ClaimPaths struct {
	Tenant    string
	Clearance string
	Barriers  string
	Roles     string
}

// claimPath is one of Cordon's claims and where it is read.
type claimPath struct {
	claim  string   // Cordon's name: tenant, clearance, barriers, roles
	path   string   // as configured; claim when not mapped
	parts  []string // path split at dots
	mapped bool
}

// maxClaimPathParts bounds a dotted claim path, well inside [MaxJSONDepth].
const maxClaimPathParts = 8

// Validate reports a path that is not a claim name or dotted path, one that
// starts at a registered claim (sub, exp, ...), or two claims read from one
// path. [NewVerifier] checks the same.
func (p ClaimPaths) Validate() error {
	_, err := p.paths()
	return err
}

// paths checks the mapping and returns the four claims' paths.
func (p ClaimPaths) paths() ([]claimPath, error) {
	var out []claimPath
	seen := map[string]string{}
	for _, c := range []struct{ claim, path string }{
		{"tenant", p.Tenant}, {"clearance", p.Clearance}, {"barriers", p.Barriers}, {"roles", p.Roles},
	} {
		cp := claimPath{claim: c.claim, path: c.path, mapped: c.path != ""}
		if !cp.mapped {
			cp.path = c.claim
		}
		cp.parts = strings.Split(cp.path, ".")
		if len(cp.parts) > maxClaimPathParts {
			return nil, fmt.Errorf("claim path %q for %s: more than %d parts", cp.path, c.claim, maxClaimPathParts)
		}
		for _, part := range cp.parts {
			if part == "" || strings.TrimSpace(part) != part || !utf8.ValidString(part) {
				return nil, fmt.Errorf("claim path %q for %s: want names separated by single dots, such as realm_access.roles", cp.path, c.claim)
			}
		}
		if slices.Contains(registeredClaims, cp.parts[0]) {
			return nil, fmt.Errorf("claim path %q for %s: %q is a registered JWT claim", cp.path, c.claim, cp.parts[0])
		}
		if other, dup := seen[cp.path]; dup {
			return nil, fmt.Errorf("claims %s and %s are both read from %q", other, c.claim, cp.path)
		}
		seen[cp.path] = c.claim
		out = append(out, cp)
	}
	return out, nil
}

// registeredClaims are RFC 7519's registered claim names; Cordon's claims are
// never read from them.
var registeredClaims = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}

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
	paths   []claimPath
	// cache remembers verified tokens until they expire (tokencache.go).
	cache *tokenCache
	// now is the clock of the expiry checks, the cache's included.
	now    func() time.Time
	leeway time.Duration
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
	if cfg.Leeway < 0 || cfg.Leeway > MaxLeeway {
		return nil, fmt.Errorf("clock leeway %v: want between 0s and %v", cfg.Leeway, MaxLeeway)
	}
	paths, err := cfg.Claims.paths()
	if err != nil {
		return nil, err
	}
	v := &Verifier{paths: paths, cache: newTokenCache(maxTokenCache), now: time.Now}
	// iat is checked as nbf is: a token issued more than the leeway ahead
	// of this clock is refused (golang-jwt skips iat unless asked).
	v.opts = []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() })}
	v.leeway = cfg.Leeway
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

// Verify checks a token's signature, algorithm, expiry (required), nbf and
// iat (each with the leeway) and Cordon's claims, and returns the identity it proves. The claims must be as
// strict as a request body ([checkClaims]); Cordon's claims are read where
// [AuthConfig].Claims says.
//
// A token that verified is remembered until it expires, and answered from
// memory while its key is unchanged (see tokencache.go).
func (v *Verifier) Verify(token string) (Identity, error) {
	if v.cache == nil {
		id, _, err := v.verify(token)
		return id, err
	}
	d := sha256.Sum256([]byte(token))
	now := v.now()
	if id, ok := v.cache.get(d, now, v.keyfunc); ok {
		return id, nil
	}
	id, e, err := v.verify(token)
	if err != nil {
		return Identity{}, err
	}
	v.cache.put(d, e, now)
	return id, nil
}

// verify checks token as [Verifier.Verify] describes, and returns what
// the cache needs to answer for it again.
func (v *Verifier) verify(token string) (Identity, *tokenEntry, error) {
	var rc jwt.RegisteredClaims
	p := jwt.NewParser(v.opts...)
	e := &tokenEntry{}
	keyfunc := func(t *jwt.Token) (any, error) {
		keys, err := v.keyfunc(t)
		e.header, e.keys = t.Header, keys
		return keys, err
	}
	if _, err := p.ParseWithClaims(token, &rc, keyfunc); err != nil {
		return Identity{}, nil, fmt.Errorf("%w: %w", errBadToken, err)
	}
	// The signature holds, so the token has exactly three segments. The
	// library decoded the registered claims leniently; accept them only if
	// the payload it decoded passes the strict check.
	_, rest, _ := strings.Cut(token, ".")
	seg, _, _ := strings.Cut(rest, ".")
	payload, err := p.DecodeSegment(seg)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("%w: claims: %w", errBadToken, err)
	}
	if err := checkClaims(payload); err != nil {
		return Identity{}, nil, fmt.Errorf("%w: claims: %w", errBadToken, err)
	}
	// Checked strictly above: one object, no key repeated.
	var all map[string]any
	if err := json.Unmarshal(payload, &all); err != nil {
		return Identity{}, nil, fmt.Errorf("%w: claims: %w", errBadToken, err)
	}
	c, err := v.claims(all)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("%w: %w", errBadToken, err)
	}
	c.RegisteredClaims = rc
	id, err := IdentityFromClaims(c)
	if err != nil {
		return Identity{}, nil, err
	}
	e.id = id
	// exp is required: the parser refused a token without one.
	e.until = rc.ExpiresAt.Add(v.leeway)
	// Valid from the later of nbf and iat (less the leeway): a clock set
	// back before either refuses the remembered token as verifying would.
	for _, from := range []*jwt.NumericDate{rc.NotBefore, rc.IssuedAt} {
		if from != nil && from.Add(-v.leeway).After(e.notBefore) {
			e.notBefore = from.Add(-v.leeway)
		}
	}
	return id, e, nil
}

// claims reads Cordon's claims (all but the registered ones) out of a
// verified token's payload.
func (v *Verifier) claims(all map[string]any) (Claims, error) {
	var c Claims
	for _, cp := range v.paths {
		val, err := cp.lookup(all)
		if err != nil {
			return c, err
		}
		if val == nil {
			if cp.mapped {
				return c, fmt.Errorf("claim %q (mapped to %s) is missing", cp.path, cp.claim)
			}
			continue
		}
		switch cp.claim {
		case "tenant", "clearance":
			s, ok := val.(string)
			if !ok {
				return c, fmt.Errorf("claim %q (%s) must be a string", cp.path, cp.claim)
			}
			if cp.claim == "tenant" {
				c.Tenant = s
			} else {
				c.Clearance = s
			}
		default:
			list, ok := val.([]any)
			ss := make([]string, 0, len(list))
			for _, e := range list {
				s, isString := e.(string)
				ok = ok && isString
				ss = append(ss, s)
			}
			if !ok {
				return c, fmt.Errorf("claim %q (%s) must be an array of strings", cp.path, cp.claim)
			}
			if cp.claim == "roles" {
				c.Roles = ss
			} else {
				c.Barriers = ss
			}
		}
	}
	return c, nil
}

// lookup finds cp in the claims: nil when absent or JSON null.
func (cp claimPath) lookup(all map[string]any) (any, error) {
	literal, hasLiteral := all[cp.path]
	if len(cp.parts) == 1 {
		return literal, nil
	}
	var cur any = all
	for i, part := range cp.parts {
		obj, ok := cur.(map[string]any)
		if !ok {
			if cur == nil || hasLiteral {
				// The nested reading does not exist (the literal one may).
				cur = nil
				break
			}
			return nil, fmt.Errorf("claim path %q (%s): %q is not an object", cp.path, cp.claim, strings.Join(cp.parts[:i], "."))
		}
		cur = obj[part]
	}
	switch {
	case hasLiteral && cur != nil:
		return nil, fmt.Errorf("claim path %q (%s) is ambiguous: the token has a claim of that name and the nested path", cp.path, cp.claim)
	case hasLiteral:
		return literal, nil
	}
	return cur, nil
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
	if !jsonstrict.ValidUTF8(payload) {
		return errors.New("the claims are not valid UTF-8 (or have an unpaired surrogate escape)")
	}
	return jsonstrict.Walk(payload, "the claims", claimKey)
}

func claimKey(s *jsonstrict.Scan, key []byte, value byte) error {
	if s.Depth() != 1 || !s.Object(0) {
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
	// Roles Cordon does not know are ignored: identity providers add their
	// own ("offline_access"). A token with none of Cordon's roles is still
	// an identity, refused with 403 by every endpoint.
	for _, r := range c.Roles {
		if IsRole(r) && !slices.Contains(id.Roles, r) {
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
