// Package pgexec holds what package postgres and package migrate both need
// to run statements: the query surface shared by a pool and a transaction,
// transactions, connection settings, and the classification of connection
// failures.
package pgexec

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrUnavailable wraps failures to reach the database
	// (postgres.ErrUnavailable is this value).
	ErrUnavailable = errors.New("database unavailable")
	// ErrTenantNotFound says a tenant is not registered
	// (postgres.ErrTenantNotFound is this value).
	ErrTenantNotFound = errors.New("tenant not found")
)

// DBTX is the query surface shared by a pool and a transaction, so one query
// path serves both.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ParseConfig parses a database URL, with an error that says where one
// comes from when there is none.
func ParseConfig(url string) (*pgxpool.Config, error) {
	if url == "" {
		return nil, errors.New("no database URL: pass --database-url or set CORDON_DATABASE_URL (e.g. postgres://user@127.0.0.1:5432/db?sslmode=disable)")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	return cfg, nil
}

// Classify marks connection failures with ErrUnavailable.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// TxBeginner is what a transaction begins on: a pool, a pooled connection
// or a connection.
type TxBeginner interface {
	BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
}

// InTx runs fn in a transaction begun on db, committing when it returns
// nil and rolling back otherwise.
func InTx(ctx context.Context, db TxBeginner, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return Classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return Classify(tx.Commit(ctx))
}
