package labcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/cordon-rag/cordon/internal/cmdline"
)

// Env is the process environment a command runs in.
type Env = cmdline.Env

// Exit codes, as cordon's.
const (
	ExitOK    = cmdline.ExitOK
	ExitError = cmdline.ExitError
	ExitUsage = cmdline.ExitUsage
)

// commandTable is every command, in the order 'cordon-lab --help' lists
// them. It is the one place a command is registered.
func commandTable() []*cmdline.Command {
	return []*cmdline.Command{
		evalCommand(),
		corpusCommand(),
		benchCommand(),
		plotCommand(),
	}
}

// Main runs the cordon-lab command line with args (without the program
// name) and returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	return cmdline.Main(ctx, env, cmdline.Program{Name: "cordon-lab", Commands: commandTable(), Usage: topUsage}, args)
}

func topUsage(cmds []*cmdline.Command) string {
	var b strings.Builder
	b.WriteString(`cordon-lab: measure Cordon (retrieval quality, evaluation corpora, speed
against SQL baselines) and draw the charts. The service itself is 'cordon'.

Usage:
  cordon-lab <command> [subcommand] [flags] [args]

Flags may come before or after arguments; '--' ends the flags.

Commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-10s %s\n", c.Name, c.Summary)
	}
	b.WriteString(`
Run 'cordon-lab <command> --help' (or 'cordon-lab <command> <subcommand>
--help') for a command's flags and an example.
`)
	return b.String()
}
