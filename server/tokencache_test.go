package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// clockVerifier is an HS256 verifier whose clock the test sets.
func clockVerifier(t *testing.T, leeway time.Duration, now *time.Time) *Verifier {
	t.Helper()
	v := newHS256Verifier(t, AuthConfig{Leeway: leeway})
	v.now = func() time.Time { return *now }
	return v
}

// A remembered token is accepted exactly while verifying it again would
// accept it: from nbf and from iat, until exp, each with the leeway (a
// clock set back before iat refuses it, as verifying would).
func TestTokenCacheExpiry(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name   string
		leeway time.Duration
		nbf    time.Duration // from t0; 0: no nbf
		iat    time.Duration // from t0; 0: no iat
		exp    time.Duration // from t0
		steps  []time.Duration
		want   []bool // accepted at t0+steps[i]
	}{
		{"until exp", 0, 0, 0, time.Minute,
			[]time.Duration{0, 30 * time.Second, time.Minute - time.Second, time.Minute, 2 * time.Minute},
			[]bool{true, true, true, false, false}},
		{"leeway extends exp", 30 * time.Second, 0, 0, time.Minute,
			[]time.Duration{0, time.Minute, 89 * time.Second, 90 * time.Second},
			[]bool{true, true, true, false}},
		{"from nbf", 0, 10 * time.Second, 0, time.Minute,
			[]time.Duration{0, 9 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute},
			[]bool{false, false, true, true, false}},
		// The clock set back before iat: the remembered token is refused
		// as verifying it again would refuse it.
		{"from iat, clock set back", 0, 0, 10 * time.Second, time.Minute,
			[]time.Duration{10 * time.Second, 30 * time.Second, 9 * time.Second, time.Minute},
			[]bool{true, true, false, false}},
		{"leeway before iat, clock set back", 30 * time.Second, 0, time.Minute, 2 * time.Minute,
			[]time.Duration{30 * time.Second, time.Minute, 2*time.Minute + 29*time.Second, 29 * time.Second},
			[]bool{true, true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			v := clockVerifier(t, tt.leeway, &now)
			c := map[string]any{"sub": "u", "exp": t0.Add(tt.exp).Unix(), "tenant": "wholesale", "roles": []any{"reader"}}
			if tt.nbf != 0 {
				c["nbf"] = t0.Add(tt.nbf).Unix()
			}
			if tt.iat != 0 {
				c["iat"] = t0.Add(tt.iat).Unix()
			}
			tok := signMap(t, c)
			for i, step := range tt.steps {
				now = t0.Add(step)
				id, err := v.Verify(tok)
				if got := err == nil; got != tt.want[i] {
					t.Fatalf("at t0+%v: Verify = %+v, %v; want accepted %v", step, id, err, tt.want[i])
				}
				if err == nil && id.Sub != "u" {
					t.Fatalf("at t0+%v: sub %q, want u", step, id.Sub)
				}
				if err != nil && !errors.Is(err, errBadToken) {
					t.Fatalf("at t0+%v: %v, want errBadToken", step, err)
				}
				// A remembered token that expired is refused as expired,
				// which the 401 says (writeInvalidToken).
				if err != nil && step >= tt.exp+tt.leeway {
					if got, want := tokenProblem(err), "the token has expired"; got != want {
						t.Fatalf("at t0+%v: %v described as %q, want %q", step, err, got, want)
					}
				}
			}
			// Every acceptance after the first came from the cache.
			accepted := 0
			for _, ok := range tt.want {
				if ok {
					accepted++
				}
			}
			if got := v.cache.hits.Load(); got != int64(accepted-1) {
				t.Errorf("%d answers from the cache, want %d", got, accepted-1)
			}
			if v.cache.len() != 0 {
				t.Errorf("%d entries left after the token expired, want 0", v.cache.len())
			}
		})
	}
}

