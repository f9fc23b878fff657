package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/cordon-rag/cordon/store/postgres"
)

func init() {
	register(&command{
		name:    "audit",
		summary: "verify a tenant's hash-chained audit log",
		usage: `Usage: cordon audit verify --tenant NAME [--database-url URL]

Recomputes the hash chain of the tenant's audit log (one record per retrieve,
ground and assemble served over HTTP) and says where it breaks: a modified,
inserted or deleted record is reported with its sequence number, and the
command exits 1. On success it prints the number of records and the head hash;
keep the head hash elsewhere (a ticket, a WORM store) to detect the removal of
the newest records too.

Example:
  cordon audit verify --tenant wholesale
`,
		run: runAudit,
	})
}

func runAudit(ctx context.Context, env Env, args []string) error {
	c := commands["audit"]
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(env.Stdout, c.usage)
			return errHelp()
		}
		return fmt.Errorf("%w: want the action 'verify'", errUsage)
	}
	fs := newFlagSet(c, env)
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $CORDON_DATABASE_URL)")
	tenant := fs.String("tenant", "", "tenant whose log to verify; required")
	if err := parseFlags(fs, c, env, args[1:]); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 0 {
		return fmt.Errorf("%w: verify needs --tenant NAME and no arguments", errUsage)
	}
	st, err := postgres.Open(ctx, databaseURL(env, *dbURL), postgres.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	sum, err := st.VerifyAudit(ctx, *tenant)
	var br *postgres.AuditBreak
	if errors.As(err, &br) {
		fmt.Fprintf(env.Stdout, "BROKEN: tenant %s: %s\n", *tenant, br.Error())
		return fmt.Errorf("the audit log of tenant %q has been tampered with at seq %d", *tenant, br.Seq)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "ok: tenant %s: %d records, chain intact, head %s\n", *tenant, sum.Rows, sum.Head)
	return nil
}

func errHelp() error { return flag.ErrHelp }
