package labcli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/lab/corpus"
	"github.com/cordon-rag/cordon/lab/eval"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/retrieval"
)

func evalCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "eval",
		Summary: "measure retrieval quality: recall@k, MRR@10, nDCG@10 per pipeline; score TREC runs",
		Usage: `Usage:
  cordon-lab eval --corpus DIR --queries FILE.jsonl [--kind K,...] [--split dev|test]
              [--depth N] [--policy JSON|@FILE] [--profile NAME=JSON|@FILE]... [--k1 X] [--b X]
              [--bm25-statistics entitled|tenant] [--drop-section NAME] [--bakeoff]
              [--bootstrap N] [--baseline PIPELINE] [--json | --markdown]
              [--save RUN.json] [--per-query FILE.jsonl] [--trec DIR]
              [--reranker-url URL [--reranker-api tei|cohere] [--reranker-model M] ...]
              [--rerank-budget DURATION]
  cordon-lab eval --beir DIR --split SPLIT [--title line|heading|field|none] [--text prose|markdown] [--depth N] [...]
  cordon-lab eval score --queries FILE.jsonl --run FILE [--run FILE]... [--kind K,...]
              [--split dev|test] [--bootstrap N] [--markdown | --json]
  cordon-lab eval score --beir DIR --split SPLIT --run FILE [--run FILE]... [...]
  cordon-lab eval export --corpus DIR --queries FILE.jsonl --chunks FILE.jsonl [--kind K,...]
              [--split dev|test] [--drop-section NAME] [--max-words N] [--overlap-words N]
  cordon-lab eval export --beir DIR --split SPLIT [--title line|heading|field|none] [--text prose|markdown] --chunks FILE.jsonl [...]

Indexes every *.md document under DIR (doc id = path without .md) in an
in-memory store and runs each query of FILE.jsonl through every pipeline.
A query line is {"query": "...", "relevant": ["doc_id", ...]}, optionally
with "id", "kind", "split" (what --kind and --split select on) and
"remove" (a passage cut out of each relevant document before indexing: a
held-out query); any other field is provenance, passed through to
--per-query. 'cordon-lab corpus queries' writes such files. A line may
also grade its documents, "grades": {"doc_id": 2, ...} (a relevant
document without a grade has grade 1), for nDCG.

--beir DIR reads a BEIR-format dataset instead of --corpus and --queries:
DIR/corpus.jsonl ({"_id", "title", "text"} per line: one document each,
doc id = _id), the claims or questions of --split (required) from
queries-SPLIT.jsonl, else BEIR's queries.jsonl ({"_id", "text"}), and their
judgments from qrels-SPLIT.tsv, else BEIR's qrels/SPLIT.tsv ("query-id TAB
corpus-id TAB score"; the score is the document's grade, 0 is not
relevant). Queries without a positive judgment are left out, as BEIR
leaves them. --title says where a document's title goes: "line" (default)
makes it the first line of the text, searchable like the rest; "heading"
a Markdown heading, which Cordon indexes as the section's name; "field" the
document's title; "none" leaves it out. A heading's and a title's words are
searched as field terms only, under the policy's field_weight. A line of the text the chunker would read as
a heading or a fence is indented by a space: BEIR's text is prose. --text
markdown keeps the text's Markdown instead, its headings sections as
'cordon ingest' makes them (for 'cordon-lab corpus pgdocs' datasets).

Pipelines, each returning at most 10 chunks:
  bm25               the store's BM25 ranking alone (SPEC's: each distinct query
                     term once; the service profile's top_n)
  dense              the store's cosine ranking alone
  hybrid_rrf         the service profile with rerank off
  hybrid_rrf_rerank  the service profile (the HTTP service's defaults)
  seed               SPEC's seed profile
  NAME               each --profile NAME=JSON, a policy over the service profile

--depth N (default 10; 100 with --beir) makes each pipeline's
document-level ranking, and its --trec run, N documents deep; from 100
the tables add doc nDCG@10 and doc R@100, and the intervals those and doc
MRR@10. Past
what the pipeline's own ranking holds (top_n chunks per side, rerank_depth
after the rerank), the same pipeline with top_n and rerank_depth raised to
2N continues it, so its first documents, and every @10 metric, stay its own.

--policy sets the service profile itself (a SPEC section 9 policy object
over the service's defaults, or @FILE holding one); limit must stay 10.
--k1, --b and --bm25-statistics set the index's BM25 parameters.

Metrics: recall@1, @5, @10, MRR@10 and nDCG@10 (graded: gain = grade,
log2 discount, as trec_eval) over the documents of the first 10 chunks (chunk level: a document is found at the rank of its first
chunk), and doc R@10 and doc MRR@10 over the first 10 distinct documents of
the pipeline's whole ranking (document level: its limit lifted; the
ranking still ends at top_n per side, or rerank_depth after the rerank).
--bootstrap N (default 1000, 0 = none) adds paired bootstrap 95% confidence
intervals of the difference in R@10, MRR@10 and doc R@10 between each
pipeline and --baseline (default bm25), resampling queries with a fixed
seed: the same inputs give the same intervals. With queries of several
kinds, each kind gets its own table.

A pipeline whose policy has "rerank": "model" scores with a model reranker,
which the --reranker-* flags configure as for 'cordon serve' (without
one such a policy is refused). Its calls are bounded by rerank_budget_ms
(--rerank-budget sets it for every pipeline; default 300ms); a query whose
call is shed gets the fused order, and the report counts those queries
per pipeline (a measurement with sheds mixes two rankers: give the model
time, e.g. --rerank-budget 10s, and fewer --workers).

--drop-section NAME holds a section out of every document before indexing.
--bakeoff also re-indexes the corpus under nine chunkings and reports each.
--per-query FILE writes one JSON line per query: its id, line, kind, split,
extra fields, relevant documents, and per pipeline the documents, the first
10 chunks (chunk id, doc id, bm25 score and rank, cosine score and rank,
fused, rerank) and the metrics. --trec DIR writes DIR/PIPELINE.run, each
pipeline's document-level ranking as a TREC run for 'cordon-lab eval score'.

Output is a table for people; --markdown prints the tables of
docs/quality.md; --json prints the whole run for scripts, --save also
writes it to a file (both are what 'cordon-lab plot eval' draws). Progress
goes to stderr. Deterministic: the same inputs give the same numbers.

score reads TREC runs ("qid Q0 docid rank score tag" per line; documents
ordered by score, highest first, as trec_eval does) and reports the same
document-level metrics over the first 10 distinct documents; qid is the
query's "id" field, or its 1-based line number in the query file when it
has none (a BEIR query's _id). A query with no line in a run scores 0
(counted as missing). A run listing more than 10 documents for some query
is deep: it also gets R@100. With several --run, each run after the
first gets paired bootstrap intervals against the first (nDCG@10 and R@100
too when every run is deep). --per-query FILE writes one JSON line per
query: its id, text, relevant documents and grades, and its metrics in
each run (by run name).

export writes the chunks 'cordon-lab eval' indexes with the same inputs (held-
out passages and sections removed, same chunking), one {"chunk_id",
"doc_id", "text"} line each, so another system can index exactly the same
text (lab/eval/peers/).

How long it takes: time grows with chunks x queries. On 2 cores: the
committed 58-page subset under 1 s; 402 man pages and 400 queries 10-20 s,
with --bakeoff about 2.5 minutes; SciFact's train split (5,183 abstracts,
809 claims, --depth 100) about 2.5 CPU-minutes. docs/quality.md gives the
commands.

Examples:
  cordon-lab eval --corpus testdata/eval/corpus --queries testdata/eval/queries.jsonl --kind name
  cordon-lab eval --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --split dev \
      --profile 'k10={"rrf_k":10,"rerank":"idf_overlap","rerank_blend":0.5}' --trec /tmp/runs
  cordon-lab eval --corpus testdata/eval/corpus --queries testdata/eval/queries.jsonl --reranker-url http://127.0.0.1:8081 \
      --rerank-budget 10s --workers 2 --profile 'model={"rerank":"model","rerank_blend":0}'
  cordon-lab eval export --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --kind heldout --chunks /tmp/chunks.jsonl
  cordon-lab eval score --queries testdata/eval/man-every4-queries.jsonl --run /tmp/runs/bm25.run --run /tmp/fts5-or.run
  cordon-lab eval --beir /work/shared/eval/scifact --split train --markdown --trec /tmp/scifact-runs
  cordon-lab eval score --beir /work/shared/eval/scifact --split train --run /tmp/scifact-runs/hybrid_rrf_rerank.run --run /tmp/fts5-porter.run
  go run ./cmd/cordon-lab plot eval --out docs/quality.png kept.json heldout.json
`,
		Run: runEval,
		Subs: []*cmdline.Command{
			{Name: "score", Summary: "score TREC runs against a query file", Run: runEvalScore, Usage: `Usage: cordon-lab eval score --queries FILE.jsonl --run FILE [--run FILE]... [--kind K,...]
              [--split dev|test] [--bootstrap N] [--markdown | --json]
       cordon-lab eval score --beir DIR --split SPLIT --run FILE [--run FILE]... [--per-query FILE] [...]

Scores TREC runs ("qid Q0 docid rank score tag" per line) with the
document-level metrics of 'cordon-lab eval'; each run after the first gets
paired bootstrap intervals against the first. 'cordon-lab eval --help' says more.

Example:
  cordon-lab eval score --queries testdata/eval/man-every4-queries.jsonl --run /tmp/runs/bm25.run --run /tmp/fts5-or.run
`},
			{Name: "export", Summary: "write the chunks eval indexes, for another system", Run: runEvalExport, Usage: `Usage: cordon-lab eval export --corpus DIR --queries FILE.jsonl --chunks FILE.jsonl [--kind K,...]
              [--split dev|test] [--drop-section NAME] [--max-words N] [--overlap-words N]
       cordon-lab eval export --beir DIR --split SPLIT [--title line|heading|field|none] [--text prose|markdown] --chunks FILE.jsonl [...]

Writes the chunks 'cordon-lab eval' indexes with the same inputs, one
{"chunk_id", "doc_id", "text"} line each. 'cordon-lab eval --help' says more.

Example:
  cordon-lab eval export --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --kind heldout --chunks /tmp/chunks.jsonl
`},
		},
	}
}

