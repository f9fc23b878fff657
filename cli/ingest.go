package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/htmltext"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/store/postgres"
)

func ingestCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "ingest",
		Summary: "load Markdown, HTML or text files into a tenant (resumable)",
		Usage: `Usage: cordon ingest --tenant NAME [flags] PATH...
       cordon ingest --server URL --token T [--tenant NAME] [flags] PATH...

Puts every Markdown, HTML or text file (.md, .markdown, .html, .htm, .txt,
.text) under each PATH (a file or a folder, walked recursively; hidden
folders are not walked) into the tenant. --include GLOB takes more files from folders whatever their
extension ('README', '*.rst'); --exclude GLOB leaves files out and wins over
everything (both repeatable; a pattern with a '/' matches the path below
PATH, any other the file's name). A file named as a PATH is always taken
unless excluded. Files left out are counted by reason at the end; -v lists
each with its reason (compressed files such as README.gz are left out:
decompress them first).

HTML is converted before it is chunked (--format auto, the default, takes
.html and .htm files, in any case, as HTML and every other file as
Markdown or text; --format html, markdown or text takes every file so):
h1-h6 become Markdown headings, so a chunk's section is its heading's text;
code blocks are kept verbatim; scripts, styles, navigation, page headers and
footers, form controls and hidden elements are dropped (docs/spec.md,
section 2, "HTML documents"). The stored text is the converted text, and a
page's <title> is its document's title (else the file's name). HTML must be
UTF-8 (convert other encodings first, e.g. with iconv).

A document's id is its path relative to the PATH argument it was found under
(for a file argument, its name) without a trailing ".md", ".html" or ".htm",
with characters outside A-Z a-z 0-9 . _ : / - replaced by '_':
handbook/payments/holds.md is payments/holds, guide/intro.html is
guide/intro, notes.txt stays notes.txt (two files that map to one id, such as
intro.md and intro.html, are refused: ingest them separately). For Markdown
it is the rule of 'cordon-lab corpus' and 'cordon-lab eval', so an ingested
corpus folder has the ids its query files name.

Files go in batches of --batch documents, --workers batches at a time: into
the database, one transaction per batch (PutBatch; a batch that fails on a
bad file is retried file by file, so only that file fails); with --server, one
POST /v1/tenants/{tenant}/documents:batch per batch with a writer token
(--token or $CORDON_TOKEN), for teams that do not hand out database
credentials.

Resumable: against the database, a file whose content hash equals the stored
document's is skipped, so re-running after an interruption only loads what is
missing or changed (--force re-puts everything, e.g. after changing
--classification); over HTTP every file is put again (the API does not
expose content hashes). Progress with rate and ETA goes to stderr: a bar on a
terminal, a plain line every 5 seconds otherwise, also while a batch is being
embedded, and one last line (--quiet: none). Into a tenant with an embedding
model, each shows the chunks embedded of those handed to the model so far.
Failures
are listed at the end and make the exit status 1. --json prints the summary
as one object: {"tenant", "files", "ingested", "unchanged", "failed",
"skipped", "skipped_by_reason", "failures": [{"path", "reason"}],
"skipped_files" (with -v), "error" (what stopped it early)}.

A tenant whose embedding model is not hash needs the server that serves it,
given with the --embed-* flags as for 'cordon serve' (docs/embeddings.md);
without them ingest stops before the first batch, naming the flags. Over
HTTP, the Cordon server embeds.

Examples:
  cordon ingest --tenant wholesale --classification internal docs/
  cordon ingest --tenant wholesale --classification confidential --barrier deal-x memos/falcon.md
  cordon ingest --tenant docs --include 'README' --exclude 'changelog*' -v /usr/share/doc
  cordon ingest --tenant site --exclude 'print/*' public_html/
  cordon ingest --server http://127.0.0.1:8080 --token "$WRITER" --batch 100 --workers 8 handbook/
` + databaseHelp,
		Run: runIngest,
	}
}

