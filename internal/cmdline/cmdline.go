package cmdline

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

// A Command is one 'PROGRAM NAME' or 'PROGRAM NAME SUB'. A command with subs
// runs the sub its arguments name; Run, when set, is what it does when they
// name none (migrate's default "up", eval's main run).
type Command struct {
	Name    string
	Summary string
	Usage   string // full help text, with an example
	Run     func(ctx context.Context, env Env, c *Command, args []string) error
	Subs    []*Command
	parent  *Command // set by Main
}

// Path is the command as typed: "tenant create".
func (c *Command) Path() string {
	if c.parent == nil {
		return c.Name
	}
	return c.parent.Path() + " " + c.Name
}

// Parent is the command c is a subcommand of, nil for a top-level one.
func (c *Command) Parent() *Command { return c.parent }

// A Program is a command line: its name, its commands in the order its help
// lists them, and that help.
type Program struct {
	Name     string
	Commands []*Command
	Usage    func(cmds []*Command) string
}

// link sets every subcommand's parent.
func link(cmds []*Command) {
	for _, c := range cmds {
		for _, s := range c.Subs {
			s.parent = c
		}
		link(c.Subs)
	}
}

func findCommand(cmds []*Command, name string) *Command {
	i := slices.IndexFunc(cmds, func(c *Command) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return cmds[i]
}

// subIndex is the position in args of the first argument naming one of c's
// subcommands (before any "--"), or -1. Flags may come before it:
// 'cordon tenant --database-url U create t1'.
func subIndex(c *Command, args []string) int {
	for i, a := range args {
		if a == "--" {
			return -1
		}
		if findCommand(c.Subs, a) != nil {
			return i
		}
	}
	return -1
}

// resolve descends from the top-level command args[0] into the subcommand
// the remaining arguments name, and returns it with its arguments.
func resolve(cmds []*Command, args []string) (*Command, []string) {
	c := findCommand(cmds, args[0])
	if c == nil {
		return nil, nil
	}
	args = args[1:]
	for len(c.Subs) > 0 {
		i := subIndex(c, args)
		if i < 0 {
			break
		}
		c = findCommand(c.Subs, args[i])
		args = append(args[:i:i], args[i+1:]...)
	}
	return c, args
}

// Main runs p with args (without the program name) and returns the process
// exit code.
func Main(ctx context.Context, env Env, p Program, args []string) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	link(p.Commands)
	cmds := p.Commands
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		if len(args) > 1 {
			if c, _ := resolve(cmds, args[1:]); c != nil {
				fmt.Fprint(env.Stdout, c.Usage)
				return ExitOK
			}
		}
		fmt.Fprint(env.Stdout, p.Usage(cmds))
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	c, rest := resolve(cmds, args)
	if c == nil {
		fmt.Fprintf(env.Stderr, "%s: unknown command %q\n\n%s", p.Name, args[0], p.Usage(cmds))
		return ExitUsage
	}
	var err error
	if c.Run == nil {
		err = noSubcommand(env, c, rest)
	} else {
		err = c.Run(ctx, env, c, rest)
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(env.Stderr, "%s %s: %v\nRun '%s %s --help' for usage.\n", p.Name, c.Path(), err, p.Name, c.Path())
		return ExitUsage
	default:
		fmt.Fprintf(env.Stderr, "%s %s: %v\n", p.Name, c.Path(), err)
		return ExitError
	}
}

// noSubcommand answers a command that needs a subcommand and got none: its
// help on -h, else a usage error naming the subcommands.
func noSubcommand(env Env, c *Command, args []string) error {
	names := make([]string, len(c.Subs))
	for i, s := range c.Subs {
		names[i] = s.Name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		fmt.Fprint(env.Stdout, c.Usage)
		return flag.ErrHelp
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: unknown subcommand %q (want %s)", ErrUsage, args[0], want)
	}
	return fmt.Errorf("%w: want a subcommand: %s", ErrUsage, want)
}

// NewFlagSet returns a silent FlagSet for c; ParseFlags reports its errors.
func NewFlagSet(c *Command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Path(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// ParseFlags parses args with flags and arguments interspersed, as Go CLIs
// do ('migrate --database-url U status' and 'migrate status --database-url
// U' mean the same); "--" ends the flags. Afterwards fs.Args() holds the
// arguments in order. On -h it prints c's usage and flags and returns
// flag.ErrHelp.
func ParseFlags(fs *flag.FlagSet, c *Command, env Env, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs, c, env)
				return flag.ErrHelp
			}
			return fmt.Errorf("%w: %w", ErrUsage, err)
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

func printHelp(fs *flag.FlagSet, c *Command, env Env) {
	fmt.Fprint(env.Stdout, c.Usage)
	var defaults strings.Builder
	fs.SetOutput(&defaults)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if defaults.Len() > 0 {
		fmt.Fprintf(env.Stdout, "\nFlags:\n%s", defaults.String())
	}
}

// ListFlag is a repeatable flag whose values may also be comma-separated:
// --role reader,writer is --role reader --role writer. Empty items are
// dropped.
type ListFlag []string

func (l *ListFlag) String() string { return strings.Join(*l, ",") }

// Set adds v's comma-separated items.
func (l *ListFlag) Set(v string) error {
	*l = append(*l, SplitList(v)...)
	return nil
}

// SplitList splits a comma-separated value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RepeatFlag is a repeatable flag taken whole, commas included (a JSON
// policy, a file name).
type RepeatFlag []string

func (r *RepeatFlag) String() string { return strings.Join(*r, " ") }

// Set adds v.
func (r *RepeatFlag) Set(v string) error { *r = append(*r, v); return nil }

// Logger returns a JSON structured logger on stderr.
func Logger(env Env) *slog.Logger {
	return slog.New(slog.NewJSONHandler(env.Stderr, nil))
}