// policyArg reads a --policy or --profile value: JSON, or @FILE holding it.
func policyArg(v string) ([]byte, error) {
	if f, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read policy: %w", err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// evalPolicies applies --policy and --profile to opts: each a SPEC section 9
// policy over the service profile (limit 10), decoded by replay.ParsePolicy.
func evalPolicies(opts *eval.Options, policy string, profiles []string) error {
	if policy != "" {
		raw, err := policyArg(policy)
		if err != nil {
			return err
		}
		if opts.Policy, err = replay.ParsePolicyFor(raw, opts.Policy, opts.Validate); err != nil {
			return fmt.Errorf("%w: --policy: %w", cmdline.ErrUsage, err)
		}
	}
	for _, p := range profiles {
		name, val, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return fmt.Errorf("%w: --profile %q: want NAME=JSON or NAME=@FILE", cmdline.ErrUsage, p)
		}
		raw, err := policyArg(val)
		if err != nil {
			return err
		}
		pol, err := replay.ParsePolicyFor(raw, opts.Policy, opts.Validate)
		if err != nil {
			return fmt.Errorf("%w: --profile %s: %w", cmdline.ErrUsage, name, err)
		}
		opts.Profiles = append(opts.Profiles, eval.Profile{Name: eval.Pipeline(name), Policy: pol})
	}
	return nil
}

