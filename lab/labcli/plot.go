package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/lab/bench"
	"github.com/cordon-rag/cordon/lab/eval"
	"github.com/cordon-rag/cordon/lab/plot"
)

func plotCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "plot",
		Summary: "draw the charts of docs/quality.md and docs/benchmarks.md from saved runs",
		Usage: `Usage:
  cordon-lab plot eval    --out FILE.png RUN.json...     runs written by 'cordon-lab eval --json' or --save
  cordon-lab plot bench   --out FILE.png REPORT.json...  reports written by 'cordon-lab bench --json'
  cordon-lab plot service --out FILE.png REPORT.json...  reports of 'cordon-lab bench --systems cordon,http --json'

eval draws one panel per run: each pipeline's R@1, R@5, R@10, MRR@10 and
nDCG@10, and the bake-off's recall@10 per chunking when the run has one.
bench draws p50 latency against corpus size (both log scale), one line per
system and tenant count: the one-client p50 where a report has one
(cordon-lab bench --serial), else the p50 with the report's clients.
service draws queries per second against clients for the store path and
the service path, one line style per tenant count, a point per report and
the line through the medians. The plotting library is linked here only,
never into the 'cordon' binary that serves.

Examples:
  go run ./cmd/cordon-lab plot eval --out docs/quality.png kept.json heldout.json
  go run ./cmd/cordon-lab plot bench --out docs/benchmarks.png 10k.json 100k.json
  go run ./cmd/cordon-lab plot service --out docs/service.png docs/bench-reports/service/*.json
`,
		Subs: []*cmdline.Command{
			{Name: "eval", Summary: "retrieval quality of saved eval runs", Run: runPlot, Usage: "Usage: cordon-lab plot eval --out FILE.png RUN.json...\n\n'cordon-lab plot --help' says more.\n"},
			{Name: "bench", Summary: "p50 latency against corpus size of bench reports", Run: runPlot, Usage: "Usage: cordon-lab plot bench --out FILE.png REPORT.json...\n\n'cordon-lab plot --help' says more.\n"},
			{Name: "service", Summary: "throughput against clients of the store and service paths", Run: runPlot, Usage: "Usage: cordon-lab plot service --out FILE.png REPORT.json...\n\n'cordon-lab plot --help' says more.\n"},
		},
	}
}

// runPlot draws the chart its command names from the files it is given.
func runPlot(_ context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	out := fs.String("out", "", "PNG file to write (required)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	switch {
	case *out == "":
		return fmt.Errorf("%w: --out FILE.png is required", cmdline.ErrUsage)
	case fs.NArg() == 0:
		return fmt.Errorf("%w: want one or more input files", cmdline.ErrUsage)
	}
	if c.Name == "eval" {
		return plotEval(env, *out, fs.Args())
	}
	reps, err := readBenchReports(fs.Args())
	if err != nil {
		return err
	}
	draw := plot.Bench
	if c.Name == "service" {
		draw = plot.Service
	}
	if err := draw(reps, *out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", *out)
	return nil
}

// readBenchReports reads 'cordon-lab bench --json' reports.
func readBenchReports(files []string) ([]*bench.Report, error) {
	var reps []*bench.Report
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r bench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: not a 'cordon-lab bench --json' report: %w", p, err)
		}
		reps = append(reps, &r)
	}
	return reps, nil
}

// plotEval draws saved eval runs into out.
func plotEval(env Env, out string, files []string) error {
	var runs []eval.Evaluation
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		var r eval.Evaluation
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: not a 'cordon-lab eval --json' run: %w", p, err)
		}
		if len(r.Report.Results) == 0 {
			return fmt.Errorf("%s: not a 'cordon-lab eval --json' run: no results", p)
		}
		runs = append(runs, r)
	}
	var b bytes.Buffer
	if err := plot.Eval(&b, runs); err != nil {
		return err
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	fmt.Fprintf(env.Stderr, "plot: wrote %s (%d runs)\n", out, len(runs))
	return nil
}
