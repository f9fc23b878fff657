package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/cordontype"
)

// GrantServiceRole registers role as a service role: it is granted what
// serving needs on every tenant schema now, and on every tenant created or
// upgraded later (see migrations/00009_service_roles.sql). It needs the
// owner role.
func (s *Store) GrantServiceRole(ctx context.Context, role string) error {
	if role == "" {
		return fmt.Errorf("%w: no role name", cordontype.ErrInvalid)
	}
	_, err := s.pool.Exec(ctx, `SELECT cordon.grant_service_role($1)`, role)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42704": // undefined_object
		return fmt.Errorf("grant service role %q: %w: a DBA creates it first (CREATE ROLE %s LOGIN PASSWORD '...')", role, err, role)
	case errors.As(err, &pe) && pe.Code == "42501":
		return fmt.Errorf("%w: the database role may not grant on Cordon's schema (%s): run 'cordon tenant grant %s' as the owner role", ErrOwnerRequired, pe.Message, role)
	case err != nil:
		return fmt.Errorf("grant service role %q: %w", role, classify(err))
	}
	return nil
}

// RevokeServiceRole unregisters a service role and revokes its grants. It
// reports whether role was registered.
func (s *Store) RevokeServiceRole(ctx context.Context, role string) (bool, error) {
	var found bool
	if err := s.pool.QueryRow(ctx, `SELECT cordon.revoke_service_role($1)`, role).Scan(&found); err != nil {
		return false, fmt.Errorf("revoke service role %q: %w", role, classify(err))
	}
	return found, nil
}

// ServiceRoles lists the registered service roles.
func (s *Store) ServiceRoles(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT role_name FROM cordon.service_roles ORDER BY role_name`)
	if err != nil {
		return nil, fmt.Errorf("list service roles: %w", classify(err))
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list service roles: %w", classify(err))
	}
	return roles, nil
}