// readQueryFile reads and selects a query file's queries.
func readQueryFile(path string, kinds []string, split string) ([]eval.Query, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read queries: %w", err)
	}
	all, err := eval.ReadQueries(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	qs := eval.Select(all, kinds, split)
	if len(qs) == 0 {
		return nil, nil, fmt.Errorf("%s: %w: none of kind %v and split %q", path, eval.ErrNoQueries, kinds, split)
	}
	return qs, data, nil
}

func loadDocs(dir string) ([]corpus.Doc, []eval.Document, error) {
	docs, err := corpus.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	edocs := make([]eval.Document, len(docs))
	for i, d := range docs {
		edocs[i] = eval.Document{ID: d.ID, Text: d.Text}
	}
	return docs, edocs, nil
}

// evalInput is where an eval command's documents and queries come from: a
// corpus directory and a query file, or a BEIR dataset.
type evalInput struct {
	corpus, queries *string
	kinds           cmdline.ListFlag
	split           *string
	beir, title     *string
	text            *string
}

// addInputFlags defines the input flags on fs; withCorpus adds --corpus and
// --title (eval score reads no corpus but a BEIR dataset's).
func addInputFlags(fs *flag.FlagSet, withCorpus bool) *evalInput {
	in := &evalInput{}
	if withCorpus {
		in.corpus = fs.String("corpus", "", "corpus directory of .md documents (required, or --beir)")
	}
	in.queries = fs.String("queries", "", "query file, JSON Lines (required, or --beir)")
	fs.Var(&in.kinds, "kind", "only queries of this kind (repeatable, or comma-separated)")
	in.split = fs.String("split", "", "only queries of this split (dev or test); with --beir, the split to read (required)")
	in.beir = fs.String("beir", "", "BEIR dataset directory (corpus.jsonl, queries, qrels) instead of --corpus and --queries")
	title, text := string(eval.TitleLine), "prose"
	in.title, in.text = &title, &text
	if withCorpus {
		in.text = fs.String("text", "prose", "with --beir, what a document's text is: prose (a line that looks like a Markdown heading or fence is plain text) or markdown (headings are sections, as 'cordon-lab corpus pgdocs' writes them)")
		in.title = fs.String("title", string(eval.TitleLine), "with --beir, where a document's title goes: line (first line of the text), heading (a section heading), field (the document's title) or none; heading and field are searched as field terms (the policy's field_weight)")
	}
	return in
}