// ingestExts are the extensions ingest takes from a folder without
// --include.
var ingestExts = []string{".md", ".markdown", ".html", ".htm", ".txt", ".text"}

// htmlExts are the extensions --format auto takes as HTML (in any case).
var htmlExts = []string{".html", ".htm"}

// docIDSuffixes are dropped from the end of a path to make a doc id.
var docIDSuffixes = []string{".md", ".html", ".htm"}

// compressedExts are skipped with a reason of their own.
var compressedExts = []string{".gz", ".bz2", ".xz", ".zst", ".z", ".zip"}

type ingestFile struct {
	path, docID string
}

// skippedFile is a file or folder ingest did not read, and why.
type skippedFile struct {
	path   string
	kind   string // the reason's class, counted in the summary
	detail string // the reason for this file (-v)
}

// Skip reasons.
const (
	skipName       = "not Markdown, HTML or text by name"
	skipCompressed = "compressed"
	skipExcluded   = "excluded"
	skipHidden     = "hidden folder"
	skipIrregular  = "not a regular file"
)

// ingestSelect picks files by glob: --include adds files whatever their
// extension, --exclude removes files (it wins over everything else).
type ingestSelect struct {
	include, exclude []string
}

func (s ingestSelect) validate() error {
	for _, p := range slices.Concat(s.include, s.exclude) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("bad glob pattern %q: %w", p, err)
		}
	}
	return nil
}

// matchAny returns the first pattern matching rel (a slash path relative to
// the PATH argument): a pattern with a '/' is matched against rel, any other
// against the file's name.
func matchAny(patterns []string, rel string) (string, bool) {
	for _, p := range patterns {
		target := path.Base(rel)
		if strings.Contains(p, "/") {
			target = rel
		}
		if ok, _ := path.Match(p, target); ok {
			return p, true
		}
	}
	return "", false
}

// docIDFor maps a path relative to a PATH argument to a doc id: the slash
// path without a trailing ".md" (the rule of 'cordon-lab corpus' and
// 'cordon-lab eval', so a corpus folder ingested gets the ids its query files name),
// ".html" or ".htm", with characters outside A-Z a-z 0-9 . _ : / - replaced
// by '_'.
func docIDFor(rel string) string {
	rel = filepath.ToSlash(rel)
	for _, suf := range docIDSuffixes {
		if s, ok := strings.CutSuffix(rel, suf); ok {
			rel = s
			break
		}
	}
	b := []byte(rel)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:/-", c) >= 0) {
			b[i] = '_'
		}
	}
	return string(b)
}

// collectFiles lists the files to ingest under paths and the ones left out,
// with the reason. A file named as a PATH is taken unless --exclude matches
// it.
func collectFiles(paths []string, sel ingestSelect) ([]ingestFile, []skippedFile, error) {
	var out []ingestFile
	var skipped []skippedFile
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		if !info.IsDir() {
			if pat, ok := matchAny(sel.exclude, filepath.ToSlash(filepath.Base(p))); ok {
				skipped = append(skipped, skippedFile{p, skipExcluded, "matches --exclude " + pat})
				continue
			}
			out = append(out, ingestFile{path: p, docID: docIDFor(filepath.Base(p))})
			continue
		}
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if fp == p {
				return nil
			}
			rel, err := filepath.Rel(p, fp)
			if err != nil {
				return err
			}
			slashRel := filepath.ToSlash(rel)
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") {
					skipped = append(skipped, skippedFile{fp, skipHidden, "hidden folder, not walked"})
					return filepath.SkipDir
				}
				return nil
			}
			if pat, ok := matchAny(sel.exclude, slashRel); ok {
				skipped = append(skipped, skippedFile{fp, skipExcluded, "matches --exclude " + pat})
				return nil
			}
			if !d.Type().IsRegular() {
				skipped = append(skipped, skippedFile{fp, skipIrregular, "not a regular file (symbolic link, socket, ...)"})
				return nil
			}
			ext := strings.ToLower(filepath.Ext(fp))
			_, included := matchAny(sel.include, slashRel)
			switch {
			case included || slices.Contains(ingestExts, ext):
				out = append(out, ingestFile{path: fp, docID: docIDFor(rel)})
			case slices.Contains(compressedExts, ext):
				skipped = append(skipped, skippedFile{fp, skipCompressed, "compressed (" + ext + "): decompress it first"})
			case ext == "":
				skipped = append(skipped, skippedFile{fp, skipName, "no extension; --include '" + d.Name() + "' takes it"})
			default:
				skipped = append(skipped, skippedFile{fp, skipName, "extension " + ext + " is not .md, .markdown, .html, .htm, .txt or .text; --include '*" + ext + "' takes it"})
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return out, skipped, nil
}

