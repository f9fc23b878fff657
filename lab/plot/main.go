package plot

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cordon-rag/cordon/lab/bench"
	"github.com/cordon-rag/cordon/lab/eval"
)

const usage = `cordon-plot draws the charts of docs/quality.md and docs/benchmarks.md from
saved runs. It is a binary of its own so that the plotting library and its
fonts stay out of the 'cordon' binary that serves.

Usage:
  cordon-plot eval  --out FILE.png RUN.json...      runs written by 'cordon-lab eval --json' or --save
  cordon-plot bench --out FILE.png REPORT.json...   reports written by 'cordon-lab bench --json'
  cordon-plot service --out FILE.png REPORT.json... reports of 'cordon-lab bench --systems cordon,http --json'

eval draws one panel per run: each pipeline's R@1, R@5, R@10, MRR@10 and
nDCG@10, and the bake-off's recall@10 per chunking when the run has one.
bench draws p50 latency against corpus size (both log scale), one line per
system and tenant count: the one-client p50 where a report has one
(cordon-lab bench --serial), else the p50 with the report's clients.
service draws queries per second against clients for the store path and
the service path, one line style per tenant count, a point per report and
the line through the medians.

Examples:
  go run ./cmd/cordon-plot eval --out docs/quality.png kept.json heldout.json
  go run ./cmd/cordon-plot bench --out docs/benchmarks.png 10k.json 100k.json
  go run ./cmd/cordon-plot service --out docs/service.png docs/bench-reports/service/*.json
`

// Exit codes of [Main].
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Main runs cordon-plot with args (without the program name) and returns
// its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "cordon-plot: %v\n\n%s", err, usage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "cordon-plot: %v\n", err)
		return exitError
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want eval, bench or service", errUsage)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return flag.ErrHelp
	}
	kind := args[0]
	if kind != "eval" && kind != "bench" && kind != "service" {
		return fmt.Errorf("%w: unknown chart %q (want eval, bench or service)", errUsage, kind)
	}
	fs := flag.NewFlagSet("cordon-plot "+kind, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "PNG file to write (required)")
	var files []string
	rest := args[1:]
	for len(rest) > 0 { // flags before or after the files
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		rest = fs.Args()
		if len(rest) > 0 {
			files = append(files, rest[0])
			rest = rest[1:]
		}
	}
	if *out == "" {
		return fmt.Errorf("%w: --out FILE.png is required", errUsage)
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: want one or more input files", errUsage)
	}
	if kind == "bench" || kind == "service" {
		var reps []*bench.Report
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var r bench.Report
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("%s: not a 'cordon-lab bench --json' report: %w", p, err)
			}
			reps = append(reps, &r)
		}
		draw := Bench
		if kind == "service" {
			draw = Service
		}
		if err := draw(reps, *out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
		return nil
	}
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
	if err := Eval(&b, runs); err != nil {
		return err
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	fmt.Fprintf(stderr, "cordon-plot: wrote %s (%d runs)\n", *out, len(runs))
	return nil
}
