package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/cordon-rag/cordon/corpus"
	"github.com/cordon-rag/cordon/eval"
	"github.com/cordon-rag/cordon/index"
)

func init() {
	register(&command{
		name:    "eval",
		summary: "measure retrieval quality: recall@k, MRR@10, nDCG@10 for four pipelines",
		usage: `Usage:
  cordon eval --corpus DIR --queries FILE.jsonl [--drop-section NAME] [--bakeoff]
              [--json | --markdown] [--save RUN.json] [--plot FILE.png]
              [--per-query FILE.jsonl]
  cordon eval plot --out FILE.png RUN.json...

Indexes every *.md document under DIR (doc id = path without .md) in an
in-memory store and runs each query of FILE.jsonl, one
{"query": "...", "relevant": ["doc_id", ...]} per line, through four
pipelines: BM25 only, dense only, hybrid RRF (rerank off), and hybrid RRF +
rerank (the default policy). Every pipeline returns at most 10 chunks;
relevance is per document (a document is found at the rank of its first
chunk). It reports recall@1, @5, @10, MRR@10 and nDCG@10, how many documents
each pipeline returned (the rerank floor may return fewer than 10, or none),
and, query by query, how often each hybrid beats each single retriever.

--drop-section NAME holds a section out of every document before indexing
(for man-page known-item queries built from NAME lines, --drop-section NAME
makes the query text absent from the index). --bakeoff also re-indexes the
corpus under nine chunkings (fixed windows ignoring headings, structure-aware
without and with overlap, at 50, 100 and 200 words) and reports each.

Output is a table for people; --markdown prints the tables of
docs/quality.md; --json prints the whole run for scripts, --save also writes
it to a file (both are what 'cordon eval plot' reads). --plot draws a PNG bar chart of this run; 'cordon eval
plot' draws several saved --json runs into one chart. Progress goes to
stderr. Deterministic: the same inputs give the same numbers.

How long it takes: time grows with chunks x queries. On 2 cores: the
committed 58-page subset under 1 s; 402 man pages and 386 queries 10-20 s,
with --bakeoff about 2.5 minutes; 1,608 pages and 1,500 queries about 4
CPU-minutes. docs/quality.md gives the commands that build these corpora.

Examples:
  cordon eval --corpus testdata/eval/corpus --queries testdata/eval/queries.jsonl
  cordon eval --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --bakeoff --save kept.json
  cordon eval --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --drop-section NAME --bakeoff --save heldout.json
  cordon eval plot --out docs/quality.png kept.json heldout.json
`,
		run: runEval,
	})
}

// commaListFlag is a repeatable flag that also splits on commas.
type commaListFlag []string

func (s *commaListFlag) String() string { return fmt.Sprint(*s) }
func (s *commaListFlag) Set(v string) error {
	*s = append(*s, splitList(v)...)
	return nil
}

