package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/store/postgres"
)

func init() {
	storeOpeners["postgres"] = func(ctx context.Context, env Env, url string, o replayOptions) (replay.OpenFunc, func(), error) {
		if _, err := postgres.Migrate(ctx, url); err != nil {
			return nil, nil, err
		}
		if len(o.reset) > 0 {
			admin, err := postgres.Open(ctx, url, postgres.Options{})
			if err != nil {
				return nil, nil, err
			}
			for _, t := range o.reset {
				if _, err := admin.DropTenant(ctx, t); err != nil {
					admin.Close()
					return nil, nil, err
				}
			}
			admin.Close()
		}
		var st *postgres.Store
		open := func(ctx context.Context, s index.Settings) (replay.Store, error) {
			var err error
			st, err = postgres.Open(ctx, url, postgres.Options{AutoCreate: &s, CacheBytes: o.cacheBytes})
			return st, err
		}
		return open, func() {
			if st != nil {
				st.Close()
			}
		}, nil
	}
	register(&command{
		name:    "migrate",
		summary: "apply Cordon's database migrations (goose)",
		usage: `Usage: cordon migrate [--database-url URL] [up|status|down-to VERSION]

Applies the embedded goose migrations (migrations/*.sql) under a Postgres
advisory lock: of two deploys migrating at once, one migrates and the other
waits and then finds nothing to do. Goose's bookkeeping is the table
public.goose_db_version, whatever the role's name or search_path. The same
folder works with the stock goose CLI, given that table:
  goose -dir migrations -table public.goose_db_version postgres "$CORDON_DATABASE_URL" up

The first migration runs CREATE EXTENSION IF NOT EXISTS vector, which needs a
superuser; a DBA can run it beforehand, and then Cordon's role needs none.
The role needs CREATE on the database and on schema public (a database owner
has both).

  up               apply every pending migration (the default)
  status           print the database's version and the latest known version
                   (reads only)
  down-to VERSION  roll back to VERSION (0 removes Cordon and every tenant schema)

Examples:
  cordon migrate --database-url postgres://cordon@127.0.0.1:5432/cordon
  CORDON_DATABASE_URL=postgres://... cordon migrate status
`,
		run: runMigrate,
	})
	register(&command{
		name:    "tenant",
		summary: "create, drop or list tenants (one Postgres schema each)",
		usage: `Usage: cordon tenant create|set|drop|list|grant|revoke [flags] [NAME|ROLE]

  create NAME   register a tenant and create its schema (idempotent); its index
                settings are fixed at creation, except --bm25-statistics
  set NAME      change --bm25-statistics of an existing tenant (takes effect
                with the next query; nothing is re-indexed)
  drop NAME     remove a tenant, its schema and all its documents; needs --yes
  list          list tenants with their settings and chunk counts, and the
                service roles
  grant ROLE    make ROLE a service role: grant it what serving needs on every
                tenant, and on every tenant created or upgraded later (INSERT
                and SELECT only on the audit log)
  revoke ROLE   remove ROLE from the service roles and revoke those grants

Run these as the owner role (the one that ran 'cordon migrate'); the service
connects as a service role that owns nothing (see docs/operations.md).

--bm25-statistics picks the BM25 statistics scope: "entitled" (the default)
takes N, the average length and df over the chunks the querying principal may
see, so no score reveals anything about hidden documents; "tenant" takes them
over all of the tenant's chunks (classic single-index BM25; a reader can then
infer which terms hidden documents hold from how its own scores move).

A tenant name is 1-40 characters: a lower-case ASCII letter, then lower-case
letters, digits or '_'. Its schema is cordon_t_<name>.

Examples:
  cordon tenant create --database-url "$URL" wholesale
  cordon tenant create --dims 512 --max-words 120 --overlap-words 20 retail
  cordon tenant set --bm25-statistics entitled legacy_tenant
  cordon tenant drop --yes retail
  cordon tenant grant cordon_service
`,
		run: runTenant,
	})
}

func databaseURL(env Env, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return env.Getenv("CORDON_DATABASE_URL")
}

func runMigrate(ctx context.Context, env Env, args []string) error {
	c := commands["migrate"]
	fs := newFlagSet(c, env)
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $CORDON_DATABASE_URL)")
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	url := databaseURL(env, *dbURL)
	action := "up"
	if fs.NArg() > 0 {
		action = fs.Arg(0)
	}
	switch action {
	case "up":
		res, err := postgres.Migrate(ctx, url)
		if err != nil {
			return err
		}
		for _, r := range res {
			fmt.Fprintf(env.Stdout, "applied %05d %s\n", r.Version, r.Source)
		}
		cur, latest, err := postgres.MigrationStatus(ctx, url)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "database at version %d (latest %d)\n", cur, latest)
		return nil
	case "status":
		cur, latest, err := postgres.MigrationStatus(ctx, url)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "database at version %d (latest %d)\n", cur, latest)
		return nil
	case "down-to":
		if fs.NArg() != 2 {
			return fmt.Errorf("%w: down-to needs a VERSION", errUsage)
		}
		var v int64
		if _, err := fmt.Sscanf(fs.Arg(1), "%d", &v); err != nil || v < 0 {
			return fmt.Errorf("%w: VERSION %q is not a non-negative integer", errUsage, fs.Arg(1))
		}
		if err := postgres.MigrateDownTo(ctx, url, v); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "database at version %d\n", v)
		return nil
	}
	return fmt.Errorf("%w: unknown action %q (want up, status or down-to)", errUsage, action)
}

