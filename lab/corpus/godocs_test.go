package corpus

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeGoRoot builds a small Go installation:
//
//	src/greet/greet.go             a package: doc, const, var, func, type, method
//	src/greet/greet_test.go        a test file (not documented)
//	src/greet/internal/x/x.go      internal: left out
//	src/vendor/v/v.go              vendored: left out
//	src/cmd/tool/main.go           a command under cmd: left out
//	src/winonly/w_windows.go       no file for linux/amd64: skipped
//	src/runner/main.go             package main: skipped
//	src/testdata/t.go              test data: left out
func fakeGoRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"VERSION": "go1.99.1\ntime 2026-01-01\n",
		"src/greet/greet.go": `// Package greet makes greetings for people and for crowds of people.
//
// Greetings are built one word at a time. The builder never allocates more than it has to.
//
// # Crowds
//
// A crowd is greeted once, whatever its size.
package greet

// Version is the version of the greeting rules used throughout the package.
const Version = "1"

// Default is the greeting used when the caller names no person at all.
var Default = "hello"

// Hello returns a greeting for the named person in the default language. It returns the empty string for an empty name.
func Hello(name string) string { return Default + " " + name }

// A Builder assembles greetings word by word into one buffer. Its zero value is ready to use.
type Builder struct {
	// Words are the words so far.
	Words []string
	n     int
}

// NewBuilder returns a Builder that already holds the given opening word.
func NewBuilder(w string) *Builder { return &Builder{Words: []string{w}} }

// Add appends one word to the greeting under construction. Empty words are dropped silently without any error.
//
//	b.Add("hi")
func (b *Builder) Add(w string) { b.Words = append(b.Words, w) }

func unexported() {}
`,
		"src/greet/greet_test.go":       "package greet\n\nfunc TestX() {}\n",
		"src/greet/internal/x/x.go":     "// Package x is internal.\npackage x\n",
		"src/vendor/v/v.go":             "// Package v is vendored.\npackage v\n",
		"src/cmd/tool/main.go":          "// Tool is a command.\npackage main\n",
		"src/winonly/w_windows.go":      "// Package winonly is for Windows.\npackage winonly\n",
		"src/runner/main.go":            "// Runner runs.\npackage main\n\nfunc main() {}\n",
		"src/testdata/t.go":             "package testdata\n",
		"src/greet/README":              "not Go",
		"src/greet/.hidden/h.go":        "package h\n",
		"src/greet/_ignored/ignored.go": "package ignored\n",
	}
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// wantGreet is the rendering of fakeGoRoot's greet package.
const wantGreet = "# package greet\n\n```go\nimport \"greet\"\n```\n" +
	"\nPackage greet makes greetings for people and for crowds of people.\n" +
	"\nGreetings are built one word at a time. The builder never allocates more than it has to.\n" +
	"\n## Crowds\n" +
	"\nA crowd is greeted once, whatever its size.\n" +
	"\n## Constants\n\n```go\nconst Version = \"1\"\n```\n\nVersion is the version of the greeting rules used throughout the package.\n" +
	"\n## Variables\n\n```go\nvar Default = \"hello\"\n```\n\nDefault is the greeting used when the caller names no person at all.\n" +
	"\n## Functions\n\n### func Hello\n\n```go\nfunc Hello(name string) string\n```\n" +
	"\nHello returns a greeting for the named person in the default language. It returns the empty string for an empty name.\n" +
	"\n## Types\n\n### type Builder\n\n```go\ntype Builder struct {\n\t// Words are the words so far.\n\tWords []string\n\t// Has unexported fields.\n}\n```\n" +
	"\nA Builder assembles greetings word by word into one buffer. Its zero value is ready to use.\n" +
	"\n### func NewBuilder\n\n```go\nfunc NewBuilder(w string) *Builder\n```\n" +
	"\nNewBuilder returns a Builder that already holds the given opening word.\n" +
	"\n### func (b *Builder) Add\n\n```go\nfunc (b *Builder) Add(w string)\n```\n" +
	"\nAdd appends one word to the greeting under construction. Empty words are dropped silently without any error.\n" +
	"\n```\nb.Add(\"hi\")\n```\n"

