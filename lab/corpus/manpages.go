package corpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// Defaults for [ManPageOptions].
const (
	DefaultManRoot     = "/usr/share/man"
	DefaultWidth       = 100
	DefaultPageTimeout = time.Minute
	// ManifestName is the file [ManPages] writes next to the pages: options,
	// tool versions, every document's digest, and every skipped page.
	ManifestName = "manifest.json"
	// pagesDir is the subdirectory that holds the documents, so a document's
	// file path relative to the output directory is its doc id + ".md".
	pagesDir = "man"
)

// compressionSuffixes are the compressed forms man -l reads; a page's name
// and section come from the file name without them.
var compressionSuffixes = []string{".gz", ".bz2", ".xz", ".lzma", ".zst", ".Z"}

// ManPageOptions selects and renders pages.
type ManPageOptions struct {
	// Root is the manual tree, default /usr/share/man. Its English pages live
	// in Root/man<section>/.
	Root string
	// Sections are the section directories to read ("1", "5", "8"), visited
	// in sorted order whatever order they are given in.
	Sections []string
	// Exclude are path.Match patterns on a page's name ("gcloud*").
	Exclude []string
	// Every keeps every Every-th page (the 1st, the Every+1-th, ...) after
	// aliases and exclusions are removed, in section then file-name order: a
	// sample that spans every section and the whole alphabet. 0 or 1 keeps all.
	Every int
	// Limit keeps only the first Limit pages after Every; 0 keeps all.
	Limit int
	// MaxBytes skips a page whose Markdown is larger; 0 means Cordon's own
	// 10 MiB document limit.
	MaxBytes int
	// Width is the rendering width in columns (MANWIDTH), default 100.
	Width int
	// Workers render pages in parallel; default 1. Output does not depend on it.
	Workers int
	// PageTimeout bounds one page's rendering, default one minute.
	PageTimeout time.Duration
	// Replace removes a previous run's output (OutDir/man and the manifest,
	// nothing else) before writing. Without it, a previous run is an error.
	Replace bool
	// Render renders one page file to tty text; default [ManRenderer].
	Render RenderFunc
	// Progress, when set, is called after every page, never concurrently.
	Progress func(Progress)
}

// RenderFunc renders the manual page file at path (possibly compressed) to
// groff tty output.
type RenderFunc func(ctx context.Context, path string, width int) ([]byte, error)

// Progress reports how far a run is.
type Progress struct {
	Done, Total int
	Elapsed     time.Duration
}

// Page is one selected manual page file.
type Page struct {
	DocID   string // man/<section>/<name>
	Source  string // the file under Root
	Section string // from the file name: "1", "1ssl", "8"
	Name    string // the page's name from the file name: "ls", "[", "c++"
	// content is the file whose text is rendered: the symbolic link's target
	// or the .so stub's target.
	content string
}

// Written is one document written by [ManPages].
type Written struct {
	DocID  string `json:"doc_id"`
	Source string `json:"source"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Skipped is a page that was not written, and why.
type Skipped struct {
	DocID  string `json:"doc_id"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Alias is a page skipped because its text is another selected page's.
type Alias struct {
	DocID   string `json:"doc_id"`
	Source  string `json:"source"`
	AliasOf string `json:"alias_of"`
}

// Manifest is what [ManPages] did; it is also written to OutDir/manifest.json.
// It holds no time stamps, so two runs over the same pages write the same
// manifest.
type Manifest struct {
	Generator string    `json:"generator"`
	Root      string    `json:"root"`
	Sections  []string  `json:"sections"`
	Exclude   []string  `json:"exclude"`
	Every     int       `json:"every"`
	Limit     int       `json:"limit"`
	MaxBytes  int       `json:"max_bytes"`
	Width     int       `json:"width"`
	Tools     []string  `json:"tools"`
	Documents []Written `json:"documents"`
	Skipped   []Skipped `json:"skipped"`
	Aliases   []Alias   `json:"aliases"`
}

func (o *ManPageOptions) defaults() error {
	if o.Root == "" {
		o.Root = DefaultManRoot
	}
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.PageTimeout == 0 {
		o.PageTimeout = DefaultPageTimeout
	}
	if o.Render == nil {
		o.Render = ManRenderer
	}
	switch {
	case len(o.Sections) == 0:
		return fmt.Errorf("%w: no sections given", ErrInvalidOptions)
	case o.Every < 0:
		return fmt.Errorf("%w: every %d must be >= 0", ErrInvalidOptions, o.Every)
	case o.Limit < 0:
		return fmt.Errorf("%w: limit %d must be >= 0", ErrInvalidOptions, o.Limit)
	case o.MaxBytes < 0:
		return fmt.Errorf("%w: max bytes %d must be >= 0", ErrInvalidOptions, o.MaxBytes)
	case o.Width < 40 || o.Width > 1000:
		return fmt.Errorf("%w: width %d must be in 40..1000", ErrInvalidOptions, o.Width)
	case o.Workers < 1:
		return fmt.Errorf("%w: workers %d must be >= 1", ErrInvalidOptions, o.Workers)
	}
	for _, s := range o.Sections {
		if s == "" || strings.ContainsAny(s, `/\.`) {
			return fmt.Errorf("%w: section %q is not a section name such as 1 or 8", ErrInvalidOptions, s)
		}
	}
	for _, p := range o.Exclude {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w: exclude pattern %q: %w", ErrInvalidOptions, p, err)
		}
	}
	if o.MaxBytes == 0 || o.MaxBytes > cordontype.MaxTextBytes {
		o.MaxBytes = cordontype.MaxTextBytes
	}
	secs := slices.Clone(o.Sections)
	slices.Sort(secs)
	o.Sections = slices.Compact(secs)
	return nil
}

