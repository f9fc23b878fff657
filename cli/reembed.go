package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/store/postgres"
)

func reembedCommand() *cmdline.Command {
	return &cmdline.Command{Name: "reembed", Summary: "move a tenant to another embedding model with no downtime", Run: runReembed, Usage: `Usage: cordon tenant reembed [--database-url URL] [--embed-url URL --embed-model M --embed-dims N ...]
                             [--to MODEL --to-dims N] [--batch N] [--shadow-queries FILE]
                             [--shadow-k K] [--cutover] [--rollback] [--finish] [--status] NAME

Moves tenant NAME to another embedding model (or other dimensions) while it
keeps serving. Readers always see one model: the tenant's current one until
the cut-over, the new one after it.

  --to MODEL --to-dims N   start (or resume) moving to MODEL: from now on every
                           write stores vectors of both models; then backfill
                           the chunks written before, batch by batch (killed
                           or stopped, it resumes where it stopped when run
                           again), and report how far the two models' top-K
                           dense lists agree on shadow queries
  --cutover                after a complete backfill, swap the models in one
                           transaction: the next query ranks with the new one
                           (the old vectors are kept and still written)
  --rollback               after a cut-over, go back to the previous model (the
                           new one stays backfilled, ready to cut over again);
                           before it, abort the re-embedding
  --finish                 after a cut-over, drop the previous model's vectors
  --status                 print the state and the backfill's progress

The embedding server flags (--embed-url, --embed-model, ... as for 'cordon
serve') must serve the tenant's models that are not hash: the target's for
the backfill and the shadow comparison, both for the comparison after a
cut-over. The serving processes must serve both models for as long as the
re-embedding runs (their writes embed with both). Run it as the owner role.
` + databaseHelp + `
Examples:
  cordon tenant reembed --embed-url http://127.0.0.1:8081 --embed-model use-lite --embed-dims 512 \
      --to use-lite --to-dims 512 research
  cordon tenant reembed --embed-url http://127.0.0.1:8081 --embed-model use-lite --embed-dims 512 --cutover research
  cordon tenant reembed --rollback research
  cordon tenant reembed --finish research
`}
}

