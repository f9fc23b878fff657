// Package migrations embeds Cordon's goose SQL migrations. The same folder
// works with the stock goose CLI, given Cordon's schema-qualified
// bookkeeping table (migrate.VersionTable):
//
//	goose -dir migrations -table public.goose_db_version postgres "$CORDON_DATABASE_URL" up
package migrations

import "embed"

// FS holds the *.sql migrations.
//
//go:embed *.sql
var FS embed.FS