func TestGoDocs(t *testing.T) {
	root := fakeGoRoot(t)
	out := t.TempDir()
	opts := GoDocOptions{GoRoot: root}
	m, err := GoDocs(context.Background(), out, opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids, skipped []string
	for _, d := range m.Documents {
		ids = append(ids, d.DocID)
	}
	for _, s := range m.Skipped {
		skipped = append(skipped, s.DocID+": "+s.Reason)
	}
	if want := []string{"go/greet"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("documents: got %v, want %v", ids, want)
	}
	wantSkipped := []string{"go/runner: not a package: a command (package main)", "go/winonly: not a package: no Go files for linux/amd64"}
	if !reflect.DeepEqual(skipped, wantSkipped) {
		t.Errorf("skipped: got %q, want %q", skipped, wantSkipped)
	}
	if m.GoVersion != "go1.99.1" || m.GOOS != "linux" || m.GOARCH != "amd64" || m.Toolchain != runtime.Version() {
		t.Errorf("manifest: got %s %s/%s toolchain %s, want go1.99.1 linux/amd64 toolchain %s", m.GoVersion, m.GOOS, m.GOARCH, m.Toolchain, runtime.Version())
	}
	got, err := os.ReadFile(filepath.Join(out, "go/greet.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantGreet {
		t.Errorf("greet.md:\ngot  %q\nwant %q", got, wantGreet)
	}
	docs, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].ID != "go/greet" || docs[0].Text != wantGreet {
		t.Errorf("load: got %+v", docs)
	}
	manifest, err := os.ReadFile(filepath.Join(out, GoDocManifestName))
	if err != nil {
		t.Fatal(err)
	}

	// A second run is refused, then with Replace writes the same bytes.
	if _, err := GoDocs(context.Background(), out, opts); !errors.Is(err, ErrOutputNotEmpty) {
		t.Errorf("second run: got %v, want ErrOutputNotEmpty", err)
	}
	opts.Replace = true
	if _, err := GoDocs(context.Background(), out, opts); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(out, GoDocManifestName))
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(out, "go/greet.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, manifest) || !bytes.Equal(text, got) {
		t.Errorf("a second run wrote different files")
	}

	// The man-page genre's files in the same directory are not in the way.
	if _, err := os.Stat(filepath.Join(out, ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("godocs wrote the man pages' manifest: %v", err)
	}
}

func TestSelectGoPackages(t *testing.T) {
	root := fakeGoRoot(t)
	pkgs, err := SelectGoPackages(GoDocOptions{GoRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pkgs {
		ips = append(ips, p.ImportPath)
	}
	if want := []string{"greet", "runner", "winonly"}; !reflect.DeepEqual(ips, want) {
		t.Errorf("got %v, want %v", ips, want)
	}
	pkgs, err = SelectGoPackages(GoDocOptions{GoRoot: root, Limit: 1})
	if err != nil || len(pkgs) != 1 || pkgs[0].DocID != "go/greet" {
		t.Errorf("limit 1: got %+v, %v", pkgs, err)
	}
	tests := []struct {
		name string
		opts GoDocOptions
		want error
	}{
		{"no src", GoDocOptions{GoRoot: t.TempDir()}, ErrNoPages},
		{"negative limit", GoDocOptions{GoRoot: root, Limit: -1}, ErrInvalidOptions},
		{"negative max bytes", GoDocOptions{GoRoot: root, MaxBytes: -1}, ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := SelectGoPackages(tt.opts); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestGoDocPassages(t *testing.T) {
	p := goDocPassages(wantGreet)
	texts := func(ps []passage) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.text)
		}
		return out
	}
	wantSummary := []string{
		"Hello returns a greeting for the named person in the default language.",
		"A Builder assembles greetings word by word into one buffer.",
		"NewBuilder returns a Builder that already holds the given opening word.",
		"Add appends one word to the greeting under construction.",
	}
	wantSignature := []string{"func Hello(name string) string", "func NewBuilder(w string) *Builder", "func (b *Builder) Add(w string)"}
	// Never a declaration's first sentence; the package's and the
	// constant's and variable's sentences are candidates; "Its zero value is
	// ready to use." has 6 tokens, "A crowd ..." too.
	wantHeldout := []string{
		"Package greet makes greetings for people and for crowds of people.",
		"Greetings are built one word at a time.",
		"The builder never allocates more than it has to.",
		"A crowd is greeted once, whatever its size.",
		"Version is the version of the greeting rules used throughout the package.",
		"Default is the greeting used when the caller names no person at all.",
		"It returns the empty string for an empty name.",
		"Its zero value is ready to use.",
		"Empty words are dropped silently without any error.",
	}
	for _, c := range []struct {
		kind      string
		got, want []string
	}{{"summary", texts(p.summary), wantSummary}, {"signature", texts(p.signature), wantSignature}, {"heldout", texts(p.heldout), wantHeldout}} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s:\ngot  %q\nwant %q", c.kind, c.got, c.want)
		}
	}
	// A sentence that occurs twice in a document is no held-out candidate:
	// cutting one copy would leave the other in the index.
	twice := wantGreet + "\nThe builder never allocates more than it has to.\n"
	if slices.Contains(texts(goDocPassages(twice).heldout), "The builder never allocates more than it has to.") {
		t.Error("a sentence occurring twice is a held-out candidate")
	}
}

func TestSpread(t *testing.T) {
	docs := []Doc{{ID: "go/a"}, {ID: "go/b"}, {ID: "go/c"}}
	mk := func(n int) []passage {
		var ps []passage
		for i := range n {
			ps = append(ps, passage{text: strings.Repeat("x", i+1)})
		}
		return ps
	}
	cands := [][]passage{mk(5), mk(1), mk(3)}
	tests := []struct {
		total int
		want  []int // chosen per document
	}{
		{3, []int{1, 1, 1}},
		{5, []int{2, 1, 2}},
		{7, []int{3, 1, 3}},
		{100, []int{5, 1, 3}},
	}
	for _, tt := range tests {
		got := spread(docs, cands, KindSummary, tt.total)
		var n []int
		for i, idx := range got {
			n = append(n, len(idx))
			if !slices.IsSorted(idx) || len(slices.Compact(slices.Clone(idx))) != len(idx) || len(idx) > 0 && idx[len(idx)-1] >= len(cands[i]) {
				t.Errorf("total %d, %s: indexes %v not distinct, sorted and in range", tt.total, docs[i].ID, idx)
			}
		}
		if !reflect.DeepEqual(n, tt.want) {
			t.Errorf("total %d: got %v per document, want %v", tt.total, n, tt.want)
		}
		if !reflect.DeepEqual(got, spread(docs, cands, KindSummary, tt.total)) {
			t.Errorf("total %d: not deterministic", tt.total)
		}
	}
}

// checkGoQueries asserts what every Go query must be: its passage in its
// one relevant document (and, for verbatim kinds, in no other), a held-out
// passage once in its document and gone once cut, ids unique.
func checkGoQueries(t *testing.T, docs []Doc, qs []Query) {
	t.Helper()
	text := make(map[string]string, len(docs))
	for _, d := range docs {
		text[d.ID] = d.Text
	}
	ids := make(map[string]bool)
	cut := make(map[string]string)
	for _, q := range qs {
		if ids[q.ID] {
			t.Errorf("%s: id used twice", q.ID)
		}
		ids[q.ID] = true
		if len(q.Relevant) != 1 || q.Split != SplitOf(q.Relevant[0]) || !strings.HasPrefix(q.ID, string(q.Kind)+":"+q.Relevant[0]+"#") {
			t.Errorf("%+v: relevant, split or id wrong", q)
			continue
		}
		doc := q.Relevant[0]
		switch q.Kind {
		case KindDocHeldout:
			if strings.Count(text[doc], q.Remove) != 1 || strings.Join(strings.Fields(q.Remove), " ") != q.Query {
				t.Errorf("%s: remove %q is not once in %s, or not the query", q.ID, q.Remove, doc)
			}
			if cut[doc] == "" {
				cut[doc] = text[doc]
			}
			cut[doc] = strings.Replace(cut[doc], q.Remove, "", 1)
		case KindSummary, KindSignature:
			if q.Remove != "" {
				t.Errorf("%s: a verbatim query removes %q", q.ID, q.Remove)
			}
			if !strings.Contains(text[doc], q.Query) {
				t.Errorf("%s: %q is not in %s", q.ID, q.Query, doc)
			}
			for _, d := range docs {
				if d.ID != doc && strings.Contains(d.Text, q.Query) {
					t.Errorf("%s: %q is also in %s, but only %s is relevant", q.ID, q.Query, d.ID, doc)
				}
			}
		default:
			t.Errorf("%s: kind %q is no Go kind", q.ID, q.Kind)
		}
	}
	// Once every held-out passage is cut, as the evaluation does, none is
	// left in the indexed text.
	for _, q := range qs {
		if q.Kind == KindDocHeldout && strings.Contains(cut[q.Relevant[0]], q.Remove) {
			t.Errorf("%s: %q still in %s after the cut", q.ID, q.Remove, q.Relevant[0])
		}
	}
}

func TestGoQueries(t *testing.T) {
	root := fakeGoRoot(t)
	// A second package sharing one sentence with greet: that sentence is
	// no candidate of either.
	other := filepath.Join(root, "src/farewell/farewell.go")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "// Package farewell says goodbye to people who are leaving now.\npackage farewell\n\n" +
		"// Bye returns a farewell for the named person in the default language. It returns the empty string for an empty name.\nfunc Bye(name string) string { return name }\n"
	if err := os.WriteFile(other, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := GoDocs(context.Background(), out, GoDocOptions{GoRoot: root}); err != nil {
		t.Fatal(err)
	}
	docs, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	qs, skips := Queries(docs, GoKinds)
	again, _ := Queries(docs, GoKinds)
	if !reflect.DeepEqual(qs, again) {
		t.Fatal("Queries is not deterministic")
	}
	checkGoQueries(t, docs, qs)
	per := make(map[string]int)
	for _, q := range qs {
		per[string(q.Kind)+" "+q.Relevant[0]]++
		if q.Query == "It returns the empty string for an empty name." {
			t.Errorf("%s: a sentence two packages share is a query", q.ID)
		}
	}
	// Every candidate is taken when there are fewer than GoQueriesPerKind.
	want := map[string]int{
		"summary go/farewell": 1, "summary go/greet": 4,
		"signature go/farewell": 1, "signature go/greet": 3,
		"docheldout go/farewell": 1, "docheldout go/greet": 8,
	}
	if !reflect.DeepEqual(per, want) {
		t.Errorf("queries per kind and document: got %v, want %v", per, want)
	}
	if len(skips) != 0 {
		t.Errorf("skips: got %+v, want none", skips)
	}
	// Man-page kinds are unchanged by the Go kinds: none of them is made
	// unless asked for.
	for _, q := range mustQueries(Queries(docs, nil)) {
		if slices.Contains(GoKinds, q.Kind) {
			t.Errorf("Queries(docs, nil) made a Go query %s", q.ID)
		}
	}
	for _, k := range GoKinds {
		if got, err := ParseKind(string(k)); err != nil || got != k {
			t.Errorf("ParseKind(%s): got %v, %v", k, got, err)
		}
	}
}

func mustQueries(qs []Query, _ []QuerySkip) []Query { return qs }

// TestGoDocsRealGoRoot renders the installed standard library, the path
// every corpus run takes, and checks its queries.
func TestGoDocsRealGoRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DefaultGoRoot, "src/strings/strings.go")); err != nil {
		t.Skipf("SKIP: no Go installation at %s; the Go-docs corpus cannot be built on this machine", DefaultGoRoot)
	}
	if testing.Short() {
		t.Skip("SKIP: -short: renders the whole standard library (about a second)")
	}
	out := t.TempDir()
	m, err := GoDocs(context.Background(), out, GoDocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Documents) < 150 {
		t.Errorf("got %d packages, want the standard library's 150 or more", len(m.Documents))
	}
	for _, d := range m.Documents {
		if strings.Contains(d.DocID, "/internal/") || strings.HasPrefix(d.DocID, "go/cmd/") || strings.HasPrefix(d.DocID, "go/vendor/") {
			t.Errorf("%s is not public API", d.DocID)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "go/strings.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# package strings\n", "\n## Functions\n", "\n### func Clone\n\n```go\nfunc Clone(s string) string\n```\n\nClone returns a fresh copy of s.", "\n### func (b *Builder) String\n"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("strings.md lacks %q", want)
		}
	}
	docs, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	qs, _ := Queries(docs, GoKinds)
	n := make(map[Kind]int)
	for _, q := range qs {
		n[q.Kind]++
	}
	for _, k := range GoKinds {
		if n[k] != GoQueriesPerKind {
			t.Errorf("%s: got %d queries, want %d", k, n[k], GoQueriesPerKind)
		}
	}
	checkGoQueries(t, docs, qs)
}