// Each token is remembered under its own bytes: tokens of different
// principals get their own identities, and a token differing from a
// remembered one in a single byte of its signature is verified (and
// refused), not answered from memory.
func TestTokenCacheKeyedByToken(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{})
	toks := map[string]string{}
	for _, sub := range []string{"alice", "bob"} {
		toks[sub] = signMap(t, map[string]any{"sub": sub, "exp": inAnHour(), "tenant": "t_" + sub, "barriers": []any{"desk-" + sub}, "roles": []any{"reader"}})
	}
	for range 3 {
		for sub, tok := range toks {
			id, err := v.Verify(tok)
			if err != nil || id.Sub != sub || id.Tenant != "t_"+sub || len(id.Barriers) != 1 || id.Barriers[0] != "desk-"+sub {
				t.Fatalf("token of %s: %+v, %v", sub, id, err)
			}
		}
	}
	if hits := v.cache.hits.Load(); hits != 4 {
		t.Fatalf("%d answers from the cache, want 4", hits)
	}
	tampered := []byte(toks["alice"])
	last := len(tampered) - 2 // inside the signature, not its padding bits
	tampered[last] ^= 1
	if tampered[last] == '.' || tampered[last] == '/' {
		tampered[last] ^= 3
	}
	if id, err := v.Verify(string(tampered)); err == nil {
		t.Fatalf("a token with a changed signature was accepted as %+v", id)
	}
	// The identity handed out is the caller's: changing it changes nothing
	// the next caller gets.
	id, _ := v.Verify(toks["alice"])
	id.Barriers[0], id.Roles[0] = "changed", "admin"
	if again, _ := v.Verify(toks["alice"]); again.Barriers[0] != "desk-alice" || !again.Has(RoleReader) || again.Has(RoleAdmin) {
		t.Fatalf("a caller's change reached the cache: %+v", again)
	}
}

// A token that fails verification is never remembered: it fails each
// time, and one that was refused only for being early is accepted once its
// time comes.
func TestTokenCacheNeverStoresFailures(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	v := clockVerifier(t, 0, &now)
	badSig := signMap(t, map[string]any{"sub": "u", "exp": t0.Add(time.Hour).Unix()})
	badSig = badSig[:len(badSig)-4] + "AAAA"
	noSub := signMap(t, map[string]any{"sub": "", "exp": t0.Add(time.Hour).Unix()}) // refused after the signature
	early := signMap(t, map[string]any{"sub": "u", "exp": t0.Add(time.Hour).Unix(), "nbf": t0.Add(time.Minute).Unix()})
	for range 2 {
		for name, tok := range map[string]string{"bad signature": badSig, "no sub": noSub, "not yet valid": early} {
			if _, err := v.Verify(tok); err == nil {
				t.Fatalf("%s: accepted", name)
			}
		}
	}
	if n := v.cache.len(); n != 0 {
		t.Fatalf("%d entries after only failures, want 0", n)
	}
	now = t0.Add(time.Minute)
	if _, err := v.Verify(early); err != nil {
		t.Fatalf("the early token at its nbf: %v", err)
	}
}

// The cache holds at most its bound; every token still verifies as it
// would without the cache.
func TestTokenCacheBounded(t *testing.T) {
	v := newHS256Verifier(t, AuthConfig{})
	const max = 10
	v.cache = newTokenCache(max)
	for i := range 5 * max {
		sub := fmt.Sprintf("user-%d", i)
		tok := signMap(t, map[string]any{"sub": sub, "exp": inAnHour(), "roles": []any{"reader"}})
		for range 2 {
			id, err := v.Verify(tok)
			if err != nil || id.Sub != sub {
				t.Fatalf("token %d: %+v, %v", i, id, err)
			}
		}
		if n := v.cache.len(); n > max {
			t.Fatalf("%d entries after %d tokens, want at most %d", n, i+1, max)
		}
	}
}

// A remembered token stops being accepted as soon as the key source no
// longer gives the key that verified it (a key removed from a JWKS, or
// replaced under its kid), as it would without the cache; with the key
// back, it verifies again.
func TestTokenCacheFollowsKeys(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	current := map[string]ed25519.PublicKey{"k1": pub}
	v := &Verifier{
		keyfunc: func(tk *jwt.Token) (any, error) {
			kid, _ := tk.Header["kid"].(string)
			k, ok := current[kid]
			if !ok {
				return nil, fmt.Errorf("no key %q", kid)
			}
			return k, nil
		},
		cache: newTokenCache(maxTokenCache),
		now:   time.Now,
	}
	v.opts = []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithValidMethods([]string{"EdDSA"})}
	paths, err := ClaimPaths{}.paths()
	if err != nil {
		t.Fatal(err)
	}
	v.paths = paths
	tok := sign(t, jwt.SigningMethodEdDSA, "k1", priv, claims("u"))
	check := func(step string, want bool) {
		t.Helper()
		if _, err := v.Verify(tok); (err == nil) != want {
			t.Fatalf("%s: Verify = %v, want accepted %v", step, err, want)
		}
	}
	check("first use", true)
	check("from the cache", true)
	if v.cache.hits.Load() != 1 {
		t.Fatalf("%d answers from the cache, want 1", v.cache.hits.Load())
	}
	current["k1"] = otherPub
	check("another key under the same kid", false)
	current["k1"] = pub
	check("key back", true)
	check("from the cache again", true)
	delete(current, "k1")
	check("key removed", false)
	if v.cache.hits.Load() != 2 {
		t.Fatalf("%d answers from the cache, want 2", v.cache.hits.Load())
	}
}