// check returns the usage error of an input flag set, nil when it is whole.
func (in *evalInput) check() error {
	switch {
	case *in.beir != "" && (in.corpus != nil && *in.corpus != "" || *in.queries != ""):
		return fmt.Errorf("%w: --beir DIR excludes --corpus and --queries", cmdline.ErrUsage)
	case *in.beir != "" && len(in.kinds) > 0:
		return fmt.Errorf("%w: --beir DIR has no query kinds: --kind does not apply", cmdline.ErrUsage)
	case *in.beir != "" && *in.split == "":
		return fmt.Errorf("%w: --beir DIR needs --split SPLIT (train, dev or test: the split's queries and judgments)", cmdline.ErrUsage)
	case *in.beir != "" && !slices.Contains(eval.TitleModes, eval.TitleMode(*in.title)):
		return fmt.Errorf("%w: --title %q: want line, heading, field or none", cmdline.ErrUsage, *in.title)
	case *in.text != "prose" && *in.text != "markdown":
		return fmt.Errorf("%w: --text %q: want prose or markdown", cmdline.ErrUsage, *in.text)
	case *in.beir == "" && *in.text != "prose":
		return fmt.Errorf("%w: --text applies to --beir only (a --corpus is Markdown)", cmdline.ErrUsage)
	case *in.beir == "" && in.corpus != nil && *in.corpus == "":
		return fmt.Errorf("%w: --corpus DIR is required (or --beir DIR)", cmdline.ErrUsage)
	case *in.beir == "" && *in.queries == "":
		return fmt.Errorf("%w: --queries FILE.jsonl is required (or --beir DIR)", cmdline.ErrUsage)
	}
	return nil
}