// SelectPages lists the pages a run would convert, in order, and the aliases
// of those pages it leaves out. It reads the file names and the first bytes of small files
// (to find ".so" stubs); it renders nothing.
func SelectPages(opts ManPageOptions) ([]Page, []Alias, error) {
	if err := opts.defaults(); err != nil {
		return nil, nil, err
	}
	return selectPages(opts)
}

type candidate struct {
	page   Page
	direct bool // a regular file with its own text (not a link, not a .so stub)
}

func selectPages(opts ManPageOptions) ([]Page, []Alias, error) {
	var cands []candidate
	for _, sec := range opts.Sections {
		dir := filepath.Join(opts.Root, "man"+sec)
		entries, err := os.ReadDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: section %s: %s does not exist", ErrNoPages, sec, dir)
			}
			return nil, nil, fmt.Errorf("read section %s: %w", sec, err)
		}
		for _, e := range entries { // os.ReadDir sorts by file name
			name, section, ok := parsePageFile(e.Name(), sec)
			if !ok || excluded(name, opts.Exclude) {
				continue
			}
			src := filepath.Join(dir, e.Name())
			c, err := inspect(opts.Root, src, e)
			if err != nil {
				return nil, nil, err
			}
			if c == nil {
				continue
			}
			c.page.Section, c.page.Name = section, name
			c.page.DocID = "man/" + section + "/" + sanitizeName(name)
			cands = append(cands, *c)
		}
	}
	// Group by the file whose text is rendered; keep one page per text,
	// preferring the page that holds the text itself.
	canonical := make(map[string]string) // content -> doc id
	for _, c := range cands {
		if c.direct {
			if _, ok := canonical[c.page.content]; !ok {
				canonical[c.page.content] = c.page.DocID
			}
		}
	}
	var pages []Page
	var aliases []Alias
	seen := make(map[string]string) // doc id -> source, to catch collisions
	for _, c := range cands {
		if id, ok := canonical[c.page.content]; ok && id != c.page.DocID {
			aliases = append(aliases, Alias{DocID: c.page.DocID, Source: c.page.Source, AliasOf: id})
			continue
		}
		if !c.direct {
			canonical[c.page.content] = c.page.DocID
		}
		if prev, ok := seen[c.page.DocID]; ok {
			return nil, nil, fmt.Errorf("pages %s and %s both map to doc id %q", prev, c.page.Source, c.page.DocID)
		}
		seen[c.page.DocID] = c.page.Source
		pages = append(pages, c.page)
	}
	if opts.Every > 1 {
		kept := pages[:0]
		for i, p := range pages {
			if i%opts.Every == 0 {
				kept = append(kept, p)
			}
		}
		pages = kept
	}
	if opts.Limit > 0 && len(pages) > opts.Limit {
		pages = pages[:opts.Limit]
	}
	// Report only the aliases of pages this run converts.
	chosen := make(map[string]bool, len(pages))
	for _, p := range pages {
		chosen[p.DocID] = true
	}
	aliases = slices.DeleteFunc(aliases, func(a Alias) bool { return !chosen[a.AliasOf] })
	if len(pages) == 0 {
		return nil, nil, fmt.Errorf("%w: sections %s under %s (after exclusions)", ErrNoPages, strings.Join(opts.Sections, ","), opts.Root)
	}
	return pages, aliases, nil
}

