package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
)

// Env is the process environment a command runs in.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed; the message says why
	ExitUsage = 2 // bad flags or arguments
)

// errUsage marks an error as a usage error (exit 2).
var errUsage = errors.New("usage")

// A command is one 'cordon NAME' or 'cordon NAME SUB'. A command with subs
// runs the sub its arguments name; run, when set, is what it does when they
// name none (migrate's default "up", eval's main run).
type command struct {
	name    string
	summary string
	usage   string // full help text, with an example
	run     func(ctx context.Context, env Env, c *command, args []string) error
	subs    []*command
	parent  *command // set by commandTable
}

// path is the command as typed: "tenant create".
func (c *command) path() string {
	if c.parent == nil {
		return c.name
	}
	return c.parent.path() + " " + c.name
}

// commandTable is every command, in the order 'cordon --help' lists them.
// It is the one place a command is registered.
func commandTable() []*command {
	cmds := []*command{
		demoCommand(),
		replayCommand(),
		migrateCommand(),
		tenantCommand(),
		ingestCommand(),
		serveCommand(),
		tokenCommand(),
		queryCommand(),
		auditCommand(),
		evalCommand(),
		corpusCommand(),
		benchCommand(),
		versionCommand(),
	}
	var link func(parent *command)
	link = func(parent *command) {
		for _, s := range parent.subs {
			s.parent = parent
			link(s)
		}
	}
	for _, c := range cmds {
		link(c)
	}
	return cmds
}

func findCommand(cmds []*command, name string) *command {
	i := slices.IndexFunc(cmds, func(c *command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return cmds[i]
}

// subIndex is the position in args of the first argument naming one of c's
// subcommands (before any "--"), or -1. Flags may come before it:
// 'cordon tenant --database-url U create t1'.
func subIndex(c *command, args []string) int {
	for i, a := range args {
		if a == "--" {
			return -1
		}
		if findCommand(c.subs, a) != nil {
			return i
		}
	}
	return -1
}

// resolve descends from the top-level command args[0] into the subcommand
// the remaining arguments name, and returns it with its arguments.
func resolve(cmds []*command, args []string) (*command, []string) {
	c := findCommand(cmds, args[0])
	if c == nil {
		return nil, nil
	}
	args = args[1:]
	for len(c.subs) > 0 {
		i := subIndex(c, args)
		if i < 0 {
			break
		}
		c = findCommand(c.subs, args[i])
		args = append(args[:i:i], args[i+1:]...)
	}
	return c, args
}

// Main runs the cordon command line with args (without the program name) and
// returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	cmds := commandTable()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		if len(args) > 1 {
			if c, _ := resolve(cmds, args[1:]); c != nil {
				fmt.Fprint(env.Stdout, c.usage)
				return ExitOK
			}
		}
		fmt.Fprint(env.Stdout, topUsage(cmds))
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	c, rest := resolve(cmds, args)
	if c == nil {
		fmt.Fprintf(env.Stderr, "cordon: unknown command %q\n\n%s", args[0], topUsage(cmds))
		return ExitUsage
	}
	var err error
	if c.run == nil {
		err = noSubcommand(env, c, rest)
	} else {
		err = c.run(ctx, env, c, rest)
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "cordon %s: %v\nRun 'cordon %s --help' for usage.\n", c.path(), err, c.path())
		return ExitUsage
	default:
		fmt.Fprintf(env.Stderr, "cordon %s: %v\n", c.path(), err)
		return ExitError
	}
}

// noSubcommand answers a command that needs a subcommand and got none: its
// help on -h, else a usage error naming the subcommands.
func noSubcommand(env Env, c *command, args []string) error {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = s.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(env.Stdout, c.usage)
		return flag.ErrHelp
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: unknown subcommand %q (want %s)", errUsage, args[0], want)
	}
	return fmt.Errorf("%w: want a subcommand: %s", errUsage, want)
}

func topUsage(cmds []*command) string {
	var b strings.Builder
	b.WriteString(`cordon: authorized hybrid retrieval (BM25 + signed-hash dense, RRF, rerank)
over an in-memory store or PostgreSQL + pgvector.

Usage:
  cordon <command> [subcommand] [flags] [args]

Flags may come before or after arguments; '--' ends the flags.

Commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run 'cordon <command> --help' (or 'cordon <command> <subcommand> --help') for
a command's flags and an example; help never needs a database.

Commands that use PostgreSQL take --database-url, else $CORDON_DATABASE_URL,
else the libpq variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE,
PGSSLMODE, ... (as psql reads them).

Start with: cordon demo
`)
	return b.String()
}

// newFlagSet returns a silent FlagSet for c; parseFlags reports its errors.
func newFlagSet(c *command, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(c.path(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with flags and arguments interspersed, as Go CLIs
// do ('migrate --database-url U status' and 'migrate status --database-url
// U' mean the same); "--" ends the flags. Afterwards fs.Args() holds the
// arguments in order. On -h it prints c's usage and flags and returns
// flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, c *command, env Env, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs, c, env)
				return flag.ErrHelp
			}
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave the arguments in fs.Args(); "--" stops the parse at once, so
	// no flag value changes.
	return fs.Parse(append([]string{"--"}, positional...))
}

func printHelp(fs *flag.FlagSet, c *command, env Env) {
	fmt.Fprint(env.Stdout, c.usage)
	var defaults strings.Builder
	fs.SetOutput(&defaults)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if defaults.Len() > 0 {
		fmt.Fprintf(env.Stdout, "\nFlags:\n%s", defaults.String())
	}
}

// listFlag is a repeatable flag whose values may also be comma-separated:
// --role reader,writer is --role reader --role writer. Empty items are
// dropped.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// splitList splits a comma-separated value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// repeatFlag is a repeatable flag taken whole, commas included (a JSON
// policy, a file name).
type repeatFlag []string

func (r *repeatFlag) String() string     { return strings.Join(*r, " ") }
func (r *repeatFlag) Set(v string) error { *r = append(*r, v); return nil }

// logger returns a JSON structured logger on stderr.
func logger(env Env) *slog.Logger {
	return slog.New(slog.NewJSONHandler(env.Stderr, nil))
}