// skipSummary counts skipped files by reason: "2 not Markdown or text by
// name, 1 compressed".
func skipSummary(skipped []skippedFile) string {
	counts := map[string]int{}
	var kinds []string
	for _, s := range skipped {
		if counts[s.kind] == 0 {
			kinds = append(kinds, s.kind)
		}
		counts[s.kind]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// progress reports ingest progress on w: on a terminal a bar redrawn in
// place ('\r') at most ten times a second; elsewhere (a log file, a CI job)
// a plain line at most every lineEvery, and always a last line, unless the
// line before it already said the same. While ingest embeds (into the
// database, with a model), it is the provider's [embed.Observer] and each
// line also counts the chunks embedded of those handed to the model so
// far; each answered request may draw.
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	total     int
	start     time.Time
	last      time.Time
	off       bool
	lineEvery time.Duration
	// done is the files done as last drawn, for draws between batches.
	done int
	// printed says a plain line was written, showing printedDone files
	// and printedChunks chunks embedded.
	printed       bool
	printedDone   int
	printedChunks int64
	// chunksTotal and chunksDone count the texts the embedding calls were
	// given and those embedded.
	chunksTotal, chunksDone atomic.Int64
}

func newProgress(w io.Writer, total int, off bool) *progress {
	now := time.Now()
	return &progress{w: w, tty: isTerminal(w), total: total, start: now, last: now, off: off, lineEvery: 5 * time.Second}
}

var _ embed.Observer = (*progress)(nil)

// Begin implements [embed.Observer]: n more chunks to embed.
func (p *progress) Begin(n int) { p.chunksTotal.Add(int64(n)) }

// Embedded implements [embed.Observer]: n chunks embedded, which may draw.
func (p *progress) Embedded(n int) {
	p.chunksDone.Add(int64(n))
	p.mu.Lock()
	d := p.done
	p.mu.Unlock()
	p.draw(d, false)
}

// Call, Batch and Retry implement [embed.Observer]; progress does not
// show them.
func (p *progress) Call(embed.Outcome, time.Duration) {}
func (p *progress) Batch(int)                         {}
func (p *progress) Retry()                            {}

// tick draws (at most every lineEvery, as always) every interval with
// done's count, so that a long batch still shows progress; the returned
// function stops it and waits for it, and may be called again.
func (p *progress) tick(interval time.Duration, done func() int) (stop func()) {
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw(done(), false)
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-exited
	}
}

