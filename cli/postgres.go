package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/localmodel"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

func migrateCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "migrate",
		Summary: "apply Cordon's database migrations (goose)",
		Usage: `Usage: cordon migrate [--database-url URL] [up [--service-role ROLE]|status [--json]|down-to VERSION]

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

  up               apply every pending migration (the default), then build
                   the column blocks of tenants that have none yet (tenants
                   that held chunks before migration 00014; without this step
                   a tenant's first write starts its build) and pack the
                   postings rows written before migration 00015 (without this
                   step they are read as they are until a merge rewrites
                   them); each tenant's writes wait while it is upgraded; with
                   --service-role ROLE ($CORDON_SERVICE_ROLE), then make ROLE a
                   service role as 'cordon tenant grant ROLE' does, so that a
                   deploy's one migration step leaves the database ready for
                   the service
  status           print the database's version, the latest known version and
                   every migration with when it was applied (reads only;
                   --json for one JSON object)
  down-to VERSION  roll back to VERSION (0 removes Cordon and every tenant schema)

Examples:
  cordon migrate --database-url postgres://cordon@127.0.0.1:5432/cordon
  cordon migrate --service-role cordon_service
  CORDON_DATABASE_URL=postgres://... cordon migrate status --json
` + databaseHelp,
		Run: runMigrate,
		Subs: []*cmdline.Command{
			{Name: "up", Summary: "apply every pending migration", Run: runMigrate, Usage: `Usage: cordon migrate up [--database-url URL] [--service-role ROLE]

Applies every pending migration under an advisory lock, builds the column
blocks of tenants that have none yet (tenants that held chunks before
migration 00014; the SQL query path reads them) and prints the database's
version. 'cordon migrate' alone does the same. --service-role
ROLE ($CORDON_SERVICE_ROLE; comma-separated for several) then makes ROLE a
service role, as 'cordon tenant grant ROLE' does: run as the owner role, one
step migrates and grants. The role must exist.
` + databaseHelp + `
Example:
  cordon migrate up --database-url postgres://cordon@127.0.0.1:5432/cordon --service-role cordon_service
`},
			{Name: "status", Summary: "print the versions and every migration (reads only)", Run: runMigrate, Usage: `Usage: cordon migrate status [--database-url URL] [--json]

Prints the database's migration version, the latest this binary knows, and
every migration this binary holds with when the database applied it
("pending" if not yet), as goose status does. It only reads: a database
never migrated is at version 0. --json prints {"version", "latest",
"pending", "migrations": [{"version", "name", "applied", "applied_at"}]}.
` + databaseHelp + `
Example:
  cordon migrate status --database-url "$URL" --json
`},
			{Name: "down-to", Summary: "roll back to VERSION", Run: runMigrate, Usage: `Usage: cordon migrate down-to [--database-url URL] VERSION

Rolls migrations back to VERSION; 0 removes Cordon and every tenant schema,
documents included.
` + databaseHelp + `
Example:
  cordon migrate down-to 3
`},
		},
	}
}

func tenantCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "tenant",
		Summary: "create, drop or list tenants (one Postgres schema each)",
		Usage: `Usage: cordon tenant create|set|reembed|distribute|drop|list|grant|revoke [flags] [NAME|ROLE]

  create NAME   register a tenant and create its schema (idempotent); its index
                settings are fixed at creation, except --bm25-statistics and
                the embedding model (see reembed)
  set NAME      change --bm25-statistics of an existing tenant (takes effect
                with the next query; nothing is re-indexed)
  reembed NAME  move a tenant to another embedding model with no downtime:
                backfill, shadow comparison, cut-over, roll-back, finish
  distribute NAME
                on a Citus coordinator, move a tenant created before the
                workers were added (or before Citus) to a worker node; 'create'
                does this by itself on a coordinator with workers
  drop NAME     remove a tenant, its schema and all its documents; needs --yes
  list          list tenants with their settings and chunk counts, and the
                service roles
  grant ROLE    make ROLE a service role: grant it what serving needs on every
                tenant, and on every tenant created or upgraded later (INSERT
                and SELECT only on the audit log)
  revoke ROLE   remove ROLE from the service roles and revoke those grants

Run these as the owner role (the one that ran 'cordon migrate'); the service
connects as a service role that owns nothing (see docs/security.md).

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
` + databaseHelp,
		Subs: []*cmdline.Command{
			{Name: "create", Summary: "register a tenant and create its schema", Run: runTenant, Usage: `Usage: cordon tenant create [--database-url URL] [--model NAME] [--dims N] [--k1 X] [--b X]
                            [--max-words N] [--overlap-words N] [--bm25-statistics entitled|tenant] NAME

Registers tenant NAME and creates its schema cordon_t_NAME (idempotent: the
same settings again is not an error). Its index settings are fixed at
creation, except --bm25-statistics and the embedding model ('cordon tenant
reembed'). --model hash (the default) is signed feature hashing; any other
name is a model that the servers writing and querying the tenant serve with
--embed-url (docs/embeddings.md). --dims is the vector length: without it,
the model's own (hash 256, use-lite 512); any other model needs --dims.
'cordon tenant --help' says more.
` + databaseHelp + `
Examples:
  cordon tenant create --dims 512 --max-words 120 --overlap-words 20 retail
  cordon tenant create --model use-lite research
`},
			reembedCommand(),
			{Name: "set", Summary: "change a tenant's --bm25-statistics", Run: runTenant, Usage: `Usage: cordon tenant set [--database-url URL] --bm25-statistics entitled|tenant NAME

Changes the BM25 statistics scope of an existing tenant; it takes effect
with the next query and nothing is re-indexed.
` + databaseHelp + `
Example:
  cordon tenant set --bm25-statistics entitled legacy_tenant
`},
			{Name: "distribute", Summary: "move a tenant to a Citus worker (schema-based sharding)", Run: runTenant, Usage: `Usage: cordon tenant distribute [--database-url URL] NAME

On a Citus coordinator with worker nodes, makes tenant NAME's schema a
distributed schema: Citus moves all its tables, data included, to one
worker, and routes each of the tenant's queries to that worker alone. The
tenant's writes wait while its data is copied. A tenant created on a
coordinator with workers is distributed already ('cordon tenant create'
does it); this is for tenants created before. docs/scaling.md has the rest
(moving a tenant to another worker, rebalancing).
` + databaseHelp + `
Example:
  cordon tenant distribute retail
`},
			{Name: "drop", Summary: "remove a tenant and all its documents (needs --yes)", Run: runTenant, Usage: `Usage: cordon tenant drop [--database-url URL] --yes NAME

Removes tenant NAME, its schema and all its documents, for good.
` + databaseHelp + `
Example:
  cordon tenant drop --yes retail
`},
			{Name: "list", Summary: "list tenants, their settings and chunk counts", Run: runTenant, Usage: `Usage: cordon tenant list [--database-url URL] [--json]

Lists the tenants with their settings and chunk counts, and the service
roles. --json prints one object: {"tenants": [{"name", "schema", "model",
"dims", "k1", "b", "max_words", "overlap_words", "bm25_statistics",
"chunks", "reembed", "analyzer"}], "service_roles": [...]}.
` + databaseHelp + `
Example:
  cordon tenant list
`},
			{Name: "grant", Summary: "make ROLE a service role", Run: runTenant, Usage: `Usage: cordon tenant grant [--database-url URL] ROLE

Makes ROLE a service role: grants it what serving needs on every tenant, now
and on every tenant created or upgraded later (INSERT and SELECT only on the
audit log). Run it as the owner role.
` + databaseHelp + `
Example:
  cordon tenant grant cordon_service
`},
			{Name: "revoke", Summary: "remove ROLE from the service roles", Run: runTenant, Usage: `Usage: cordon tenant revoke [--database-url URL] ROLE

Removes ROLE from the service roles and revokes their grants.
` + databaseHelp + `
Example:
  cordon tenant revoke cordon_service
`},
		},
	}
}

// databaseHelp ends the help of every command that uses PostgreSQL.
const databaseHelp = `
The database is --database-url, else $CORDON_DATABASE_URL, else the libpq
environment variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
PGSSLMODE, ... (as psql reads them, ~/.pgpass and PGSERVICE included).
`