func runEval(ctx context.Context, env Env, args []string) error {
	c := commands["eval"]
	if len(args) > 0 && args[0] == "plot" {
		return runEvalPlot(env, c, args[1:])
	}
	fs := newFlagSet(c, env)
	dir := fs.String("corpus", "", "corpus directory of .md documents (required)")
	queriesPath := fs.String("queries", "", "query file, JSON Lines (required)")
	var drop commaListFlag
	fs.Var(&drop, "drop-section", "section name to hold out of every document (repeatable, or comma-separated)")
	bakeoff := fs.Bool("bakeoff", false, "also run the chunking bake-off (nine chunkings)")
	asJSON := fs.Bool("json", false, "print the run as JSON")
	asMarkdown := fs.Bool("markdown", false, "print the tables as Markdown")
	plotPath := fs.String("plot", "", "draw this run as a PNG bar chart to FILE")
	savePath := fs.String("save", "", "also write the run as JSON to FILE (for 'cordon eval plot')")
	perQuery := fs.String("per-query", "", "write every query's document rankings and metrics to FILE (JSON Lines)")
	maxWords := fs.Int("max-words", index.DefaultSettings().Chunking.MaxWords, "chunk window size in words for the main run")
	overlap := fs.Int("overlap-words", index.DefaultSettings().Chunking.OverlapWords, "chunk window overlap in words for the main run")
	workers := fs.Int("workers", runtime.NumCPU(), "queries run in parallel (the numbers do not depend on it)")
	every := fs.Int("progress-every", 500, "report progress on stderr every N queries (0 = never)")
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	switch {
	case *dir == "":
		return fmt.Errorf("%w: --corpus DIR is required", errUsage)
	case *queriesPath == "":
		return fmt.Errorf("%w: --queries FILE.jsonl is required", errUsage)
	case fs.NArg() != 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case *asJSON && *asMarkdown:
		return fmt.Errorf("%w: --json and --markdown exclude each other", errUsage)
	}

	docs, err := corpus.Load(*dir)
	if err != nil {
		return err
	}
	qdata, err := os.ReadFile(*queriesPath)
	if err != nil {
		return fmt.Errorf("read queries: %w", err)
	}
	queries, err := eval.ReadQueries(bytes.NewReader(qdata))
	if err != nil {
		return fmt.Errorf("%s: %w", *queriesPath, err)
	}
	qsum := sha256.Sum256(qdata)
	meta := eval.Meta{
		Corpus:      *dir,
		Fingerprint: corpus.Fingerprint(docs),
		Queries:     *queriesPath,
		QueriesSHA:  hex.EncodeToString(qsum[:]),
	}
	edocs := make([]eval.Document, len(docs))
	for i, d := range docs {
		edocs[i] = eval.Document{ID: d.ID, Text: d.Text}
	}

	opts := eval.DefaultOptions()
	opts.Settings.Chunking.MaxWords = *maxWords
	opts.Settings.Chunking.OverlapWords = *overlap
	if err := opts.Settings.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	opts.DropSections = drop
	opts.Workers = *workers
	opts.PerQuery = *perQuery != ""
	label := "main run"
	start := time.Now()
	opts.Progress = func(done, total int) {
		if *every > 0 && (done%*every == 0 || done == total) {
			el := time.Since(start)
			rate := float64(done) / el.Seconds()
			fmt.Fprintf(env.Stderr, "eval: %s: %d/%d queries, %.0f queries/s, ETA %s\n", label, done, total, rate,
				time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	fmt.Fprintf(env.Stderr, "eval: %d documents, %d queries, %d workers\n", len(docs), len(queries), *workers)
	run := eval.Evaluation{Meta: meta}
	run.Report, err = eval.Run(ctx, edocs, queries, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "eval: main run took %s\n", time.Since(start).Round(100*time.Millisecond))
	if *bakeoff {
		variants := eval.DefaultVariants()
		bstart := time.Now()
		run.BakeOff, err = eval.BakeOff(ctx, edocs, queries, variants, opts, func(i int, v eval.Variant) {
			label = fmt.Sprintf("bake-off %d/%d (%s)", i+1, len(variants), v.Name)
			start = time.Now()
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "eval: bake-off took %s\n", time.Since(bstart).Round(100*time.Millisecond))
	}

	if *perQuery != "" {
		if err := writePerQuery(*perQuery, run.Report.PerQuery); err != nil {
			return err
		}
		run.Report.PerQuery = nil
	}
	if *plotPath != "" {
		if err := writePlot(*plotPath, []eval.Evaluation{run}); err != nil {
			return err
		}
	}
	if *savePath != "" {
		var b bytes.Buffer
		if err := encodeRun(&b, run); err != nil {
			return err
		}
		if err := os.WriteFile(*savePath, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("save run: %w", err)
		}
	}
	switch {
	case *asJSON:
		return encodeRun(env.Stdout, run)
	case *asMarkdown:
		return eval.WriteMarkdown(env.Stdout, meta, run.Report, run.BakeOff)
	}
	return eval.WriteText(env.Stdout, meta, run.Report, run.BakeOff)
}

func encodeRun(w io.Writer, run eval.Evaluation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(run); err != nil {
		return fmt.Errorf("encode run: %w", err)
	}
	return nil
}

func writePerQuery(path string, per []eval.QueryResult) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, q := range per {
		if err := enc.Encode(q); err != nil {
			return fmt.Errorf("encode per-query results: %w", err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write per-query results: %w", err)
	}
	return nil
}

func writePlot(path string, runs []eval.Evaluation) error {
	var b bytes.Buffer
	if err := eval.WritePNG(&b, runs); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

func runEvalPlot(env Env, c *command, args []string) error {
	fs := newFlagSet(c, env)
	out := fs.String("out", "", "PNG file to write (required)")
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out FILE.png is required", errUsage)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: want one or more RUN.json files written by 'cordon eval --json'", errUsage)
	}
	var runs []eval.Evaluation
	for _, p := range fs.Args() {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		var r eval.Evaluation
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: not a 'cordon eval --json' run: %w", p, err)
		}
		if len(r.Report.Results) == 0 {
			return fmt.Errorf("%s: not a 'cordon eval --json' run: no results", p)
		}
		runs = append(runs, r)
	}
	if err := writePlot(*out, runs); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "eval: wrote %s (%d runs)\n", *out, len(runs))
	return nil
}
