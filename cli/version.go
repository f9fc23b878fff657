package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/internal/version"
)

func versionCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "version",
		Summary: "print the version, commit, build date and Go version",
		Usage: `Usage: cordon version [--json]

Prints the build of this binary: the version, commit and build date stamped
at link time ('make build', deploy/Dockerfile), else what the Go toolchain
recorded (module version, VCS revision and time), and the Go version. The
same values are the labels of the cordon_build_info gauge on the metrics
listener.

Example:
  cordon version
  cordon version --json
`,
		Run: runVersion,
	}
}

func runVersion(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: version takes no arguments", cmdline.ErrUsage)
	}
	info := version.Get()
	if *asJSON {
		b, err := json.Marshal(info)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	modified := ""
	if info.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(env.Stdout, "cordon %s\ncommit:     %s%s\nbuilt:      %s\ngo version: %s\n", info.Version, info.Revision, modified, info.BuildDate, info.GoVersion)
	return nil
}