func runMigrate(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	action := "up"
	if c.Parent() != nil {
		action = c.Name
	}
	var serviceRoles *string
	var asJSON *bool
	switch action {
	case "up":
		serviceRoles = serviceRoleFlag(fs, env)
	case "status":
		asJSON = fs.Bool("json", false, "print the versions and every migration as one JSON object")
	}
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if c.Parent() == nil && fs.NArg() > 0 {
		return fmt.Errorf("%w: unknown action %q (want up, status or down-to)", cmdline.ErrUsage, fs.Arg(0))
	}
	wantArgs := 0
	if action == "down-to" {
		wantArgs = 1
	}
	if fs.NArg() != wantArgs {
		if action == "down-to" {
			return fmt.Errorf("%w: down-to needs a VERSION", cmdline.ErrUsage)
		}
		return fmt.Errorf("%w: %s takes no arguments, got %q", cmdline.ErrUsage, action, fs.Args())
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	switch action {
	case "up":
		res, err := migrate.Up(ctx, url)
		if err != nil {
			return err
		}
		for _, r := range res {
			fmt.Fprintf(env.Stdout, "applied %05d %s\n", r.Version, r.Source)
		}
		if err := upgradeTenants(ctx, env, url); err != nil {
			return err
		}
		if err := grantServiceRoles(ctx, env, url, cmdline.SplitList(*serviceRoles)); err != nil {
			return err
		}
		cur, latest, err := migrate.Status(ctx, url)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "database at version %d (latest %d)\n", cur, latest)
		return nil
	case "status":
		return printMigrationStatus(ctx, env, url, *asJSON)
	case "down-to":
		v, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("%w: VERSION %q is not a non-negative integer", cmdline.ErrUsage, fs.Arg(0))
		}
		if err := migrate.DownTo(ctx, url, v); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "database at version %d\n", v)
		return nil
	}
	return nil
}

// upgradeTenants builds the column blocks of the tenants that held chunks
// before migration 00014 and packs the postings rows written before
// migration 00015 (the SQL query path reads both), printing each tenant.
func upgradeTenants(ctx context.Context, env Env, url string) error {
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.BuildColumns(ctx, func(tenant string, chunks int64, took time.Duration) {
		fmt.Fprintf(env.Stdout, "built the column blocks of tenant %s (%d chunks) in %.1fs\n", tenant, chunks, took.Seconds())
	}); err != nil {
		return err
	}
	_, err = st.PackPostings(ctx, func(tenant string, rows int64, took time.Duration) {
		fmt.Fprintf(env.Stdout, "packed the postings of tenant %s (%d rows) in %.1fs\n", tenant, rows, took.Seconds())
	})
	return err
}

// settingsFlags registers the index-settings flags on fs. Without --dims
// the dimensions are the model's when its name fixes them (modelDims);
// another model needs --dims.
func settingsFlags(fs *flag.FlagSet) func() (index.Settings, error) {
	model := fs.String("model", embed.Hash, "embedding model of the dense side: hash, or a model name an --embed-url server serves")
	dims := fs.Int("dims", 0, fmt.Sprintf("dense vector dimensions (1..16000); default the model's: %s; another model needs it", knownModelDims()))
	k1 := fs.Float64("k1", bm25.DefaultK1, "BM25 k1 (>= 0)")
	b := fs.Float64("b", bm25.DefaultB, "BM25 b (0..1)")
	maxWords := fs.Int("max-words", chunk.DefaultMaxWords, "words per chunk window")
	overlap := fs.Int("overlap-words", chunk.DefaultOverlapWords, "words shared by consecutive windows (< max-words)")
	scope := fs.String("bm25-statistics", string(bm25.DefaultScope), `BM25 statistics scope: "entitled" or "tenant"`)
	analyzer := fs.String("analyzer", analysis.AnalyzerEnglish, `analyzer: "english" (each word and its English stem, so "contribution" finds "contribute") or "exact" (each word as written)`)
	fields := fs.Bool("fields", true, "index each chunk's document title, the headings enclosing its section and its own as field terms, searchable with the policy's field_weight")
	return func() (index.Settings, error) {
		if err := analysis.ValidateAnalyzer(*analyzer); err != nil {
			return index.Settings{}, fmt.Errorf("%w: --analyzer: %w", cmdline.ErrUsage, err)
		}
		d := *dims
		if d == 0 {
			known, ok := modelDims(*model)
			if !ok {
				return index.Settings{}, fmt.Errorf("%w: --model %s needs --dims, its vector length (known without it: %s)", cmdline.ErrUsage, *model, knownModelDims())
			}
			d = known
		}
		return index.Settings{Model: *model, Dims: d, BM25: bm25.Params{K1: *k1, B: *b}, Chunking: chunk.Options{MaxWords: *maxWords, OverlapWords: *overlap},
			Statistics: bm25.Scope(*scope), Analyzer: *analyzer, Fields: *fields}, nil
	}
}