// parsePageFile splits "ls.1.gz" in section directory "1" into name "ls"
// and section "1"; "openssl-cmds.1ssl.gz" gives section "1ssl".
func parsePageFile(file, dirSection string) (name, section string, ok bool) {
	for _, suf := range compressionSuffixes {
		if s, found := strings.CutSuffix(file, suf); found {
			file = s
			break
		}
	}
	dot := strings.LastIndexByte(file, '.')
	if dot <= 0 {
		return "", "", false
	}
	name, section = file[:dot], file[dot+1:]
	if !strings.HasPrefix(section, dirSection) {
		return "", "", false
	}
	return name, section, true
}

func excluded(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// sanitizeName maps a page name to doc-id bytes: [A-Za-z0-9._-] are kept,
// every other byte becomes "_" and two lower-case hex digits ("c++" gives
// "c_2b_2b", "[" gives "_5b"). The map is not injective in theory ("_5b" is
// also a name); [SelectPages] reports a collision instead of merging pages.
func sanitizeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	return b.String()
}

// stubMaxBytes bounds the files read to look for ".so" stubs: a stub is one
// line, well under this even compressed.
const stubMaxBytes = 512

// inspect classifies one directory entry: a regular file with text, a
// symbolic link (its target's text), or a ".so" stub (the included page's
// text). It returns nil for entries that are not files.
func inspect(root, src string, e fs.DirEntry) (*candidate, error) {
	c := &candidate{page: Page{Source: src, content: src}}
	info, err := e.Info()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", src, err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, nil // a dangling link has no page
		}
		c.page.content = real
		return c, nil
	}
	if !info.Mode().IsRegular() {
		return nil, nil
	}
	if info.Size() <= stubMaxBytes {
		if target, ok := soTarget(root, src); ok {
			c.page.content = target
			return c, nil
		}
	}
	c.direct = true
	return c, nil
}

// soTarget reports the page a ".so" stub includes, resolved under root, when
// src holds nothing but comments and one ".so" request.
func soTarget(root, src string) (string, bool) {
	data, err := readPage(src)
	if err != nil {
		return "", false
	}
	var target string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, `.\"`) || strings.HasPrefix(line, `'\"`):
		case strings.HasPrefix(line, ".so ") && target == "":
			target = strings.TrimSpace(strings.TrimPrefix(line, ".so "))
		default:
			return "", false
		}
	}
	if target == "" {
		return "", false
	}
	for _, suf := range append([]string{""}, compressionSuffixes...) {
		p := filepath.Join(root, target+suf)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, true
		}
	}
	return "", false
}

// readPage returns a page file's text, decompressing gzip.
func readPage(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !strings.HasSuffix(p, ".gz") {
		return io.ReadAll(io.LimitReader(f, 1<<20))
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(io.LimitReader(zr, 1<<20))
}

// ManRenderer renders a page with man-db, pinned for determinism: man -l
// (the file, no search path), a fixed width, no hyphenation, no
// justification, the C.UTF-8 locale, formatting kept as overstrike (so
// section titles can be told from text by their bold), and an environment
// that holds only what man needs.
func ManRenderer(ctx context.Context, p string, width int) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "man", "--no-hyphenation", "--no-justification", "-l", p)
	cmd.Env = []string{
		"PATH=" + cmpOr(os.Getenv("PATH"), "/usr/local/bin:/usr/bin:/bin"),
		"HOME=/nonexistent",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"MANWIDTH=" + strconv.Itoa(width),
		"MAN_KEEP_FORMATTING=1",
		"MANPAGER=cat",
		"PAGER=cat",
		"MANOPT=",
		"GROFF_NO_SGR=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(firstLine(stderr.String()))
		if ctx.Err() != nil {
			return nil, fmt.Errorf("man -l: %w", ctx.Err())
		}
		if msg != "" {
			return nil, fmt.Errorf("man -l: %w: %s", err, msg)
		}
		return nil, fmt.Errorf("man -l: %w", err)
	}
	return stdout.Bytes(), nil
}

