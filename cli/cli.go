package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/internal/cmdline"
)

// Env is the process environment a command runs in.
type Env = cmdline.Env

// Exit codes.
const (
	ExitOK    = cmdline.ExitOK
	ExitError = cmdline.ExitError // the command failed; the message says why
	ExitUsage = cmdline.ExitUsage // bad flags or arguments
)

// commandTable is every command, in the order 'cordon --help' lists them.
// It is the one place a command is registered.
func commandTable() []*cmdline.Command {
	return []*cmdline.Command{
		demoCommand(),
		replayCommand(),
		migrateCommand(),
		tenantCommand(),
		ingestCommand(),
		serveCommand(),
		tokenCommand(),
		queryCommand(),
		auditCommand(),
		versionCommand(),
	}
}

// movedCommands are the measuring commands, which cordon-lab runs: the
// serving binary links none of the lab packages.
var movedCommands = []string{"bench", "eval", "corpus"}

// movedCommand reports the moved command args name: 'cordon bench ...' or
// 'cordon help bench'.
func movedCommand(args []string) (string, bool) {
	if len(args) > 1 && slices.Contains([]string{"-h", "--help", "-help", "help"}, args[0]) {
		args = args[1:]
	}
	if len(args) > 0 && slices.Contains(movedCommands, args[0]) {
		return args[0], true
	}
	return "", false
}

// Main runs the cordon command line with args (without the program name) and
// returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	if name, ok := movedCommand(args); ok {
		fmt.Fprintf(env.Stderr, "cordon %s: moved: run cordon-lab %s\n", name, name)
		return ExitUsage
	}
	return cmdline.Main(ctx, env, cmdline.Program{Name: "cordon", Commands: commandTable(), Usage: topUsage}, args)
}

func topUsage(cmds []*cmdline.Command) string {
	var b strings.Builder
	b.WriteString(`cordon: authorized hybrid retrieval (BM25 + signed-hash dense, RRF, rerank)
over an in-memory store or PostgreSQL + pgvector.

Usage:
  cordon <command> [subcommand] [flags] [args]

Flags may come before or after arguments; '--' ends the flags.

Commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-10s %s\n", c.Name, c.Summary)
	}
	b.WriteString(`
Run 'cordon <command> --help' (or 'cordon <command> <subcommand> --help') for
a command's flags and an example; help never needs a database.

Commands that use PostgreSQL take --database-url, else $CORDON_DATABASE_URL,
else the libpq variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
PGSSLMODE, ... (as psql reads them).

Measuring (bench, eval, corpus) is cordon-lab's: run 'cordon-lab --help'.

Start with: cordon demo
`)
	return b.String()
}
