package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// serviceRoleFlag registers migrate's --service-role.
func serviceRoleFlag(fs *flag.FlagSet, env Env) *string {
	return cmdline.EnvString(fs, env, "service-role", "CORDON_SERVICE_ROLE", "",
		"after migrating, make ROLE a service role, as 'cordon tenant grant ROLE' does (comma-separated for several; idempotent)")
}

// grantServiceRoles makes each role a service role after a migration, so
// that one command, run by a deploy's migration step, leaves the database
// ready for the service.
func grantServiceRoles(ctx context.Context, env Env, url string, roles []string) error {
	if len(roles) == 0 {
		return nil
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	for _, r := range roles {
		if err := st.GrantServiceRole(ctx, r); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "granted service role %s on every tenant, now and later\n", r)
	}
	return nil
}

// migrationJSON is one migration of 'cordon migrate status --json'.
type migrationJSON struct {
	Version   int64      `json:"version"`
	Name      string     `json:"name"`
	Applied   bool       `json:"applied"`
	AppliedAt *time.Time `json:"applied_at"`
}

// printMigrationStatus prints the database's version, the binary's latest,
// and every migration with when it was applied (as goose status does).
func printMigrationStatus(ctx context.Context, env Env, url string, asJSON bool) error {
	cur, latest, err := migrate.Status(ctx, url)
	if err != nil {
		return err
	}
	ms, err := migrate.List(ctx, url)
	if err != nil {
		return err
	}
	if asJSON {
		out := struct {
			Version    int64           `json:"version"`
			Latest     int64           `json:"latest"`
			Pending    int             `json:"pending"`
			Migrations []migrationJSON `json:"migrations"`
		}{Version: cur, Latest: latest, Migrations: []migrationJSON{}}
		for _, m := range ms {
			out.Migrations = append(out.Migrations, migrationJSON{Version: m.Version, Name: m.Name, Applied: m.AppliedAt != nil, AppliedAt: m.AppliedAt})
			if m.AppliedAt == nil {
				out.Pending++
			}
		}
		return writeJSON(env.Stdout, out)
	}
	fmt.Fprintf(env.Stdout, "database at version %d (latest %d)\n", cur, latest)
	fmt.Fprintf(env.Stdout, "%-8s %-45s %s\n", "VERSION", "MIGRATION", "APPLIED AT")
	for _, m := range ms {
		at := "pending"
		if m.AppliedAt != nil {
			at = m.AppliedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(env.Stdout, "%05d    %-45s %s\n", m.Version, m.Name, at)
	}
	return nil
}
