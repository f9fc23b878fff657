package bm25

import "fmt"

// Scope says over which chunks a tenant's BM25 statistics (N, the length
// sum and df) are taken (SPEC section 4).
type Scope string

const (
	// ScopeEntitled takes the statistics over the chunks the principal may
	// see (entitlement only; freshness does not narrow it), so nothing a
	// principal receives depends on chunks it may not see. The default.
	ScopeEntitled Scope = "entitled"
	// ScopeTenant takes them over all of the tenant's current chunks, the
	// classic single-index behaviour. Scores then move when hidden
	// documents holding a query term are written or removed.
	ScopeTenant Scope = "tenant"
)

// DefaultScope is [ScopeEntitled].
const DefaultScope = ScopeEntitled

// ParseScope checks that s names a scope.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeEntitled, ScopeTenant:
		return Scope(s), nil
	}
	return "", fmt.Errorf("%w: bm25_statistics %q must be %q or %q", ErrInvalidParams, s, ScopeEntitled, ScopeTenant)
}

// Entitled reports whether statistics are taken over the principal's
// entitled chunks. Anything but [ScopeTenant] is entitled: an unset or
// unknown scope fails closed, never into the scope that can leak.
func (s Scope) Entitled() bool { return s != ScopeTenant }