func (p *progress) draw(done int, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = max(p.done, done)
	every := p.lineEvery
	if p.tty {
		every = 100 * time.Millisecond
	}
	if p.off || (!final && time.Since(p.last) < every) {
		return
	}
	chunksDone, chunksTotal := p.chunksDone.Load(), p.chunksTotal.Load()
	if final && !p.tty && p.printed && p.printedDone == done && p.printedChunks == chunksDone {
		return // the last line already says it
	}
	p.last = time.Now()
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	eta := "--"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	chunks := ""
	if chunksTotal > 0 {
		chunks = fmt.Sprintf("  chunks embedded %d/%d", chunksDone, chunksTotal)
	}
	if !p.tty {
		pct := 100.0
		if p.total > 0 {
			pct = 100 * float64(done) / float64(p.total)
		}
		fmt.Fprintf(p.w, "ingest: %d/%d files (%.0f%%)  %.1f files/s  ETA %s%s\n", done, p.total, pct, rate, eta, chunks)
		p.printed, p.printedDone, p.printedChunks = true, done, chunksDone
		return
	}
	const width = 30
	filled := width
	if p.total > 0 {
		filled = done * width / p.total
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d files  %.1f files/s  ETA %s%s   ", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, p.total, rate, eta, chunks)
	if final {
		fmt.Fprintln(p.w)
	}
}

// ingestSink is where ingest writes: the Postgres store or the HTTP API.
type ingestSink interface {
	// hashes returns the stored documents' content hashes; nil when the
	// sink cannot tell (every file is then put).
	hashes(ctx context.Context) (map[string][]byte, error)
	// putBatch puts docs and returns one error per document (nil: stored),
	// or a fatal error that stops the ingest (unreachable, no such tenant,
	// not allowed).
	putBatch(ctx context.Context, docs []cordontype.Document) ([]error, error)
	close()
}

// storeSink writes through the store's PutBatch, one transaction per
// batch. A batch that fails on a document is retried one document at a
// time, so that only the bad files fail.
type storeSink struct {
	st     *postgres.Store
	tenant string
}

func (s storeSink) hashes(ctx context.Context) (map[string][]byte, error) {
	return s.st.DocumentHashes(ctx, s.tenant)
}

// fatalStoreError: an error every later batch would meet too stops the
// ingest rather than being reported once per file.
func fatalStoreError(err error) bool {
	return errors.Is(err, postgres.ErrUnavailable) || errors.Is(err, postgres.ErrTenantNotFound) ||
		errors.Is(err, embed.ErrUnknownModel) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// checkIngestModels fails before the first batch when the tenant's models
// (its own and, while it re-embeds, the target) are not hashing and the
// --embed-* flags do not serve them with their dimensions: every document
// would fail the same way.
func checkIngestModels(ctx context.Context, st *postgres.Store, tenant string, f *cmdline.EmbedFlags) error {
	specs, err := st.WriteModels(ctx, tenant)
	if err != nil {
		return err
	}
	model, dims := f.Model()
	for _, spec := range specs {
		switch {
		case spec.IsHash(): // built into the registry: no --embed-* flag serves it
		case f.URL() == "" || model != spec.Model:
			return fmt.Errorf("%w: tenant %q embeds with %s, which no --embed-url serves here: give its embedding server, e.g. cordon ingest --embed-url URL --embed-model %s --embed-dims %d --tenant %s ... (docs/embeddings.md)",
				cmdline.ErrUsage, tenant, spec, spec.Model, spec.Dims, tenant)
		case dims != spec.Dims:
			return fmt.Errorf("%w: tenant %q embeds with %s, but --embed-dims is %d: give --embed-dims %d", cmdline.ErrUsage, tenant, spec, dims, spec.Dims)
		}
	}
	return nil
}

func (s storeSink) putBatch(ctx context.Context, docs []cordontype.Document) ([]error, error) {
	errs := make([]error, len(docs))
	_, err := s.st.PutBatch(ctx, docs)
	switch {
	case err == nil:
		return errs, nil
	case fatalStoreError(err):
		return nil, err
	case len(docs) == 1:
		errs[0] = err
		return errs, nil
	}
	for i := range docs {
		if _, err := s.st.Put(ctx, docs[i]); err != nil {
			if fatalStoreError(err) {
				return nil, err
			}
			errs[i] = err
		}
	}
	return errs, nil
}

func (s storeSink) close() { s.st.Close() }

// httpSink writes through POST /v1/tenants/{tenant}/documents:batch with a
// writer token, for teams that do not hand out database credentials.
type httpSink struct {
	client *http.Client
	base   string
	token  string
	tenant string
}

func (h httpSink) hashes(context.Context) (map[string][]byte, error) { return nil, nil }

func (h httpSink) putBatch(ctx context.Context, docs []cordontype.Document) ([]error, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	for _, d := range docs {
		line := map[string]any{"doc_id": d.DocID, "text": d.Text, "classification": d.Classification.String(),
			"barriers": d.Barriers, "as_of_tick": d.AsOfTick, "title": d.Title, "metadata": d.Metadata}
		if err := enc.Encode(line); err != nil {
			return nil, fmt.Errorf("encode %s: %w", d.DocID, err)
		}
	}
	u := strings.TrimSuffix(h.base, "/") + "/v1/tenants/" + url.PathEscape(h.tenant) + "/documents:batch"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	// 207: some lines failed; their outcomes are in the body as for 200.
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusMultiStatus {
		return nil, fmt.Errorf("server answered %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	var out struct {
		Results []struct {
			Line   int `json:"line"`
			Status int `json:"status"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	errs := make([]error, len(docs))
	seen := 0
	for _, r := range out.Results {
		i := r.Line - 1 // one document per line, no blank lines
		if i < 0 || i >= len(docs) {
			return nil, fmt.Errorf("server answered for line %d of a %d-line batch", r.Line, len(docs))
		}
		seen++
		if r.Error != nil {
			errs[i] = fmt.Errorf("%d %s: %s", r.Status, r.Error.Code, r.Error.Message)
		}
	}
	if seen != len(docs) {
		return nil, fmt.Errorf("server answered for %d of %d documents", seen, len(docs))
	}
	return errs, nil
}

func (h httpSink) close() {}

// ingestBatchBytes caps the text of one batch, whatever --batch says.
const ingestBatchBytes = 16 << 20

func runIngest(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	embedding := cmdline.AddEmbedFlags(fs)
	server := fs.String("server", "", "ingest over HTTP through this 'cordon serve' (POST .../documents:batch) instead of the database")
	token := cmdline.EnvString(fs, env, "token", "CORDON_TOKEN", "", "with --server: a bearer token with the writer role")
	tenant := fs.String("tenant", "", "tenant to load into; required (with --server: default the token's tenant claim)")
	class := fs.String("classification", "internal", "classification of every file: public, internal, confidential, restricted")
	format := fs.String("format", "auto", "how files are read: auto (.html and .htm as HTML, others as Markdown or text), markdown, html or text")
	asOf := fs.Int64("as-of-tick", -1, "as_of_tick of every file (default: the file's modification time, Unix seconds)")
	force := fs.Bool("force", false, "re-put unchanged files too")
	quiet := fs.Bool("quiet", false, "no progress display")
	var verbose bool
	fs.BoolVar(&verbose, "v", false, "list every skipped file with the reason")
	fs.BoolVar(&verbose, "verbose", false, "same as -v")
	batchSize := fs.Int("batch", 64, "documents per batch (one transaction, or one documents:batch request)")
	workers := fs.Int("workers", 4, "batches written in parallel")
	timeout := fs.Duration("timeout", 5*time.Minute, "with --server: timeout of one batch request")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object (skipped files listed with -v)")
	var barriers, include, exclude cmdline.ListFlag
	fs.Var(&barriers, "barrier", "barrier label of every file (repeatable)")
	fs.Var(&include, "include", "glob of extra files to take from folders, e.g. 'README' or '*.rst' (repeatable)")
	fs.Var(&exclude, "exclude", "glob of files to leave out, e.g. 'CHANGELOG*' or 'drafts/*' (repeatable)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *server != "" && *tenant == "" {
		*tenant = tokenTenant(*token)
	}
	switch {
	case *tenant == "" || fs.NArg() == 0:
		return fmt.Errorf("%w: ingest needs --tenant NAME and at least one PATH", cmdline.ErrUsage)
	case *batchSize < 1 || *workers < 1:
		return fmt.Errorf("%w: --batch and --workers must be at least 1", cmdline.ErrUsage)
	case *server != "" && *dbURL != "":
		return fmt.Errorf("%w: give --server or --database-url, not both", cmdline.ErrUsage)
	case *server != "" && *token == "":
		return fmt.Errorf("%w: --server needs a writer token: --token or $CORDON_TOKEN", cmdline.ErrUsage)
	}
	cl, err := cordontype.ParseClassification(*class)
	if err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	formatOf, err := ingestFormat(*format)
	if err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	sel := ingestSelect{include: include, exclude: exclude}
	if err := sel.validate(); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	files, skipped, err := collectFiles(fs.Args(), sel)
	if err != nil {
		return err
	}
	if err := checkDocIDs(files); err != nil {
		return err
	}
	var sink ingestSink
	var models *embed.Registry
	if *server != "" {
		sink = httpSink{client: &http.Client{Timeout: *timeout}, base: *server, token: *token, tenant: *tenant}
	} else if sink, models, err = openStoreSink(ctx, env, *dbURL, embedding, *tenant); err != nil {
		return err
	}
	defer sink.close()
	hashes, err := sink.hashes(ctx)
	if err != nil {
		return err
	}
	job := ingestJob{tenant: *tenant, class: cl, barriers: barriers, asOf: *asOf, force: *force, batchSize: *batchSize, workers: *workers, format: formatOf}
	bar := newProgress(env.Stderr, len(files), *quiet)
	models.Observe(bar)
	t := job.run(ctx, sink, hashes, files, bar)
	if *asJSON {
		if err := writeJSON(env.Stdout, t.summary(*tenant, len(files), skipped, verbose)); err != nil {
			return err
		}
	} else {
		printIngestSummary(env, *tenant, len(files), t.put, t.unchanged, verbose, skipped, t.failures)
	}
	if t.fatal != nil {
		return t.fatal
	}
	if len(t.failures) > 0 {
		return fmt.Errorf("%d files failed", len(t.failures))
	}
	return nil
}

// ingestFormat maps --format to how each file is read: "auto" by its
// extension, anything else as named.
func ingestFormat(name string) (func(path string) cordontype.Format, error) {
	if name == "auto" {
		return func(p string) cordontype.Format {
			if slices.Contains(htmlExts, strings.ToLower(filepath.Ext(p))) {
				return cordontype.FormatHTML
			}
			return cordontype.FormatText
		}, nil
	}
	f, err := cordontype.ParseFormat(name)
	if err != nil {
		return nil, fmt.Errorf("--format %q is not one of auto, markdown, html, text", name)
	}
	return func(string) cordontype.Format { return f }, nil
}

// checkDocIDs refuses two files that map to one doc id.
func checkDocIDs(files []ingestFile) error {
	seen := make(map[string]string, len(files))
	for _, f := range files {
		if prev, dup := seen[f.docID]; dup {
			return fmt.Errorf("%s and %s both map to doc id %q: ingest them separately", prev, f.path, f.docID)
		}
		seen[f.docID] = f.path
	}
	return nil
}

// openStoreSink opens the database ingest writes to, with the embedding
// providers the flags configure, and checks that they serve the tenant's
// models.
func openStoreSink(ctx context.Context, env Env, dbURL string, embedding *cmdline.EmbedFlags, tenant string) (ingestSink, *embed.Registry, error) {
	url, err := cmdline.NeedDatabaseURL(env, dbURL)
	if err != nil {
		return nil, nil, err
	}
	models, err := embedding.Registry()
	if err != nil {
		return nil, nil, err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{Models: models})
	if err != nil {
		return nil, nil, err
	}
	if err := checkIngestModels(ctx, st, tenant, embedding); err != nil {
		st.Close()
		return nil, nil, err
	}
	return storeSink{st: st, tenant: tenant}, models, nil
}

// ingestJob is what an ingest applies to every file.
type ingestJob struct {
	tenant    string
	class     cordontype.Classification
	barriers  []string
	asOf      int64 // < 0: each file's modification time
	force     bool  // put unchanged files too
	batchSize int
	workers   int
	format    func(path string) cordontype.Format
}

// ingestTally is an ingest's outcome, kept by the reader and the workers
// under mu.
type ingestTally struct {
	mu        sync.Mutex
	failures  []failure
	put       int
	unchanged int
	done      int   // files read, put, failed or unchanged
	fatal     error // what stopped the ingest
}

// fail records a file that was not put.
func (t *ingestTally) fail(path string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, failure{path, err.Error()})
	t.done++
}

// count is t.done, for the progress display.
func (t *ingestTally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// ingestBatch is documents written in one transaction or request, with
// their files.
type ingestBatch struct {
	docs  []cordontype.Document
	paths []string
}

// run reads files in order, skips those whose hash is unchanged, batches
// the others and puts the batches through sink with j.workers workers. A
// failed document is recorded and the ingest goes on; a failed batch (the
// sink unusable) or ctx ending stops it, recorded as t.fatal.
func (j ingestJob) run(ctx context.Context, sink ingestSink, hashes map[string][]byte, files []ingestFile, bar *progress) *ingestTally {
	t := &ingestTally{}
	stopTick := bar.tick(time.Second, t.count)
	defer stopTick()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan ingestBatch)
	var wg sync.WaitGroup
	for range j.workers {
		wg.Go(func() {
			for b := range batches {
				bar.draw(t.putBatch(ctx, sink, b, cancel), false)
			}
		})
	}
	var cur ingestBatch
	curBytes := 0
	send := func() bool {
		if len(cur.docs) == 0 {
			return true
		}
		select {
		case batches <- cur:
		case <-ctx.Done():
			return false
		}
		cur, curBytes = ingestBatch{}, 0
		return true
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		doc, size, ok := j.read(ctx, f, hashes, t)
		if !ok {
			continue
		}
		if len(cur.docs) > 0 && curBytes+size > ingestBatchBytes {
			if !send() {
				break
			}
		}
		cur.docs = append(cur.docs, doc)
		cur.paths = append(cur.paths, f.path)
		curBytes += size
		if len(cur.docs) >= j.batchSize && !send() {
			break
		}
	}
	send()
	close(batches)
	wg.Wait()
	stopTick()
	bar.draw(t.done, true)
	if t.fatal == nil && ctx.Err() != nil {
		t.fatal = fmt.Errorf("interrupted after %d of %d files (re-run to resume): %w", t.done, len(files), ctx.Err())
	}
	slices.SortFunc(t.failures, func(a, b failure) int { return strings.Compare(a.path, b.path) })
	return t
}

// putBatch writes b through sink, records the outcome and returns the
// files done; a failure of the whole batch stops the ingest (cancel).
func (t *ingestTally) putBatch(ctx context.Context, sink ingestSink, b ingestBatch, cancel func()) int {
	errs, err := sink.putBatch(ctx, b.docs)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.fatal == nil {
			t.fatal = fmt.Errorf("stopped at %s (re-run to resume): %w", b.paths[0], err)
		}
		cancel()
		return t.done
	}
	for i, e := range errs {
		if e != nil {
			t.failures = append(t.failures, failure{b.paths[i], e.Error()})
		} else {
			t.put++
		}
	}
	t.done += len(b.docs)
	return t.done
}

// read makes f's document and returns it with its text's size; ok is false
// when f is not to be put (unreadable, invalid, or unchanged since the last
// ingest), which t records, or when ctx ends while converting its HTML.
func (j ingestJob) read(ctx context.Context, f ingestFile, hashes map[string][]byte, t *ingestTally) (doc cordontype.Document, size int, ok bool) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.fail(f.path, err)
		return doc, 0, false
	}
	text, title := string(data), filepath.Base(f.path)
	if j.format != nil && j.format(f.path) == cordontype.FormatHTML {
		res, err := htmltext.ConvertContext(ctx, text)
		if err != nil {
			if ctx.Err() == nil { // else the run stops as interrupted
				t.fail(f.path, err)
			}
			return doc, 0, false
		}
		text = res.Text
		if res.Title != "" {
			title = res.Title
		}
	}
	// The store hashes the text it stores: for HTML, the converted text.
	sum := blake2b.Sum256([]byte(text))
	if old, ok := hashes[f.docID]; ok && !j.force && bytes.Equal(old, sum[:]) {
		t.mu.Lock()
		t.unchanged++
		t.done++
		t.mu.Unlock()
		return doc, 0, false
	}
	tick := j.asOf
	if tick < 0 {
		tick = 0
		if info, err := os.Stat(f.path); err == nil {
			tick = max(info.ModTime().Unix(), 0)
		}
	}
	doc = cordontype.Document{Tenant: j.tenant, DocID: f.docID, Text: text, Classification: j.class,
		Barriers: slices.Clone(j.barriers), AsOfTick: tick, Title: title,
		Metadata: map[string]any{"source_path": filepath.ToSlash(f.path)}}
	// Checked here too: JSON would turn invalid UTF-8 into U+FFFD on
	// the way to the server, and Cordon never repairs text.
	if err := doc.Validate(); err != nil {
		t.fail(f.path, err)
		return doc, 0, false
	}
	return doc, len(text), true
}

// summary is the --json summary of t.
func (t *ingestTally) summary(tenant string, files int, skipped []skippedFile, verbose bool) ingestSummary {
	sum := ingestSummary{Tenant: tenant, Files: files, Ingested: t.put, Unchanged: t.unchanged, Failed: len(t.failures),
		Skipped: len(skipped), SkippedBy: map[string]int{}, Failures: []ingestFailure{}}
	for _, sk := range skipped {
		sum.SkippedBy[sk.kind]++
		if verbose {
			sum.SkippedFiles = append(sum.SkippedFiles, ingestFailure{Path: sk.path, Reason: sk.detail})
		}
	}
	for _, f := range t.failures {
		sum.Failures = append(sum.Failures, ingestFailure{Path: f.path, Reason: f.msg})
	}
	if t.fatal != nil {
		sum.Error = t.fatal.Error()
	}
	return sum
}

// ingestSummary is the output of 'cordon ingest --json'.
type ingestSummary struct {
	Tenant       string          `json:"tenant"`
	Files        int             `json:"files"`
	Ingested     int             `json:"ingested"`
	Unchanged    int             `json:"unchanged"`
	Failed       int             `json:"failed"`
	Skipped      int             `json:"skipped"`
	SkippedBy    map[string]int  `json:"skipped_by_reason"`
	Failures     []ingestFailure `json:"failures"`
	SkippedFiles []ingestFailure `json:"skipped_files,omitempty"`
	// Error is what stopped the ingest early (re-run to resume).
	Error string `json:"error,omitempty"`
}

type ingestFailure struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

type failure struct{ path, msg string }

func printIngestSummary(env Env, tenant string, files, put, unchanged int, verbose bool, skipped []skippedFile, failures []failure) {
	fmt.Fprintf(env.Stdout, "ingested %d, unchanged %d, failed %d of %d files into tenant %s\n", put, unchanged, len(failures), files, tenant)
	if len(skipped) > 0 {
		more := " (-v lists them)"
		if verbose {
			more = ":"
		}
		fmt.Fprintf(env.Stdout, "skipped %d: %s%s\n", len(skipped), skipSummary(skipped), more)
		if verbose {
			for _, s := range skipped {
				fmt.Fprintf(env.Stdout, "  SKIPPED %s: %s\n", s.path, s.detail)
			}
		}
	}
	for _, f := range failures {
		fmt.Fprintf(env.Stdout, "  FAILED %s: %s\n", f.path, f.msg)
	}
}
