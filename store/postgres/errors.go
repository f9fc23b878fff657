package postgres

import "errors"

var (
	// ErrTenantNotFound is returned by Put and CreateTenant's callers when the
	// tenant is not registered (and the store does not auto-create tenants).
	ErrTenantNotFound = errors.New("tenant not found")
	// ErrTenantSettings is returned by CreateTenant when the tenant exists with
	// other index settings.
	ErrTenantSettings = errors.New("tenant exists with other index settings")
	// ErrUnavailable wraps failures to reach the database.
	ErrUnavailable = errors.New("database unavailable")
)