// ToolVersions returns the first line of "man --version" and
// "groff --version", recorded in the manifest: another groff can render the
// same page differently.
func ToolVersions(ctx context.Context) []string {
	var out []string
	for _, tool := range []string{"man", "groff"} {
		b, err := exec.CommandContext(ctx, tool, "--version").Output()
		if err != nil {
			out = append(out, tool+": unavailable")
			continue
		}
		out = append(out, strings.TrimSpace(firstLine(string(b))))
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ManPages renders the selected pages into outDir/man/<section>/<name>.md and
// writes outDir/manifest.json. A page that fails is reported in the manifest's
// Skipped list and the run goes on; an error is returned only when the run
// itself cannot proceed (no pages, output in the way, a write failing, the
// context cancelled).
func ManPages(ctx context.Context, outDir string, opts ManPageOptions) (Manifest, error) {
	if err := opts.defaults(); err != nil {
		return Manifest{}, err
	}
	pages, aliases, err := selectPages(opts)
	if err != nil {
		return Manifest{}, err
	}
	if err := prepareOut(outDir, opts.Replace); err != nil {
		return Manifest{}, err
	}

	type outcome struct {
		written *Written
		skipped *Skipped
	}
	results := make([]outcome, len(pages))
	start := time.Now()
	var (
		mu   sync.Mutex
		done int
	)
	next := make(chan int)
	errc := make(chan error, opts.Workers)
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w, sk, err := convertPage(ctx, outDir, pages[i], opts)
				if err != nil {
					errc <- err
					return
				}
				results[i] = outcome{w, sk}
				mu.Lock() // one Progress call at a time, in order of Done
				done++
				if opts.Progress != nil {
					opts.Progress(Progress{Done: done, Total: len(pages), Elapsed: time.Since(start)})
				}
				mu.Unlock()
			}
		}()
	}
	var runErr error
feed:
	for i := range pages {
		select {
		case next <- i:
		case runErr = <-errc:
			break feed
		case <-ctx.Done():
			runErr = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if runErr == nil {
		select {
		case runErr = <-errc:
		default:
		}
	}
	if runErr != nil {
		return Manifest{}, runErr
	}

	m := Manifest{
		Generator: "cordon corpus manpages",
		Root:      opts.Root,
		Sections:  opts.Sections,
		Exclude:   nonNil(opts.Exclude),
		Every:     max(opts.Every, 1),
		Limit:     opts.Limit,
		MaxBytes:  opts.MaxBytes,
		Width:     opts.Width,
		Tools:     ToolVersions(ctx),
		Documents: []Written{},
		Skipped:   []Skipped{},
		Aliases:   nonNil(aliases),
	}
	for _, r := range results {
		if r.written != nil {
			m.Documents = append(m.Documents, *r.written)
		} else if r.skipped != nil {
			m.Skipped = append(m.Skipped, *r.skipped)
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("encode manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(outDir, ManifestName), append(data, '\n'), 0o644); err != nil {
		return Manifest{}, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// prepareOut makes outDir ready: it must not hold a previous run unless
// replace is set, in which case exactly the previous run's files go.
func prepareOut(outDir string, replace bool) error {
	return prepareOutDir(outDir, pagesDir, ManifestName, replace)
}

// prepareOutDir makes outDir ready for a genre whose documents live in
// outDir/docsDir and whose manifest is outDir/manifest: neither may exist
// unless replace is set, in which case exactly those go.
func prepareOutDir(outDir, docsDir, manifest string, replace bool) error {
	pagesPath := filepath.Join(outDir, docsDir)
	manifestPath := filepath.Join(outDir, manifest)
	_, errP := os.Stat(pagesPath)
	_, errM := os.Stat(manifestPath)
	if errP == nil || errM == nil {
		if !replace {
			return fmt.Errorf("%w: %s holds %s or %s from an earlier run; remove them or pass --replace",
				ErrOutputNotEmpty, outDir, docsDir+"/", manifest)
		}
		if err := os.RemoveAll(pagesPath); err != nil {
			return fmt.Errorf("remove previous pages: %w", err)
		}
		if err := os.Remove(manifestPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove previous manifest: %w", err)
		}
	}
	if err := os.MkdirAll(pagesPath, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	return nil
}

// convertPage renders, converts, checks and writes one page. Page failures
// are returned as a Skipped; only I/O failures of the output are errors.
func convertPage(ctx context.Context, outDir string, p Page, opts ManPageOptions) (*Written, *Skipped, error) {
	skip := func(format string, args ...any) (*Written, *Skipped, error) {
		return nil, &Skipped{DocID: p.DocID, Source: p.Source, Reason: fmt.Sprintf(format, args...)}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, opts.PageTimeout)
	rendered, err := opts.Render(pctx, p.content, opts.Width)
	cancel()
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if err != nil {
		return skip("render: %v", err)
	}
	text, err := ConvertRendered(rendered)
	if err != nil {
		return skip("convert: %v", err)
	}
	if len(text) > opts.MaxBytes {
		return skip("%d bytes of Markdown, more than the %d-byte limit", len(text), opts.MaxBytes)
	}
	if !analysis.HasToken(text) {
		return skip("no token in the rendered text")
	}
	file := filepath.Join(outDir, filepath.FromSlash(p.DocID)+".md")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return nil, nil, fmt.Errorf("write %s: %w", p.DocID, err)
	}
	sum := sha256.Sum256([]byte(text))
	return &Written{DocID: p.DocID, Source: p.Source, Bytes: len(text), SHA256: hex.EncodeToString(sum[:])}, nil, nil
}
