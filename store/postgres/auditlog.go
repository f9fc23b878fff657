package postgres

import (
	"context"

	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// AppendAudit appends r to tenant's audit log and returns it as stored,
// once committed ([audit.Log.Append]: group commit, keyed with
// Options.AuditKeys' active key).
func (s *Store) AppendAudit(ctx context.Context, tenant string, r audit.Record) (audit.Record, error) {
	return s.audit.Append(ctx, tenant, r)
}

// VerifyAudit recomputes tenant's audit chain in one snapshot and checks
// it against anchors ([audit.Log.Verify]).
func (s *Store) VerifyAudit(ctx context.Context, tenant string, anchors ...audit.Head) (audit.Summary, error) {
	return s.audit.Verify(ctx, tenant, anchors...)
}

// AuditStats reports the audit appends' group commit so far.
func (s *Store) AuditStats() audit.Stats { return s.audit.Stats() }

// auditLookup resolves a registered tenant's schema for the audit log, with
// the one registry query every path uses.
func auditLookup(ctx context.Context, db DBTX, tenant string) (string, bool, error) {
	t, found, err := lookupTenant(ctx, db, tenant, nil)
	return t.schema, found, err
}
