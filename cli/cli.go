package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
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

type command struct {
	name    string
	summary string
	usage   string // full help text, with an example
	run     func(ctx context.Context, env Env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// Main runs the cordon command line with args (without the program name) and
// returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fmt.Fprint(env.Stdout, c.usage)
				return ExitOK
			}
		}
		fmt.Fprint(env.Stdout, topUsage())
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "cordon: unknown command %q\n\n%s", args[0], topUsage())
		return ExitUsage
	}
	err := c.run(ctx, env, args[1:])
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "cordon %s: %v\nRun 'cordon %s --help' for usage.\n", c.name, err, c.name)
		return ExitUsage
	default:
		fmt.Fprintf(env.Stderr, "cordon %s: %v\n", c.name, err)
		return ExitError
	}
}

func topUsage() string {
	var b strings.Builder
	b.WriteString(`cordon: authorized hybrid retrieval (BM25 + signed-hash dense, RRF, rerank)
over an in-memory store or PostgreSQL + pgvector.

Usage:
  cordon <command> [flags] [args]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString(`
Run 'cordon <command> --help' for a command's flags and an example.
Start with: cordon demo
`)
	return b.String()
}

// newFlagSet returns a FlagSet that prints c's usage on -h and reports errors
// as usage errors.
func newFlagSet(c *command, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, printing help on -h.
func parseFlags(fs *flag.FlagSet, c *command, env Env, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(env.Stdout, c.usage)
			var defaults strings.Builder
			fs.SetOutput(&defaults)
			fs.PrintDefaults()
			if defaults.Len() > 0 {
				fmt.Fprintf(env.Stdout, "\nFlags:\n%s", defaults.String())
			}
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// logger returns a JSON structured logger on stderr.
func logger(env Env) *slog.Logger {
	return slog.New(slog.NewJSONHandler(env.Stderr, nil))
}
