// Package migrations embeds Cordon's goose SQL migrations. The same folder
// works with the stock goose CLI:
//
//	goose -dir migrations postgres "$CORDON_DATABASE_URL" up
package migrations

import "embed"

// FS holds the *.sql migrations.
//
//go:embed *.sql
var FS embed.FS