func runReembed(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	embedding := cmdline.AddEmbedFlags(fs)
	to := fs.String("to", "", "the target model: hash, or a model name the --embed-url server serves")
	toDims := fs.Int("to-dims", 0, "the target model's vector length (default the model's when its name fixes it: "+knownModelDims()+")")
	batch := fs.Int("batch", 256, "chunks embedded and stored per backfill step")
	shadowFile := fs.String("shadow-queries", "", "file of shadow queries, one per line (default: the first words of 50 chunks spread over the tenant)")
	shadowK := fs.Int("shadow-k", 10, "length of the top lists the shadow comparison compares")
	cutover := fs.Bool("cutover", false, "swap to the target model after a complete backfill")
	rollback := fs.Bool("rollback", false, "go back to the previous model (after a cut-over), or abort the re-embedding (before it)")
	finish := fs.Bool("finish", false, "drop the previous model's vectors after a cut-over")
	status := fs.Bool("status", false, "print the re-embedding state and progress")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: reembed takes one tenant NAME, got %d arguments", cmdline.ErrUsage, fs.NArg())
	}
	tenant := fs.Arg(0)
	actions := 0
	for _, b := range []bool{*to != "", *rollback, *finish, *status} {
		if b {
			actions++
		}
	}
	if *cutover && (*rollback || *finish || *status) || actions > 1 || actions == 0 && !*cutover {
		return fmt.Errorf("%w: give one of --to MODEL (optionally with --cutover), --cutover, --rollback, --finish or --status", cmdline.ErrUsage)
	}
	if *to != "" && *toDims == 0 {
		d, ok := modelDims(*to)
		if !ok {
			return fmt.Errorf("%w: --to %s needs --to-dims, the model's vector length (known without it: %s)", cmdline.ErrUsage, *to, knownModelDims())
		}
		*toDims = d
	}
	if *batch < 1 || *shadowK < 1 {
		return fmt.Errorf("%w: --batch and --shadow-k must be >= 1", cmdline.ErrUsage)
	}
	models, err := embedding.Registry()
	if err != nil {
		return err
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{Models: models})
	if err != nil {
		return err
	}
	defer st.Close()
	out := env.Stdout
	switch {
	case *status:
		return printReembedStatus(ctx, env, st, tenant)
	case *rollback:
		if err := st.Rollback(ctx, tenant); err != nil {
			return err
		}
		fmt.Fprintf(out, "tenant %s rolled back\n", tenant)
		return printReembedStatus(ctx, env, st, tenant)
	case *finish:
		if err := st.FinishReembed(ctx, tenant); err != nil {
			return err
		}
		fmt.Fprintf(out, "tenant %s: re-embedding finished, the previous model's vectors are dropped\n", tenant)
		return printReembedStatus(ctx, env, st, tenant)
	}
	if *to != "" {
		if err := st.BeginReembed(ctx, tenant, embed.Spec{Model: *to, Dims: *toDims}); err != nil {
			return err
		}
	}
	rs, err := st.ReembedStatus(ctx, tenant)
	if err != nil {
		return err
	}
	if rs.State != "backfill" {
		return fmt.Errorf("tenant %q is not re-embedding (state %s): start with --to MODEL --to-dims N", tenant, rs.State)
	}
	fmt.Fprintf(out, "tenant %s: re-embedding %s -> %s, %d of %d chunks filled\n", tenant, rs.Current, *rs.Next, rs.Filled, rs.Chunks)
	start, startFilled := time.Now(), rs.Filled
	err = st.Backfill(ctx, tenant, *batch, func(filled, total int64) {
		rate := float64(filled-startFilled) / max(time.Since(start).Seconds(), 1e-9)
		fmt.Fprintf(env.Stderr, "backfill %s: %d/%d chunks (%.0f%%), %.0f chunks/s\n", tenant, filled, total, 100*float64(filled)/float64(max(total, 1)), rate)
	})
	if err != nil {
		return fmt.Errorf("backfill stopped (run the same command again to resume): %w", err)
	}
	el := time.Since(start)
	fmt.Fprintf(out, "backfill complete: %d chunks in %s\n", rs.Chunks-startFilled, el.Round(time.Millisecond))
	queries, err := shadowQueries(ctx, st, tenant, *shadowFile)
	if err != nil {
		return err
	}
	rep, err := st.Shadow(ctx, tenant, queries, *shadowK)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "shadow: %d queries, top-%d overlap of the two models: mean %.3f, min %.3f\n", rep.Queries, rep.K, rep.MeanOverlap, rep.MinOverlap)
	if !*cutover {
		fmt.Fprintf(out, "next: cut over with 'cordon tenant reembed --cutover %s' (same --embed-* flags), or abort with --rollback\n", tenant)
		return nil
	}
	if err := st.Cutover(ctx, tenant); err != nil {
		return err
	}
	fmt.Fprintf(out, "tenant %s cut over to %s; roll back with --rollback, or drop the previous vectors with --finish\n", tenant, *rs.Next)
	return nil
}

func printReembedStatus(ctx context.Context, env Env, st *postgres.Store, tenant string) error {
	rs, err := st.ReembedStatus(ctx, tenant)
	if err != nil {
		return err
	}
	next := "-"
	if rs.Next != nil {
		next = rs.Next.String()
	}
	fmt.Fprintf(env.Stdout, "tenant %s: state %s, model %s, second slot %s, %d of %d chunks filled\n", tenant, rs.State, rs.Current, next, rs.Filled, rs.Chunks)
	return nil
}

// shadowQueries reads the shadow queries file, one query per line, or
// samples the tenant's chunks.
func shadowQueries(ctx context.Context, st *postgres.Store, tenant, path string) ([]string, error) {
	if path == "" {
		return st.SampleQueries(ctx, tenant, 50, 8)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --shadow-queries: %w", cmdline.ErrUsage, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if q := strings.TrimSpace(sc.Text()); q != "" {
			out = append(out, q)
		}
	}
	return out, sc.Err()
}