// settingsFlags registers the index-settings flags on fs.
func settingsFlags(fs *flag.FlagSet) func() index.Settings {
	dims := fs.Int("dims", hashembed.DefaultDims, "dense vector dimensions (1..16000)")
	k1 := fs.Float64("k1", bm25.DefaultK1, "BM25 k1 (>= 0)")
	b := fs.Float64("b", bm25.DefaultB, "BM25 b (0..1)")
	maxWords := fs.Int("max-words", chunk.DefaultMaxWords, "words per chunk window")
	overlap := fs.Int("overlap-words", chunk.DefaultOverlapWords, "words shared by consecutive windows (< max-words)")
	scope := fs.String("bm25-statistics", string(bm25.DefaultScope), `BM25 statistics scope: "entitled" or "tenant"`)
	return func() index.Settings {
		return index.Settings{Dims: *dims, BM25: bm25.Params{K1: *k1, B: *b}, Chunking: chunk.Options{MaxWords: *maxWords, OverlapWords: *overlap},
			Statistics: bm25.Scope(*scope)}
	}
}

func runTenant(ctx context.Context, env Env, args []string) error {
	c := commands["tenant"]
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(env.Stdout, c.usage)
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: want an action: create, set, drop, list, grant or revoke", errUsage)
	}
	action, args := args[0], args[1:]
	fs := newFlagSet(c, env)
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $CORDON_DATABASE_URL)")
	settings := settingsFlags(fs)
	yes := fs.Bool("yes", false, "confirm 'drop': the tenant's documents are deleted for good")
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	url := databaseURL(env, *dbURL)
	wantArgs := 1
	if action == "list" {
		wantArgs = 0
	}
	if fs.NArg() != wantArgs {
		return fmt.Errorf("%w: %s takes %d argument(s), got %d", errUsage, action, wantArgs, fs.NArg())
	}
	switch action {
	case "create", "set", "drop", "list", "grant", "revoke":
	default:
		return fmt.Errorf("%w: unknown action %q (want create, set, drop, list, grant or revoke)", errUsage, action)
	}
	if action == "set" {
		if _, err := bm25.ParseScope(string(settings().Statistics)); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	if action == "drop" && !*yes {
		return fmt.Errorf("%w: dropping tenant %q deletes all its documents; add --yes to confirm", errUsage, fs.Arg(0))
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	switch action {
	case "create":
		created, err := st.CreateTenant(ctx, fs.Arg(0), settings())
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(env.Stdout, "created tenant %s\n", fs.Arg(0))
		} else {
			fmt.Fprintf(env.Stdout, "tenant %s already exists with these settings\n", fs.Arg(0))
		}
	case "set":
		scope := settings().Statistics
		found, err := st.SetStatistics(ctx, fs.Arg(0), scope)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("tenant %q does not exist", fs.Arg(0))
		}
		fmt.Fprintf(env.Stdout, "tenant %s: bm25_statistics %s\n", fs.Arg(0), scope)
	case "drop":
		dropped, err := st.DropTenant(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if !dropped {
			return fmt.Errorf("tenant %q does not exist", fs.Arg(0))
		}
		fmt.Fprintf(env.Stdout, "dropped tenant %s\n", fs.Arg(0))
	case "list":
		ts, err := st.Tenants(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%-20s %-30s %6s %5s %5s %9s %7s %-15s %8s\n", "TENANT", "SCHEMA", "DIMS", "K1", "B", "MAX_WORDS", "OVERLAP", "BM25_STATISTICS", "CHUNKS")
		for _, t := range ts {
			fmt.Fprintf(env.Stdout, "%-20s %-30s %6d %5g %5g %9d %7d %-15s %8d\n", t.Name, t.Schema, t.Settings.Dims, t.Settings.BM25.K1, t.Settings.BM25.B,
				t.Settings.Chunking.MaxWords, t.Settings.Chunking.OverlapWords, t.Settings.Statistics, t.Chunks)
		}
		roles, err := st.ServiceRoles(ctx)
		if err != nil {
			return err
		}
		if len(roles) > 0 {
			fmt.Fprintf(env.Stdout, "service roles: %s\n", strings.Join(roles, ", "))
		}
	case "grant":
		if err := st.GrantServiceRole(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "granted service role %s on every tenant, now and later\n", fs.Arg(0))
	case "revoke":
		found, err := st.RevokeServiceRole(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%q is not a service role", fs.Arg(0))
		}
		fmt.Fprintf(env.Stdout, "revoked service role %s\n", fs.Arg(0))
	}
	return nil
}
