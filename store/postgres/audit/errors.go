package audit

import "errors"

var (
	// ErrKeyring is returned by ParseKeyring, Keyring.Validate and the
	// store's Open for a malformed audit keyring.
	ErrKeyring = errors.New("invalid audit keyring")
	// ErrKeyRequired is returned by Log.Append when the log has no active
	// key but the tenant's chain is keyed: a keyed chain is never
	// continued unkeyed.
	ErrKeyRequired = errors.New("the audit chain is keyed: appending needs an audit key")
)
