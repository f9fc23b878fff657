package corpus

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

// Defaults for [GoDocOptions].
const (
	DefaultGoRoot = "/usr/local/go"
	// DefaultGOOS and DefaultGOARCH pick the files a package's
	// documentation is read from (build constraints), whatever machine
	// renders it.
	DefaultGOOS   = "linux"
	DefaultGOARCH = "amd64"
	// GoDocManifestName is the file [GoDocs] writes next to the documents,
	// apart from the man pages' manifest so both genres can share a
	// directory.
	GoDocManifestName = "go-manifest.json"
	// goDocsDir holds the documents: a document's file path relative to the
	// output directory is its doc id + ".md".
	goDocsDir = "go"
)

// skippedGoDirs are directories of GOROOT/src whose packages are not the
// standard library's public API: internal packages, vendored copies, the
// tools under cmd, and test data.
var skippedGoDirs = map[string]bool{"internal": true, "vendor": true, "cmd": true, "testdata": true}

// GoDocOptions selects and renders standard-library packages.
type GoDocOptions struct {
	// GoRoot is the Go installation whose src/ is read, default
	// /usr/local/go.
	GoRoot string
	// GOOS and GOARCH select files by build constraint, default linux and
	// amd64. Cgo files are always included.
	GOOS, GOARCH string
	// Limit keeps only the first Limit packages in import-path order; 0
	// keeps all.
	Limit int
	// MaxBytes skips a package whose Markdown is larger; 0 means Cordon's
	// own 10 MiB document limit.
	MaxBytes int
	// Replace removes a previous run's output (OutDir/go and the manifest,
	// nothing else) before writing. Without it, a previous run is an error.
	Replace bool
}

// GoDocManifest is what [GoDocs] did; it is also written to
// OutDir/go-manifest.json. It holds no time stamps, so two runs over the
// same installation write the same manifest.
type GoDocManifest struct {
	Generator string `json:"generator"`
	GoRoot    string `json:"goroot"`
	GoVersion string `json:"go_version"`
	// Toolchain is the Go release cordon-lab was built with: its go/doc
	// renders, and its release and tool tags select files.
	Toolchain string    `json:"toolchain"`
	GOOS      string    `json:"goos"`
	GOARCH    string    `json:"goarch"`
	Limit     int       `json:"limit"`
	MaxBytes  int       `json:"max_bytes"`
	Documents []Written `json:"documents"`
	Skipped   []Skipped `json:"skipped"`
}

func (o *GoDocOptions) defaults() error {
	if o.GoRoot == "" {
		o.GoRoot = DefaultGoRoot
	}
	if o.GOOS == "" {
		o.GOOS = DefaultGOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = DefaultGOARCH
	}
	switch {
	case o.Limit < 0:
		return fmt.Errorf("%w: limit %d must be >= 0", ErrInvalidOptions, o.Limit)
	case o.MaxBytes < 0:
		return fmt.Errorf("%w: max bytes %d must be >= 0", ErrInvalidOptions, o.MaxBytes)
	}
	if o.MaxBytes == 0 || o.MaxBytes > cordontype.MaxTextBytes {
		o.MaxBytes = cordontype.MaxTextBytes
	}
	return nil
}

// GoPackage is one directory of GOROOT/src that may hold a package.
type GoPackage struct {
	DocID      string // go/<import path>
	ImportPath string // "net/http"
	Dir        string // the directory under GoRoot/src
}

// SelectGoPackages lists, in import-path order, the directories under
// GoRoot/src a run would render: every directory holding a non-test .go
// file, except those under internal, vendor, cmd and testdata directories
// (and directories whose name starts with "." or "_", which the go command
// ignores). Whether a directory is a package for GOOS/GOARCH is decided when
// it is rendered.
func SelectGoPackages(opts GoDocOptions) ([]GoPackage, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	return selectGoPackages(opts)
}

