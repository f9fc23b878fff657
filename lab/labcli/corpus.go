package labcli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/lab/corpus"
)

func corpusCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "corpus",
		Summary: "build evaluation corpora: man pages and Go docs to Markdown, known-item queries",
		Usage: `Usage:
  cordon-lab corpus manpages --out DIR [--sections 1,5,8] [--exclude GLOBS] [--every N] [--limit N]
                         [--max-bytes N] [--width 100] [--workers N] [--replace]
  cordon-lab corpus godocs   --out DIR [--goroot /usr/local/go] [--goos linux] [--goarch amd64]
                         [--limit N] [--max-bytes N] [--replace]
  cordon-lab corpus pgdocs   --html DIR --out DIR [--replace]
  cordon-lab corpus queries  --corpus DIR [--out FILE.jsonl] [--kinds name,body,option,heldout]

manpages renders the machine's own English manual pages (man-db and groff,
under --root, default /usr/share/man) into Markdown documents, one file per
page: DIR/man/<section>/<name>.md, doc id man/<section>/<name>. Each page's
section titles (NAME, SYNOPSIS, DESCRIPTION, OPTIONS, ...) become "#"
headings, subsection titles "##" headings; body text is kept as rendered.
The output is deterministic: sorted traversal, fixed width, C.UTF-8, no
hyphenation or justification. Aliases (symbolic links, .so stubs) are
skipped; pages that fail to render are reported on stderr, listed in
DIR/manifest.json, and skipped. Progress goes to stderr.

How long it takes: one man -l per page. Measured on a 2-core machine with 2
workers: 10 to 12 pages/s (6 pages/s with 1 worker). Sections 1,5,8 without
gcloud's 16,600 generated pages are 1,608 pages (2m10s); every 4th of those
(--every 4) 402 pages (41s); all ~21,000 English pages of /usr/share/man
about 30 minutes. Try --limit first.

godocs renders the documentation of the Go standard library installed under
--goroot, one document per package, as 'go doc -all' shows it (go/doc over
the package's files for --goos/--goarch; exported identifiers only):
DIR/go/<import path>.md, doc id go/<import path>. Packages under internal,
vendor, cmd and testdata directories are left out; directories with no
file for --goos/--goarch are listed in DIR/go-manifest.json as skipped.
Headings: "# package NAME", "## Constants", "## Variables", "## Functions",
"## Types", and one "###" per function, type and method ("### func Clone",
"### func (b *Builder) Len"), its declaration in a fenced block and its doc
comment one paragraph per line. Deterministic: sorted import paths, no
machine state but the installed tree. Go 1.26's library: about 180
packages, 2.5 MB, in about a second.

pgdocs converts the PostgreSQL documentation's HTML pages (--html, e.g.
/usr/share/doc/postgresql-doc-15/html from Debian's postgresql-doc-15)
into a BEIR-format dataset for 'cordon-lab eval --beir DIR --title field':
DIR/corpus.jsonl holds one document per page, _id pg/<file name without
.html>, title the page's <title> and text what 'cordon ingest' stores for
the page (Cordon's HTML conversion). Every reference page (SQL commands,
client and server applications) gives one query of each kind, in
queries-KIND-SPLIT.jsonl with qrels-KIND-SPLIT.tsv (split dev or test as
below; eval's --split is "KIND-SPLIT"):

  command  "what does the NAME command do", NAME the page's name
           ("CLUSTER", "ALTER TABLE", "pg_dump").
  purpose  the page's one-line purpose ("cluster a table according to an
           index"), left in the page.

PostgreSQL 15's documentation: 1,169 pages, 290 of them reference pages,
in a few seconds.

queries builds known-item query sets of a converted corpus and writes them
as JSON Lines, {"id": "kind:doc_id", "kind": ..., "split": ..., "query":
"...", "relevant": ["doc_id", ...]}, kind by kind (--kinds, default name):

  name     the description of the page's NAME line ("ls - list directory
           contents" gives "list directory contents") with every token of
           the page's own names removed; pages giving the same query are
           all relevant to it.
  body     one sentence of the page's body prose (outside NAME and
           SYNOPSIS, 6-30 tokens), left in the page.
  option   the first sentence of one option's description (4-30 tokens).
  heldout  another body sentence, which the query's "remove" field makes
           'cordon-lab eval' cut out of the page before indexing: the page must
           be found by the rest of its text.

The Go documentation kinds (corpora of 'godocs') make several queries per
package, 600 per kind in all when there are candidates enough, spread
round by round over the packages; their ids are "kind:doc_id#n":

  summary     the first sentence of one declaration's doc comment
              (6-30 tokens), left in the document.
  signature   a function's or method's one-line declaration ("func
              Clone(s string) string", 4-30 tokens), left in the document.
  docheldout  a later doc-comment sentence (never a declaration's first;
              6-30 tokens, once in its document), cut out before indexing
              like heldout.

A body, option or held-out passage is chosen per page by a hash of its doc
id among the page's candidates that no other page has. "split" is "dev" or
"test" by a hash of the (first) relevant doc id, about half each: tune on
dev, report test. Pages giving no query of a kind are counted on stderr.

Examples:
  cordon-lab corpus manpages --out /tmp/man-sample --sections 1 --limit 200
  cordon-lab corpus manpages --out /tmp/man --sections 1,5,8 --exclude 'gcloud*' --every 4
  cordon-lab corpus queries --corpus /tmp/man --out /tmp/man-queries.jsonl
  cordon-lab corpus queries --corpus /tmp/man --kinds name,body,option,heldout --out /tmp/man-queries.jsonl
  cordon-lab corpus godocs --out /tmp/godocs
  cordon-lab corpus queries --corpus /tmp/godocs --kinds summary,signature,docheldout --out /tmp/go-queries.jsonl
  cordon-lab corpus pgdocs --html /usr/share/doc/postgresql-doc-15/html --out /tmp/pgdocs
  cordon-lab eval --beir /tmp/pgdocs --split command-dev --title field --markdown
`,
		Subs: []*cmdline.Command{
			{Name: "manpages", Summary: "render man pages to Markdown documents", Usage: corpusManPagesUsage, Run: runCorpusManPages},
			{Name: "godocs", Summary: "render Go standard-library docs to Markdown documents", Usage: corpusGoDocsUsage, Run: runCorpusGoDocs},
			{Name: "pgdocs", Summary: "convert the PostgreSQL HTML documentation to a BEIR dataset", Usage: corpusPGDocsUsage, Run: runCorpusPGDocs},
			{Name: "queries", Summary: "build known-item query sets of a corpus", Usage: corpusQueriesUsage, Run: runCorpusQueries},
		},
	}
}