// load reads the documents (nil when the flag set has no --corpus and the
// input is a query file) and the selected queries, and describes them.
func (in *evalInput) load() ([]eval.Document, []eval.Query, eval.Meta, error) {
	if *in.beir != "" {
		b, err := eval.ReadBEIR(*in.beir, *in.split, eval.TitleMode(*in.title), *in.text == "markdown")
		if err != nil {
			return nil, nil, eval.Meta{}, err
		}
		meta := eval.Meta{Corpus: b.CorpusPath, Fingerprint: docsFingerprint(b.Docs), Queries: b.QueriesPath,
			Split: *in.split, Qrels: b.QrelsPath, Title: *in.title, Unjudged: b.Unjudged}
		if *in.text == "markdown" {
			meta.Text = "markdown"
		}
		if meta.QueriesSHA, err = fileSHA(b.QueriesPath); err != nil {
			return nil, nil, meta, err
		}
		if meta.QrelsSHA, err = fileSHA(b.QrelsPath); err != nil {
			return nil, nil, meta, err
		}
		return b.Docs, b.Queries, meta, nil
	}
	var meta eval.Meta
	var edocs []eval.Document
	if in.corpus != nil {
		docs, ed, err := loadDocs(*in.corpus)
		if err != nil {
			return nil, nil, meta, err
		}
		meta.Corpus, meta.Fingerprint, edocs = *in.corpus, corpus.Fingerprint(docs), ed
	}
	queries, qdata, err := readQueryFile(*in.queries, in.kinds, *in.split)
	if err != nil {
		return nil, nil, meta, err
	}
	qsum := sha256.Sum256(qdata)
	meta.Queries, meta.QueriesSHA, meta.Kinds, meta.Split = *in.queries, hex.EncodeToString(qsum[:]), in.kinds, *in.split
	return edocs, queries, meta, nil
}

// docsFingerprint is corpus.Fingerprint of documents read from elsewhere
// than a corpus directory (in id order, as Load gives them).
func docsFingerprint(edocs []eval.Document) string {
	docs := make([]corpus.Doc, len(edocs))
	for i, d := range edocs {
		docs[i] = corpus.Doc{ID: d.ID, Text: d.Text}
	}
	slices.SortFunc(docs, func(a, b corpus.Doc) int { return strings.Compare(a.ID, b.ID) })
	return corpus.Fingerprint(docs)
}