func selectGoPackages(opts GoDocOptions) ([]GoPackage, error) {
	src := filepath.Join(opts.GoRoot, "src")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoPages, src, err)
	}
	var pkgs []GoPackage
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != src && (skippedGoDirs[name] || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		if p == src || !slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
			n := e.Name()
			return !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go")
		}) {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		ip := filepath.ToSlash(rel)
		pkgs = append(pkgs, GoPackage{DocID: goDocsDir + "/" + ip, ImportPath: ip, Dir: p})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", src, err)
	}
	// WalkDir visits in lexical order of names, which is not import-path
	// order ("crypto/x509" before "crypto-x"); sort to be sure.
	slices.SortFunc(pkgs, func(a, b GoPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	if opts.Limit > 0 && len(pkgs) > opts.Limit {
		pkgs = pkgs[:opts.Limit]
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%w: no Go package under %s", ErrNoPages, src)
	}
	return pkgs, nil
}

// buildContext is the go/build context packages are read with: GOOS,
// GOARCH, cgo on, and no environment (GOPATH, GOFLAGS) of the machine.
func buildContext(opts GoDocOptions) build.Context {
	c := build.Default
	c.GOROOT = opts.GoRoot
	c.GOPATH = ""
	c.GOOS, c.GOARCH = opts.GOOS, opts.GOARCH
	c.CgoEnabled = true
	c.Dir = ""
	return c
}

// errNotAPackage marks a directory [RenderGoPackage] found nothing to
// document in (no file for GOOS/GOARCH, or a command).
var errNotAPackage = errors.New("not a package")

// RenderGoPackage renders one package's documentation as Markdown, as
// "go doc -all" shows it: the package clause and import line, the package
// comment, then constants, variables, functions and types (each type with
// its constants, variables, constructors and methods), every declaration a
// "###" heading ("### func Join", "### type Builder", "### func (b *Builder)
// String") over its Go source in a fenced block and its doc comment as
// paragraphs, one line each. Only exported identifiers are shown, except
// for package builtin, whose identifiers are all lower-case.
func RenderGoPackage(opts GoDocOptions, p GoPackage) (string, error) {
	if err := opts.defaults(); err != nil {
		return "", err
	}
	ctxt := buildContext(opts)
	bp, err := ctxt.ImportDir(p.Dir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return "", fmt.Errorf("%w: no Go files for %s/%s", errNotAPackage, opts.GOOS, opts.GOARCH)
		}
		return "", fmt.Errorf("read package: %w", err)
	}
	if bp.Name == "main" {
		return "", fmt.Errorf("%w: a command (package main)", errNotAPackage)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range append(slices.Clone(bp.GoFiles), bp.CgoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	var mode doc.Mode
	if p.ImportPath == "builtin" {
		mode = doc.AllDecls
	}
	pkg, err := doc.NewFromFiles(fset, files, p.ImportPath, mode)
	if err != nil {
		return "", fmt.Errorf("read documentation: %w", err)
	}
	r := goDocWriter{fset: fset, pkg: pkg}
	return r.write()
}

// goDocWriter writes one package's Markdown.
type goDocWriter struct {
	b    strings.Builder
	fset *token.FileSet
	pkg  *doc.Package
}

func (w *goDocWriter) write() (string, error) {
	p := w.pkg
	fmt.Fprintf(&w.b, "# package %s\n\n", p.Name)
	fmt.Fprintf(&w.b, "```go\nimport %q\n```\n", p.ImportPath)
	w.docText(p.Doc, "##")
	if len(p.Consts) > 0 {
		w.b.WriteString("\n## Constants\n")
		if err := w.values(p.Consts); err != nil {
			return "", err
		}
	}
	if len(p.Vars) > 0 {
		w.b.WriteString("\n## Variables\n")
		if err := w.values(p.Vars); err != nil {
			return "", err
		}
	}
	if len(p.Funcs) > 0 {
		w.b.WriteString("\n## Functions\n")
		if err := w.funcs(p.Funcs); err != nil {
			return "", err
		}
	}
	if len(p.Types) > 0 {
		w.b.WriteString("\n## Types\n")
		for _, t := range p.Types {
			fmt.Fprintf(&w.b, "\n### type %s\n", t.Name)
			if err := w.decl(t.Decl); err != nil {
				return "", err
			}
			w.docText(t.Doc, "####")
			if err := w.values(t.Consts); err != nil {
				return "", err
			}
			if err := w.values(t.Vars); err != nil {
				return "", err
			}
			if err := w.funcs(t.Funcs); err != nil {
				return "", err
			}
			if err := w.funcs(t.Methods); err != nil {
				return "", err
			}
		}
	}
	return w.b.String(), nil
}

// values writes const or var blocks: the source, then the comment, no
// heading of their own (a block declares several names).
func (w *goDocWriter) values(vs []*doc.Value) error {
	for _, v := range vs {
		if err := w.decl(v.Decl); err != nil {
			return err
		}
		w.docText(v.Doc, "####")
	}
	return nil
}

// funcs writes functions or methods, each under its own heading.
func (w *goDocWriter) funcs(fs []*doc.Func) error {
	for _, f := range fs {
		if f.Recv != "" {
			recv := f.Decl.Recv.List[0]
			name := ""
			if len(recv.Names) > 0 {
				name = recv.Names[0].Name + " "
			}
			fmt.Fprintf(&w.b, "\n### func (%s%s) %s\n", name, f.Recv, f.Name)
		} else {
			fmt.Fprintf(&w.b, "\n### func %s\n", f.Name)
		}
		if err := w.decl(f.Decl); err != nil {
			return err
		}
		w.docText(f.Doc, "####")
	}
	return nil
}

// goPrinter formats declarations as gofmt does.
var goPrinter = printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}

// decl writes a declaration's source in a fenced block, without its doc
// comment (written as text after it) but with the comments inside it.
func (w *goDocWriter) decl(n ast.Decl) error {
	switch d := n.(type) {
	case *ast.FuncDecl:
		d.Doc = nil
	case *ast.GenDecl:
		d.Doc = nil
	}
	// Only the comments the declaration's remaining fields, methods and
	// specs hold: those of filtered unexported ones go with them.
	var kept []*ast.CommentGroup
	ast.Inspect(n, func(x ast.Node) bool {
		if c, ok := x.(*ast.CommentGroup); ok {
			kept = append(kept, c)
		}
		return true
	})
	slices.SortFunc(kept, func(a, b *ast.CommentGroup) int { return cmp.Compare(a.Pos(), b.Pos()) })
	var buf bytes.Buffer
	if err := goPrinter.Fprint(&buf, w.fset, &printer.CommentedNode{Node: n, Comments: kept}); err != nil {
		return fmt.Errorf("print declaration: %w", err)
	}
	// The printer notes filtered fields and methods in its words, go doc's
	// are shorter; when the declaration keeps comments of its own, the
	// printer loses its note and leaves a blank line where it would be.
	src := strings.TrimRight(filteredNote.Replace(buf.String()), "\n")
	if note := incomplete(n); note != "" && !strings.Contains(src, note) {
		if body, ok := strings.CutSuffix(src, "\n}"); ok {
			src = strings.TrimRight(body, "\n") + "\n\t" + note + "\n}"
		}
	}
	fmt.Fprintf(&w.b, "\n```go\n%s\n```\n", src)
	return nil
}

// filteredNote rewrites go/printer's note on filtered fields and methods
// as go doc writes it.
var filteredNote = strings.NewReplacer(
	"// contains filtered or unexported fields", "// Has unexported fields.",
	"// contains filtered or unexported methods", "// Has unexported methods.")

// incomplete returns go doc's note for a declaration of one struct or
// interface type some of whose fields or methods were filtered out, else "".
func incomplete(n ast.Decl) string {
	g, ok := n.(*ast.GenDecl)
	if !ok || g.Tok != token.TYPE || len(g.Specs) != 1 {
		return ""
	}
	switch t := g.Specs[0].(*ast.TypeSpec).Type.(type) {
	case *ast.StructType:
		if t.Incomplete {
			return "// Has unexported fields."
		}
	case *ast.InterfaceType:
		if t.Incomplete {
			return "// Has unexported methods."
		}
	}
	return ""
}

// docText writes a doc comment: each paragraph on one line, lists as
// indented items, code in fenced blocks, headings at the given level.
func (w *goDocWriter) docText(text, heading string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	d := w.pkg.Parser().Parse(text)
	pr := w.pkg.Printer()
	pr.TextWidth = -1 // one line per paragraph
	for _, blk := range d.Content {
		w.b.WriteString("\n")
		switch b := blk.(type) {
		case *comment.Heading:
			one := pr.Text(&comment.Doc{Content: []comment.Block{&comment.Paragraph{Text: b.Text}}, Links: d.Links})
			fmt.Fprintf(&w.b, "%s %s\n", heading, strings.TrimSpace(string(one)))
		case *comment.Code:
			fmt.Fprintf(&w.b, "```\n%s\n```\n", strings.TrimRight(b.Text, "\n"))
		default:
			w.b.Write(pr.Text(&comment.Doc{Content: []comment.Block{blk}, Links: d.Links}))
		}
	}
}

// GoDocs renders every selected package into outDir/go/<import path>.md and
// writes outDir/go-manifest.json. A directory that is no package for
// GOOS/GOARCH, or a package that fails to render, is reported in the
// manifest's Skipped list and the run goes on; an error is returned only
// when the run itself cannot proceed.
func GoDocs(ctx context.Context, outDir string, opts GoDocOptions) (GoDocManifest, error) {
	if err := opts.defaults(); err != nil {
		return GoDocManifest{}, err
	}
	pkgs, err := selectGoPackages(opts)
	if err != nil {
		return GoDocManifest{}, err
	}
	if err := prepareOutDir(outDir, goDocsDir, GoDocManifestName, opts.Replace); err != nil {
		return GoDocManifest{}, err
	}
	m := GoDocManifest{
		Generator: "cordon-lab corpus godocs",
		GoRoot:    opts.GoRoot,
		GoVersion: goVersion(opts.GoRoot),
		Toolchain: runtime.Version(),
		GOOS:      opts.GOOS,
		GOARCH:    opts.GOARCH,
		Limit:     opts.Limit,
		MaxBytes:  opts.MaxBytes,
		Documents: []Written{},
		Skipped:   []Skipped{},
	}
	for _, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return GoDocManifest{}, err
		}
		skip := func(format string, args ...any) {
			m.Skipped = append(m.Skipped, Skipped{DocID: p.DocID, Source: p.Dir, Reason: fmt.Sprintf(format, args...)})
		}
		text, err := RenderGoPackage(opts, p)
		switch {
		case err != nil:
			skip("%v", err)
			continue
		case len(text) > opts.MaxBytes:
			skip("%d bytes of Markdown, more than the %d-byte limit", len(text), opts.MaxBytes)
			continue
		case !analysis.HasToken(text):
			skip("no token in the rendered text")
			continue
		}
		file := filepath.Join(outDir, filepath.FromSlash(p.DocID)+".md")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return GoDocManifest{}, fmt.Errorf("create %s: %w", filepath.Dir(file), err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			return GoDocManifest{}, fmt.Errorf("write %s: %w", p.DocID, err)
		}
		sum := sha256.Sum256([]byte(text))
		m.Documents = append(m.Documents, Written{DocID: p.DocID, Source: p.Dir, Bytes: len(text), SHA256: hex.EncodeToString(sum[:])})
	}
	if len(m.Documents) == 0 {
		return GoDocManifest{}, fmt.Errorf("%w: none of %d directories under %s rendered", ErrNoPages, len(pkgs), opts.GoRoot)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return GoDocManifest{}, fmt.Errorf("encode manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(outDir, GoDocManifestName), append(data, '\n'), 0o644); err != nil {
		return GoDocManifest{}, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

// goVersion is the first line of GoRoot/VERSION ("go1.26.8"), recorded in
// the manifest: another release documents the library differently.
func goVersion(goRoot string) string {
	b, err := os.ReadFile(filepath.Join(goRoot, "VERSION"))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(firstLine(string(b)))
}