const corpusManPagesUsage = `Usage: cordon-lab corpus manpages --out DIR [--sections 1,5,8] [--exclude GLOBS] [--every N]
                              [--limit N] [--max-bytes N] [--width 100] [--workers N] [--replace]

Renders the machine's English manual pages into Markdown, one file per page:
DIR/man/<section>/<name>.md, doc id man/<section>/<name> (the path without
.md, the rule 'cordon ingest' and 'cordon-lab eval' use too). 'cordon-lab corpus
--help' says more.

Example:
  cordon-lab corpus manpages --out /tmp/man-sample --sections 1 --limit 200
`

const corpusGoDocsUsage = `Usage: cordon-lab corpus godocs --out DIR [--goroot /usr/local/go] [--goos linux] [--goarch amd64]
                            [--limit N] [--max-bytes N] [--replace]

Renders the documentation of every standard-library package under --goroot
into Markdown, one file per package: DIR/go/<import path>.md, doc id
go/<import path>. 'cordon-lab corpus --help' says more.

Example:
  cordon-lab corpus godocs --out /tmp/godocs
`

func runCorpusGoDocs(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	out := fs.String("out", "", "output directory (required); documents go to DIR/go/, the manifest to DIR/"+corpus.GoDocManifestName)
	goroot := fs.String("goroot", corpus.DefaultGoRoot, "Go installation whose src/ is read")
	goos := fs.String("goos", corpus.DefaultGOOS, "GOOS whose files a package is documented from")
	goarch := fs.String("goarch", corpus.DefaultGOARCH, "GOARCH whose files a package is documented from")
	limit := fs.Int("limit", 0, "render only the first N package directories in import-path order (0 = all)")
	maxBytes := fs.Int("max-bytes", 0, "skip packages whose Markdown is larger than N bytes (0 = Cordon's 10 MiB limit)")
	replace := fs.Bool("replace", false, "replace DIR/go and DIR/"+corpus.GoDocManifestName+" from an earlier run")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out DIR is required", cmdline.ErrUsage)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	start := time.Now()
	m, err := corpus.GoDocs(ctx, *out, corpus.GoDocOptions{GoRoot: *goroot, GOOS: *goos, GOARCH: *goarch,
		Limit: *limit, MaxBytes: *maxBytes, Replace: *replace})
	if err != nil {
		return err
	}
	for _, s := range m.Skipped {
		fmt.Fprintf(env.Stderr, "corpus: skipped %s (%s): %s\n", s.DocID, s.Source, s.Reason)
	}
	total := 0
	for _, d := range m.Documents {
		total += d.Bytes
	}
	fmt.Fprintf(env.Stderr, "corpus: wrote %d documents (%.1f MB) of %s to %s in %s; %d skipped; manifest %s\n",
		len(m.Documents), float64(total)/1e6, m.GoVersion, *out, time.Since(start).Round(time.Millisecond),
		len(m.Skipped), strings.TrimSuffix(*out, "/")+"/"+corpus.GoDocManifestName)
	return nil
}