// fileSHA is the hex SHA-256 of a file's bytes.
func fileSHA(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func runEval(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	in := addInputFlags(fs, true)
	depth := fs.Int("depth", 0, "documents in each pipeline's document ranking and TREC run (default 10; 100 with --beir)")
	var drop cmdline.ListFlag
	fs.Var(&drop, "drop-section", "section name to hold out of every document (repeatable, or comma-separated)")
	policy := fs.String("policy", "", "the service profile: a SPEC 9 policy JSON object over the service defaults, or @FILE")
	var profiles cmdline.RepeatFlag
	fs.Var(&profiles, "profile", "NAME=JSON or NAME=@FILE: an extra pipeline, a policy over the service profile (repeatable)")
	k1 := fs.Float64("k1", index.DefaultSettings().BM25.K1, "BM25 k1")
	bParam := fs.Float64("b", index.DefaultSettings().BM25.B, "BM25 b")
	stats := fs.String("bm25-statistics", string(index.DefaultSettings().Statistics), "BM25 statistics scope: entitled or tenant")
	boot := fs.Int("bootstrap", eval.DefaultBootstrap, "paired bootstrap resamples for the confidence intervals (0 = none)")
	baseline := fs.String("baseline", string(eval.BM25Only), "pipeline the intervals compare every other one with")
	bakeoff := fs.Bool("bakeoff", false, "also run the chunking bake-off (nine chunkings)")
	asJSON := fs.Bool("json", false, "print the run as JSON")
	asMarkdown := fs.Bool("markdown", false, "print the tables as Markdown")
	savePath := fs.String("save", "", "also write the run as JSON to FILE (for cordon-lab plot eval)")
	perQuery := fs.String("per-query", "", "write every query's rankings, chunks and metrics to FILE (JSON Lines)")
	trecDir := fs.String("trec", "", "write each pipeline's document ranking as DIR/PIPELINE.run (TREC run format)")
	maxWords := fs.Int("max-words", index.DefaultSettings().Chunking.MaxWords, "chunk window size in words for the main run")
	overlap := fs.Int("overlap-words", index.DefaultSettings().Chunking.OverlapWords, "chunk window overlap in words for the main run")
	workers := fs.Int("workers", runtime.NumCPU(), "queries run in parallel (the numbers do not depend on it)")
	every := fs.Int("progress-every", 500, "report progress on stderr every N queries (0 = never)")
	model := fs.String("model", embed.Hash, "embedding model of the dense side: hash, or the --embed-model an --embed-url server serves")
	dims := fs.Int("dims", index.DefaultSettings().Dims, "dense vector dimensions (hash), or the model's vector length")
	embedCache := fs.String("embed-cache", "", "directory caching the model's vectors across runs (MODEL-DIMS.vec)")
	embedding := cmdline.AddEmbedFlags(fs)
	var errs []error
	reranker := cmdline.AddRerankerFlags(fs, env, &errs)
	rerankBudget := fs.String("rerank-budget", "", "model reranker latency budget of every pipeline that sets no rerank_budget_ms (default 300ms)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	if err := in.check(); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	case *asJSON && *asMarkdown:
		return fmt.Errorf("%w: --json and --markdown exclude each other", cmdline.ErrUsage)
	case *boot < 0:
		return fmt.Errorf("%w: --bootstrap %d must be >= 0", cmdline.ErrUsage, *boot)
	case *depth != 0 && (*depth < eval.K || *depth > eval.MaxDepth):
		return fmt.Errorf("%w: --depth %d: want %d to %d", cmdline.ErrUsage, *depth, eval.K, eval.MaxDepth)
	}
	if *depth == 0 && *in.beir != "" {
		*depth = eval.DeepK // BEIR reports R@100
	}

	opts := eval.DefaultOptions()
	opts.Settings.Chunking.MaxWords = *maxWords
	opts.Settings.Chunking.OverlapWords = *overlap
	opts.Settings.BM25.K1 = *k1
	opts.Settings.BM25.B = *bParam
	opts.Settings.Statistics = bm25.Scope(*stats)
	opts.Settings.Model, opts.Settings.Dims = *model, *dims
	if err := opts.Settings.Validate(); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	if m, d := embedding.Model(); *model != embed.Hash && (*model != m || *dims != d) {
		return fmt.Errorf("%w: --model %s --dims %d needs a server for it: --embed-url URL --embed-model %s --embed-dims %d", cmdline.ErrUsage, *model, *dims, *model, *dims)
	}
	models, cache, err := embedding.CachedRegistry(*embedCache)
	if err != nil {
		return err
	}
	if cache != nil {
		defer func() {
			cache.Close()
			fmt.Fprintf(env.Stderr, "embedding cache: %d texts from the cache, %d embedded\n", cache.Hits, cache.Misses)
		}()
	}
	opts.Models = models
	if *model != embed.Hash {
		// The service's profile for a model tenant; --policy and
		// --profile fields still win.
		opts.Policy = retrieval.ModelDefaults().Apply(opts.Policy)
	}
	if *rerankBudget != "" {
		d, err := cmdline.ParseBudget("--rerank-budget", *rerankBudget)
		if err != nil {
			return err
		}
		opts.Policy.RerankBudgetMS = cmdline.BudgetMS(d)
		opts.SeedPolicy.RerankBudgetMS = cmdline.BudgetMS(d)
	}
	rr, err := reranker.Build(env, cmdline.Logger(env))
	if err != nil {
		return err
	}
	opts.Reranker = rr
	if err := evalPolicies(&opts, *policy, profiles); err != nil {
		return err
	}
	opts.Bootstrap = *boot
	opts.Baseline = eval.Pipeline(*baseline)

	edocs, queries, meta, err := in.load()
	if err != nil {
		return err
	}

	opts.Depth = *depth
	opts.DropSections = drop
	opts.Workers = *workers
	opts.PerQuery = *perQuery != "" || *trecDir != ""
	run, err := measureEval(ctx, env, edocs, queries, opts, meta, *bakeoff, *every)
	if err != nil {
		return err
	}
	return writeEval(env, run, queries, evalOutputs{trecDir: *trecDir, perQuery: *perQuery, save: *savePath, json: *asJSON, markdown: *asMarkdown})
}

// measureEval runs the pipelines of opts over the documents and queries,
// and with bakeoff the chunking bake-off, reporting progress on stderr
// every progressEvery queries.
func measureEval(ctx context.Context, env Env, edocs []eval.Document, queries []eval.Query, opts eval.Options, meta eval.Meta, bakeoff bool, progressEvery int) (eval.Evaluation, error) {
	label := "main run"
	start := time.Now()
	opts.Progress = func(done, total int) {
		if progressEvery > 0 && (done%progressEvery == 0 || done == total) {
			el := time.Since(start)
			rate := float64(done) / el.Seconds()
			fmt.Fprintf(env.Stderr, "eval: %s: %d/%d queries, %.0f queries/s, ETA %s\n", label, done, total, rate,
				time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	fmt.Fprintf(env.Stderr, "eval: %d documents, %d queries, %d workers\n", len(edocs), len(queries), opts.Workers)
	run := eval.Evaluation{Meta: meta}
	var err error
	run.Report, err = eval.Run(ctx, edocs, queries, opts)
	if err != nil {
		return run, err
	}
	fmt.Fprintf(env.Stderr, "eval: main run took %s\n", time.Since(start).Round(100*time.Millisecond))
	if bakeoff {
		variants := eval.DefaultVariants()
		bstart := time.Now()
		run.BakeOff, err = eval.BakeOff(ctx, edocs, queries, variants, opts, func(i int, v eval.Variant) {
			label = fmt.Sprintf("bake-off %d/%d (%s)", i+1, len(variants), v.Name)
			start = time.Now()
		})
		if err != nil {
			return run, err
		}
		fmt.Fprintf(env.Stderr, "eval: bake-off took %s\n", time.Since(bstart).Round(100*time.Millisecond))
	}
	return run, nil
}

// evalOutputs are where an eval run goes besides stdout's report.
type evalOutputs struct {
	trecDir, perQuery, save string
	json, markdown          bool
}

// writeEval writes run's TREC runs, per-query lines and saved JSON as out
// asks, then the report to stdout: JSON, Markdown tables or text.
func writeEval(env Env, run eval.Evaluation, queries []eval.Query, out evalOutputs) error {
	if out.trecDir != "" {
		if err := writeTREC(out.trecDir, queries, run.Report.PerQuery); err != nil {
			return err
		}
	}
	if out.perQuery != "" {
		if err := writePerQuery(out.perQuery, run.Report.PerQuery); err != nil {
			return err
		}
	}
	run.Report.PerQuery = nil
	if out.save != "" {
		var b bytes.Buffer
		if err := encodeRun(&b, run); err != nil {
			return err
		}
		if err := os.WriteFile(out.save, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("save run: %w", err)
		}
	}
	switch {
	case out.json:
		return encodeRun(env.Stdout, run)
	case out.markdown:
		return eval.WriteMarkdown(env.Stdout, run.Meta, run.Report, run.BakeOff)
	}
	return eval.WriteText(env.Stdout, run.Meta, run.Report, run.BakeOff)
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

// writeTREC writes each pipeline's document rankings as DIR/PIPELINE.run.
func writeTREC(dir string, queries []eval.Query, per []eval.QueryResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("trec: %w", err)
	}
	if len(per) == 0 {
		return nil
	}
	var names []eval.Pipeline
	for p := range per[0].DocRanks {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		var b bytes.Buffer
		for i, q := range per {
			if err := eval.WriteRun(&b, queries[i].Key(), q.DocRanks[p], string(p)); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, string(p)+".run"), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("trec: %w", err)
		}
	}
	return nil
}

func runEvalScore(_ context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	in := addInputFlags(fs, false)
	var runs cmdline.RepeatFlag
	fs.Var(&runs, "run", "TREC run file (repeatable; the first is the baseline of the intervals)")
	var compare cmdline.RepeatFlag
	fs.Var(&compare, "compare", "another TREC run file, compared with the first --run (same as a further --run)")
	k := fs.Int("k", eval.K, "metric cut-off; only 10 is supported")
	boot := fs.Int("bootstrap", eval.DefaultBootstrap, "paired bootstrap resamples (0 = none)")
	asJSON := fs.Bool("json", false, "print the scores as JSON")
	asMarkdown := fs.Bool("markdown", false, "print the tables as Markdown")
	perQuery := fs.String("per-query", "", "write every query's metrics per run to FILE (JSON Lines)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	runs = append(runs, compare...)
	if err := in.check(); err != nil {
		return err
	}
	switch {
	case len(runs) == 0:
		return fmt.Errorf("%w: --run FILE is required", cmdline.ErrUsage)
	case fs.NArg() != 0:
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	case *k != eval.K:
		return fmt.Errorf("%w: --k %d: only %d is supported", cmdline.ErrUsage, *k, eval.K)
	case *boot < 0:
		return fmt.Errorf("%w: --bootstrap %d must be >= 0", cmdline.ErrUsage, *boot)
	case *asJSON && *asMarkdown:
		return fmt.Errorf("%w: --json and --markdown exclude each other", cmdline.ErrUsage)
	}
	_, queries, _, err := in.load()
	if err != nil {
		return err
	}
	var scores []eval.RunScore
	for _, p := range runs {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		run, err := eval.ReadRun(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".run")
		for _, s := range scores {
			if s.Name == name {
				name = p
			}
		}
		scores = append(scores, eval.ScoreRun(name, run, queries))
	}
	if *perQuery != "" {
		if err := writeScoresPerQuery(*perQuery, queries, scores); err != nil {
			return err
		}
	}
	var ivs []eval.Interval
	if *boot > 0 && len(scores) > 1 {
		ivs = eval.CompareRuns(scores[0], scores[1:], *boot)
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Queries   int             `json:"queries"`
			Runs      []eval.RunScore `json:"runs"`
			Intervals []eval.Interval `json:"intervals,omitempty"`
		}{len(queries), scores, ivs})
	}
	return eval.WriteScores(env.Stdout, *asMarkdown, len(queries), scores, ivs)
}

// scoredQuery is one line of 'eval score --per-query': a query and its
// metrics in each run.
type scoredQuery struct {
	ID       string                  `json:"id"`
	Query    string                  `json:"query"`
	Relevant []string                `json:"relevant"`
	Grades   map[string]int          `json:"grades,omitempty"`
	Metrics  map[string]eval.Metrics `json:"metrics"`
}

func writeScoresPerQuery(path string, queries []eval.Query, scores []eval.RunScore) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, q := range queries {
		line := scoredQuery{ID: q.Key(), Query: q.Query, Relevant: q.Relevant, Grades: q.Grades,
			Metrics: make(map[string]eval.Metrics, len(scores))}
		for _, s := range scores {
			line.Metrics[s.Name] = s.PerQuery[i]
		}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("encode per-query scores: %w", err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write per-query scores: %w", err)
	}
	return nil
}

func runEvalExport(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	in := addInputFlags(fs, true)
	out := fs.String("chunks", "", "JSON Lines file to write (required)")
	var drop cmdline.ListFlag
	fs.Var(&drop, "drop-section", "section name to hold out of every document (repeatable, or comma-separated)")
	maxWords := fs.Int("max-words", index.DefaultSettings().Chunking.MaxWords, "chunk window size in words")
	overlap := fs.Int("overlap-words", index.DefaultSettings().Chunking.OverlapWords, "chunk window overlap in words")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if err := in.check(); err != nil {
		return err
	}
	switch {
	case *out == "":
		return fmt.Errorf("%w: --chunks FILE is required", cmdline.ErrUsage)
	case fs.NArg() != 0:
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	opts := eval.DefaultOptions()
	opts.Settings.Chunking.MaxWords = *maxWords
	opts.Settings.Chunking.OverlapWords = *overlap
	if err := opts.Settings.Validate(); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	opts.DropSections = drop
	edocs, queries, _, err := in.load()
	if err != nil {
		return err
	}
	chunks, err := eval.Chunks(ctx, edocs, queries, opts)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, ch := range chunks {
		if err := enc.Encode(ch); err != nil {
			return fmt.Errorf("encode chunk: %w", err)
		}
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write chunks: %w", err)
	}
	fmt.Fprintf(env.Stderr, "eval: wrote %d chunks of %d documents to %s\n", len(chunks), len(edocs), *out)
	return nil
}
