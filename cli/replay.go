package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/store/memory"
)

// replayOptions are the Postgres-only replay flags.
type replayOptions struct {
	reset      []string // tenants to drop before the replay
	cacheBytes int64
}

func replayCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "replay",
		Summary: "run a replay script against a store and print JSON Lines",
		Usage: `Usage: cordon replay [--store memory|postgres] [--database-url URL] [--reset --yes] SCRIPT.json

Runs a replay script (SPEC section 9) and writes one JSON object per step to
stdout. A step with bad input prints {"op": ..., "error": "..."} and the replay
goes on; the exit status is non-zero only when the script cannot be read or
parsed or the store cannot be opened. SCRIPT.json may be "-" for stdin.

Examples:
  cordon replay testdata/replay/basic.json
  cordon replay --store postgres --database-url "$CORDON_DATABASE_URL" script.json
  cordon replay --store postgres --reset --yes --cache-bytes 0 script.json

Against Postgres, the replay applies the migrations and creates each tenant it
meets with the script's config. Tenants that already exist keep their
documents (and must have the same settings); --reset drops the script's
tenants first, with all their documents, so that the output is comparable
with --store memory: it needs --yes. As with 'cordon serve', queries are
ranked from an in-memory index within --cache-bytes (default auto), each
tenant loaded in the background while SQL answers; --cache-bytes 0 ranks
every query in SQL. The output is the same either way.
` + databaseHelp,
		Run: runReplay,
	}
}

func runReplay(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	storeName := fs.String("store", "memory", "store to run against: memory or postgres")
	dbURL := cmdline.DatabaseFlag(fs)
	reset := fs.Bool("reset", false, "postgres: first drop every tenant the script names (deletes their documents; needs --yes) so the replay starts empty")
	yes := fs.Bool("yes", false, "confirm --reset: the script's tenants and their documents are deleted for good")
	cacheBytes := fs.String("cache-bytes", cmdline.CacheAuto, "postgres: memory budget of the in-memory query path in bytes, as for serve (auto: a quarter of the memory this process may use; 0: SQL path)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one SCRIPT.json argument, got %d", cmdline.ErrUsage, fs.NArg())
	}
	if *storeName != "memory" && *storeName != "postgres" {
		return fmt.Errorf("%w: unknown --store %q (want memory or postgres)", cmdline.ErrUsage, *storeName)
	}
	if *reset && *storeName != "postgres" {
		return fmt.Errorf("%w: --reset applies to --store postgres only", cmdline.ErrUsage)
	}
	if *reset && !*yes {
		return fmt.Errorf("%w: --reset drops every tenant the script names, with all their documents; add --yes to confirm", cmdline.ErrUsage)
	}
	data, err := readInput(env, fs.Arg(0))
	if err != nil {
		return err
	}
	if *storeName == "memory" {
		open := func(_ context.Context, s index.Settings) (replay.Store, error) { return memory.New(s) }
		return replay.Run(ctx, data, open, env.Stdout)
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	budget, _, err := cmdline.CacheBudget("--cache-bytes", *cacheBytes, 1)
	if err != nil {
		return err
	}
	o := replayOptions{cacheBytes: budget}
	if *reset {
		o.reset = replay.Tenants(data)
	}
	open, closeFn, err := openPostgresReplay(ctx, url, o)
	if err != nil {
		return err
	}
	defer closeFn()
	return replay.Run(ctx, data, open, env.Stdout)
}

func readInput(env Env, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(env.Stdin)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return data, nil
}