const corpusPGDocsUsage = `Usage: cordon-lab corpus pgdocs --html DIR --out DIR [--replace]

Converts the PostgreSQL documentation's HTML pages under --html into a
BEIR-format dataset in --out: corpus.jsonl, and the queries and judgments
of the kinds command and purpose, split dev and test. 'cordon-lab corpus
--help' says more.

Example:
  cordon-lab corpus pgdocs --html /usr/share/doc/postgresql-doc-15/html --out /tmp/pgdocs
`

func runCorpusPGDocs(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	htmlDir := fs.String("html", "", "directory of the documentation's .html pages (required), e.g. /usr/share/doc/postgresql-doc-15/html")
	out := fs.String("out", "", "output directory (required)")
	replace := fs.Bool("replace", false, "overwrite the dataset of an earlier run in --out")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *htmlDir == "" || *out == "" {
		return fmt.Errorf("%w: --html DIR and --out DIR are required", cmdline.ErrUsage)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	start := time.Now()
	res, err := corpus.PGDocs(ctx, *htmlDir, *out, *replace)
	if err != nil {
		return err
	}
	for reason, n := range res.Skipped {
		fmt.Fprintf(env.Stderr, "corpus: skipped %d pages: %s\n", n, reason)
	}
	splits := make([]string, 0, len(res.Queries))
	for s, n := range res.Queries {
		splits = append(splits, fmt.Sprintf("%s %d", s, n))
	}
	slices.Sort(splits)
	fmt.Fprintf(env.Stderr, "corpus: wrote %d documents to %s in %s; queries: %s\n",
		res.Pages, *out, time.Since(start).Round(time.Millisecond), strings.Join(splits, ", "))
	return nil
}

const corpusQueriesUsage = `Usage: cordon-lab corpus queries --corpus DIR [--out FILE.jsonl] [--kinds name,body,option,heldout]

Builds known-item query sets of a converted corpus as JSON Lines. 'cordon
corpus --help' describes the kinds and the dev/test split.

Example:
  cordon-lab corpus queries --corpus /tmp/man --kinds name,body --out /tmp/man-queries.jsonl
`

func runCorpusManPages(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	out := fs.String("out", "", "output directory (required); pages go to DIR/man/, the manifest to DIR/manifest.json")
	root := fs.String("root", corpus.DefaultManRoot, "manual tree to read")
	sections := fs.String("sections", "1,5,8", "comma-separated sections to read (directories man<N> under --root)")
	every := fs.Int("every", 1, "keep every Nth page (after aliases and exclusions): a sample across all sections")
	limit := fs.Int("limit", 0, "convert only the first N pages (after aliases, exclusions and --every; 0 = all)")
	exclude := fs.String("exclude", "", "comma-separated glob patterns on page names to leave out, e.g. 'gcloud*'")
	maxBytes := fs.Int("max-bytes", 0, "skip pages whose Markdown is larger than N bytes (0 = Cordon's 10 MiB limit)")
	width := fs.Int("width", corpus.DefaultWidth, "rendering width in columns (MANWIDTH)")
	workers := fs.Int("workers", runtime.NumCPU(), "pages rendered in parallel (the output does not depend on it)")
	replace := fs.Bool("replace", false, "replace DIR/man and DIR/manifest.json from an earlier run")
	progressEvery := fs.Int("progress-every", 100, "report progress on stderr every N pages (0 = never)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out DIR is required", cmdline.ErrUsage)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	opts := corpus.ManPageOptions{
		Root:     *root,
		Sections: cmdline.SplitList(*sections),
		Exclude:  cmdline.SplitList(*exclude),
		Every:    *every,
		Limit:    *limit,
		MaxBytes: *maxBytes,
		Width:    *width,
		Workers:  *workers,
		Replace:  *replace,
	}
	pages, aliases, err := corpus.SelectPages(opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "corpus: %d pages selected from sections %s of %s (%d aliases left out); rendering with %d workers\n",
		len(pages), *sections, *root, len(aliases), *workers)
	opts.Progress = func(p corpus.Progress) {
		if *progressEvery <= 0 || (p.Done%*progressEvery != 0 && p.Done != p.Total) {
			return
		}
		rate := float64(p.Done) / p.Elapsed.Seconds()
		eta := time.Duration(float64(p.Total-p.Done) / rate * float64(time.Second))
		fmt.Fprintf(env.Stderr, "corpus: %d/%d pages (%.0f%%), %.1f pages/s, elapsed %s, ETA %s\n",
			p.Done, p.Total, 100*float64(p.Done)/float64(p.Total), rate,
			p.Elapsed.Round(time.Second), eta.Round(time.Second))
	}
	start := time.Now()
	m, err := corpus.ManPages(ctx, *out, opts)
	if err != nil {
		return err
	}
	for _, s := range m.Skipped {
		fmt.Fprintf(env.Stderr, "corpus: skipped %s (%s): %s\n", s.DocID, s.Source, s.Reason)
	}
	total := 0
	for _, d := range m.Documents {
		total += d.Bytes
	}
	elapsed := time.Since(start)
	fmt.Fprintf(env.Stderr, "corpus: wrote %d documents (%.1f MB) to %s in %s (%.1f pages/s); %d skipped, %d aliases left out; manifest %s\n",
		len(m.Documents), float64(total)/1e6, *out, elapsed.Round(time.Second),
		float64(len(m.Documents)+len(m.Skipped))/elapsed.Seconds(), len(m.Skipped), len(m.Aliases),
		strings.TrimSuffix(*out, "/")+"/"+corpus.ManifestName)
	return nil
}

func runCorpusQueries(_ context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	dir := fs.String("corpus", "", "corpus directory of .md documents (required)")
	out := fs.String("out", "-", "query file to write (JSON Lines); - for stdout")
	var kindNames cmdline.ListFlag
	fs.Var(&kindNames, "kinds", "query kinds: name, body, option, heldout; summary, signature, docheldout (repeatable or comma-separated; default name)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	kinds := []corpus.Kind{corpus.KindName}
	if len(kindNames) > 0 {
		kinds = kinds[:0]
		for _, k := range kindNames {
			kind, err := corpus.ParseKind(k)
			if err != nil {
				return fmt.Errorf("%w: --kinds: %w", cmdline.ErrUsage, err)
			}
			kinds = append(kinds, kind)
		}
	}
	if *dir == "" {
		return fmt.Errorf("%w: --corpus DIR is required", cmdline.ErrUsage)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", cmdline.ErrUsage, fs.Args())
	}
	docs, err := corpus.Load(*dir)
	if err != nil {
		return err
	}
	queries, skips := corpus.Queries(docs, kinds)
	var w io.Writer = env.Stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return fmt.Errorf("create query file: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	multi := 0
	perKind := make(map[corpus.Kind]int)
	for _, q := range queries {
		perKind[q.Kind]++
		if err := enc.Encode(q); err != nil {
			return fmt.Errorf("write query: %w", err)
		}
		if len(q.Relevant) > 1 {
			multi++
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write query file: %w", err)
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return fmt.Errorf("write query file: %w", err)
		}
	}
	reasons := make(map[string]int)
	for _, s := range skips {
		reasons[s.Reason]++
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(env.Stderr, "corpus: %d queries from %d documents (%d with more than one relevant document); %d queries not made\n",
		len(queries), len(docs), multi, len(skips))
	for _, k := range kinds {
		fmt.Fprintf(env.Stderr, "corpus:   %s: %d queries\n", k, perKind[k])
	}
	for _, k := range keys {
		fmt.Fprintf(env.Stderr, "corpus:   %d: %s\n", reasons[k], k)
	}
	return nil
}