// flagGiven reports whether the command line set flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

// analysisOf is tenant's analyzer and field setting as recorded, or an
// error when the tenant does not exist. A tenant whose tokenizer version
// this binary does not produce has the exact analyzer and no fields.
func analysisOf(ctx context.Context, st *postgres.Store, tenant string) (string, bool, error) {
	ts, err := st.Tenants(ctx)
	if err != nil {
		return "", false, err
	}
	for _, t := range ts {
		if t.Name == tenant {
			if t.Settings.Analyzer == "" {
				return analysis.AnalyzerExact, false, nil
			}
			return t.Settings.Analyzer, t.Settings.Fields, nil
		}
	}
	return "", false, fmt.Errorf("%w: %q", postgres.ErrTenantNotFound, tenant)
}

// analyzerName is a listed tenant's analyzer, or its recorded tokenizer
// version when this binary has no analyzer that produces it.
func analyzerName(t postgres.TenantInfo) string {
	if t.Settings.Analyzer != "" {
		return t.Settings.Analyzer
	}
	return "unknown (" + t.Tokenizer + ")"
}

// fieldsName is a tenant's field terms as 'cordon tenant list' shows them:
// "true" (titles and section paths, length-normalised frequencies),
// "unnormalised" (the rules before length normalisation), "section-only"
// (titles and each section's own heading, the rules before section paths)
// or "false". 'cordon tenant set --fields=true' moves a tenant to the
// current rules.
func fieldsName(t postgres.TenantInfo) string {
	switch {
	case !t.Settings.Fields:
		return "false"
	case t.Settings.FieldRules == analysis.FieldsSectionVersion:
		return "section-only"
	case t.Settings.FieldRules == analysis.FieldsPathVersion:
		return "unnormalised"
	}
	return "true"
}

