package server

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A service client sends the same bearer token with every request until it
// expires, and verifying it (signature, strict claims check, two JSON
// decodes) costs more than the rest of a request's handling outside
// ranking. [Verifier.Verify] therefore remembers the identity a token
// proved, under the SHA-256 of the token, and answers from memory while
// every check would pass again:
//
//   - until exp (plus the leeway), as the expiry check would, and from the
//     later of nbf and iat (minus the leeway) on, as the not-before and
//     issued-at checks would (a clock set back refuses it);
//   - only while the key source still gives the key(s) the signature was
//     verified with: the verifier's key function runs again for the token's
//     header on every use, so a key removed from a JWKS or replaced stops
//     every token it signed, as without the cache;
//   - only for tokens that passed: a token that fails verification is
//     never stored, and is verified again (and fails again) each time.
//
// Everything else Verify checks (algorithm, issuer, audience, the claims)
// depends on the token's bytes and the verifier's configuration alone, so
// the remembered identity is what verifying again would return. Revocation
// is unchanged: Cordon's tokens are self-contained (there is no revocation
// list to consult), so a token stays valid until exp with or without the
// cache; rotating the signing key ends it.
//
// The cache holds at most maxTokenCache tokens; when it is full, expired
// entries are dropped, then arbitrary ones.
const maxTokenCache = 10000

// tokenEntry is a verified token's identity and what a use must check.
type tokenEntry struct {
	id Identity
	// notBefore is the later of nbf and iat, minus the leeway (zero
	// without either); until is exp plus the leeway. The token verifies at
	// t with notBefore <= t < until.
	notBefore, until time.Time
	// header is the token's JOSE header, for the key function; keys is
	// what the key function gave for it when the signature was verified.
	header map[string]any
	keys   any
}

// tokenCache maps the SHA-256 of a token to its entry.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*tokenEntry
	max     int
	// hits counts the tokens answered from memory.
	hits atomic.Int64
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{entries: map[[sha256.Size]byte]*tokenEntry{}, max: max}
}

// get returns the identity of the token whose digest is d when its entry
// is valid at now and keyfunc still gives the same keys for its header. An
// entry that fails either check is dropped.
func (c *tokenCache) get(d [sha256.Size]byte, now time.Time, keyfunc jwt.Keyfunc) (Identity, bool) {
	c.mu.Lock()
	e := c.entries[d]
	c.mu.Unlock()
	if e == nil {
		return Identity{}, false
	}
	if now.Before(e.notBefore) || !now.Before(e.until) {
		c.drop(d, e)
		return Identity{}, false
	}
	keys, err := keyfunc(&jwt.Token{Header: e.header})
	if err != nil || !sameKeys(keys, e.keys) {
		c.drop(d, e)
		return Identity{}, false
	}
	c.hits.Add(1)
	// The caller gets its own slices: an identity is never shared.
	id := e.id
	id.Barriers, id.Roles = slices.Clone(id.Barriers), slices.Clone(id.Roles)
	return id, true
}

// drop removes d's entry if it is still e.
func (c *tokenCache) drop(d [sha256.Size]byte, e *tokenEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[d] == e {
		delete(c.entries, d)
	}
}

// put stores e under d, making room first when the cache is full.
func (c *tokenCache) put(d [sha256.Size]byte, e *tokenEntry, now time.Time) {
	e.id.Barriers, e.id.Roles = slices.Clone(e.id.Barriers), slices.Clone(e.id.Roles)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[d]; !ok && len(c.entries) >= c.max {
		for k, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, k)
			}
		}
		// Still full: drop arbitrary entries (map order), a tenth of the
		// cache, so that a full cache does not scan on every insert.
		for k := range c.entries {
			if len(c.entries) < c.max-c.max/10 {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[d] = e
}

// len is the number of entries.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// sameKeys reports whether a key function's two answers are the same
// key(s): HMAC secrets byte for byte, public keys by their Equal method,
// key sets element by element. Anything else is not known to be equal.
func sameKeys(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case jwt.VerificationKeySet:
		y, ok := b.(jwt.VerificationKeySet)
		return ok && slices.EqualFunc(x.Keys, y.Keys, func(p, q jwt.VerificationKey) bool { return sameKeys(p, q) })
	case interface{ Equal(crypto.PublicKey) bool }:
		return b != nil && x.Equal(b)
	}
	return false
}