func runTenant(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	action := c.Name
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	// Each subcommand takes only its own flags, and its --help lists them.
	var (
		settings func() (index.Settings, error)
		scope    *string
		analyzer *string
		fields   *bool
		yes      *bool
		asJSON   *bool
	)
	switch action {
	case "create":
		settings = settingsFlags(fs)
	case "set":
		scope = fs.String("bm25-statistics", "", `BM25 statistics scope: "entitled" or "tenant" (set changes only what a flag names)`)
		analyzer = fs.String("analyzer", "", `analyzer: "english" or "exact"; re-indexes every document of the tenant in one transaction (set changes only what a flag names)`)
		fields = fs.Bool("fields", true, "index titles and headings (section paths) as field terms (--fields=false: not); re-indexes like --analyzer, and moves a tenant whose FIELDS is unnormalised or section-only to the current field rules")
	case "drop":
		yes = fs.Bool("yes", false, "confirm: the tenant's documents are deleted for good")
	case "list":
		asJSON = fs.Bool("json", false, "print the tenants and the service roles as one JSON object")
	}
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	wantArgs := 1
	if action == "list" {
		wantArgs = 0
	}
	if fs.NArg() != wantArgs {
		return fmt.Errorf("%w: %s takes %d argument(s), got %d", cmdline.ErrUsage, action, wantArgs, fs.NArg())
	}
	var created index.Settings
	var fieldsGiven bool
	switch action {
	case "create":
		s, err := settings()
		if err != nil {
			return err
		}
		created = s
	case "set":
		fieldsGiven = flagGiven(fs, "fields")
		if *scope == "" && *analyzer == "" && !fieldsGiven {
			return fmt.Errorf("%w: set changes nothing without a flag: give --bm25-statistics entitled|tenant, --analyzer english|exact or --fields=true|false", cmdline.ErrUsage)
		}
		if *scope != "" {
			if _, err := bm25.ParseScope(*scope); err != nil {
				return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
			}
		}
		if *analyzer != "" {
			if err := analysis.ValidateAnalyzer(*analyzer); err != nil {
				return fmt.Errorf("%w: --analyzer: %w", cmdline.ErrUsage, err)
			}
		}
	case "drop":
		if !*yes {
			return fmt.Errorf("%w: dropping tenant %q deletes all its documents; add --yes to confirm", cmdline.ErrUsage, fs.Arg(0))
		}
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	switch action {
	case "create":
		isNew, err := st.CreateTenant(ctx, fs.Arg(0), created)
		if err != nil {
			return err
		}
		if isNew {
			fmt.Fprintf(env.Stdout, "created tenant %s\n", fs.Arg(0))
		} else {
			fmt.Fprintf(env.Stdout, "tenant %s already exists with these settings\n", fs.Arg(0))
		}
	case "distribute":
		done, err := st.DistributeTenant(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		p, err := st.TenantPlacement(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if done {
			fmt.Fprintf(env.Stdout, "distributed tenant %s: %d tables on %s\n", fs.Arg(0), p.Tables, p.Node)
		} else {
			fmt.Fprintf(env.Stdout, "tenant %s is distributed already: %d tables on %s\n", fs.Arg(0), p.Tables, p.Node)
		}
	case "set":
		if *scope != "" {
			scope := bm25.Scope(*scope)
			found, err := st.SetStatistics(ctx, fs.Arg(0), scope)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("tenant %q does not exist", fs.Arg(0))
			}
			fmt.Fprintf(env.Stdout, "tenant %s: bm25_statistics %s\n", fs.Arg(0), scope)
		}
		if *analyzer != "" || fieldsGiven {
			a, f, err := analysisOf(ctx, st, fs.Arg(0))
			if err != nil {
				return err
			}
			if *analyzer != "" {
				a = *analyzer
			}
			if fieldsGiven {
				f = *fields
			}
			start := time.Now()
			n, err := st.SetAnalyzer(ctx, fs.Arg(0), a, f, func(done, total int64) {
				fmt.Fprintf(env.Stderr, "re-indexed %d of %d documents (%.1fs)\n", done, total, time.Since(start).Seconds())
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "tenant %s: analyzer %s, fields %t (%d documents re-indexed in %.1fs)\n", fs.Arg(0), a, f, n, time.Since(start).Seconds())
		}
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
		roles, err := st.ServiceRoles(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeTenantsJSON(env.Stdout, ts, roles)
		}
		fmt.Fprintf(env.Stdout, "%-20s %-30s %6s %5s %5s %9s %7s %-15s %8s %-16s %-8s %-8s %s\n", "TENANT", "SCHEMA", "DIMS", "K1", "B", "MAX_WORDS", "OVERLAP", "BM25_STATISTICS", "CHUNKS", "MODEL", "REEMBED", "ANALYZER", "FIELDS")
		for _, t := range ts {
			fmt.Fprintf(env.Stdout, "%-20s %-30s %6d %5g %5g %9d %7d %-15s %8d %-16s %-8s %-8s %s\n", t.Name, t.Schema, t.Settings.Dims, t.Settings.BM25.K1, t.Settings.BM25.B,
				t.Settings.Chunking.MaxWords, t.Settings.Chunking.OverlapWords, t.Settings.Statistics, t.Chunks, t.Settings.Spec().Model, t.Reembed, analyzerName(t), fieldsName(t))
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

// openPostgresReplay opens the Postgres store for 'cordon replay': it
// migrates, drops the tenants of o.reset, and creates each tenant the
// script meets with the script's settings.
func openPostgresReplay(ctx context.Context, url string, o replayOptions) (replay.OpenFunc, func(), error) {
	if _, err := migrate.Up(ctx, url); err != nil {
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
		st, err = postgres.Open(ctx, url, postgres.Options{AutoCreate: &s, CacheBytes: o.cacheBytes, CacheLoadInBackground: true})
		return st, err
	}
	return open, func() {
		if st != nil {
			st.Close()
		}
	}, nil
}

// modelDims is the vector length of a model whose name fixes it: hashing's
// default and the local sentence encoder's (embed/localmodel). Any other
// model's length is the operator's to give.
func modelDims(model string) (int, bool) {
	switch model {
	case embed.Hash:
		return hashembed.DefaultDims, true
	case localmodel.DefaultModelName:
		return localmodel.Dims, true
	}
	return 0, false
}

// knownModelDims lists modelDims's models for messages: "hash 256, use-lite 512".
func knownModelDims() string {
	return fmt.Sprintf("%s %d, %s %d", embed.Hash, hashembed.DefaultDims, localmodel.DefaultModelName, localmodel.Dims)
}
