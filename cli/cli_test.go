package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/internal/cmdline"
)

// runCLIEnv runs the CLI with env as its environment.
func runCLIEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}, args)
	return code, out.String(), errb.String()
}

// A URL nothing listens on: connecting fails at once, without a database.
const deadURL = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"

// Flags before and after the arguments mean the same to every command.
func TestFlagsBeforeAndAfterArguments(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"migrate status, flag after", []string{"migrate", "status", "--database-url", deadURL}, ExitError, "database unavailable"},
		{"migrate status, flag before", []string{"migrate", "--database-url", deadURL, "status"}, ExitError, "database unavailable"},
		{"tenant create, flag before the action", []string{"tenant", "--database-url", deadURL, "create", "t1"}, ExitError, "database unavailable"},
		{"tenant create, flag last", []string{"tenant", "create", "t1", "--database-url", deadURL}, ExitError, "database unavailable"},
		{"replay, flag after the script", []string{"replay", "../testdata/replay/basic.json", "--store", "nosuch"}, ExitUsage, `unknown --store "nosuch"`},
		{"migrate down-to without version", []string{"migrate", "down-to", "--database-url", deadURL}, ExitUsage, "down-to needs a VERSION"},
		{"migrate unknown action", []string{"migrate", "sideways"}, ExitUsage, `unknown action "sideways"`},
		{"tenant without action", []string{"tenant", "--database-url", deadURL}, ExitUsage, "want a subcommand: create, reembed, set, distribute, drop, list, grant or revoke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLIEnv(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
		})
	}
}

// Every subcommand has its own help, printed without a database.
func TestSubcommandHelp(t *testing.T) {
	tests := [][]string{
		{"migrate", "up"}, {"migrate", "status"}, {"migrate", "down-to"},
		{"tenant", "create"}, {"tenant", "set"}, {"tenant", "drop"}, {"tenant", "list"}, {"tenant", "grant"}, {"tenant", "revoke"},
		{"audit", "verify"}, {"audit", "head"},
	}
	for _, path := range tests {
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			for _, args := range [][]string{append(slices.Clone(path), "--help"), append([]string{path[0], "-h"}, path[1:]...), append([]string{"help"}, path...)} {
				// A database URL in the environment must not be touched.
				code, out, stderr := runCLIEnv(t, map[string]string{"CORDON_DATABASE_URL": deadURL}, args...)
				if code != ExitOK || !strings.HasPrefix(out, "Usage: cordon "+name) || stderr != "" {
					t.Errorf("%q: got exit %d, stdout %q, stderr %q; want exit 0 and 'Usage: cordon %s'", args, code, out, stderr, name)
				}
			}
		})
	}
	code, out, _ := runCLIEnv(t, nil, "migrate", "status", "--help")
	if code != ExitOK || !strings.Contains(out, "--database-url") || !strings.Contains(out, "PGHOST") {
		t.Errorf("migrate status --help lists no flags or no PG* fallback:\n%s", out)
	}
}

func TestDatabaseURLResolution(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{"flag wins", "postgres://flag/db", map[string]string{"CORDON_DATABASE_URL": "postgres://env/db", "PGHOST": "h"}, "postgres://flag/db"},
		{"CORDON_DATABASE_URL next", "", map[string]string{"CORDON_DATABASE_URL": "postgres://env/db", "PGHOST": "h"}, "postgres://env/db"},
		{"PGHOST alone", "", map[string]string{"PGHOST": "h"}, cmdline.LibpqEnvURL},
		{"PGDATABASE alone", "", map[string]string{"PGDATABASE": "d"}, cmdline.LibpqEnvURL},
		{"nothing", "", map[string]string{"HOME": "/root"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Env{Getenv: func(k string) string { return tt.env[k] }}
			if got := cmdline.DatabaseURL(env, tt.flag); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := cmdline.NeedDatabaseURL(Env{Getenv: func(string) string { return "" }}, ""); err == nil || !strings.Contains(err.Error(), "PGHOST") {
		t.Errorf("no database: got %v, want an error naming PGHOST", err)
	}

	// What the resolved URL connects to: the PG* variables, as psql reads them.
	for k, v := range map[string]string{"PGHOST": "db.example.internal", "PGPORT": "6543", "PGUSER": "cordon_ops", "PGPASSWORD": "pw", "PGDATABASE": "cordon_prod", "PGSSLMODE": "disable"} {
		t.Setenv(k, v)
	}
	cfg, err := pgconn.ParseConfig(cmdline.DatabaseURL(Env{Getenv: os.Getenv}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "db.example.internal" || cfg.Port != 6543 || cfg.User != "cordon_ops" || cfg.Password != "pw" || cfg.Database != "cordon_prod" || cfg.TLSConfig != nil {
		t.Errorf("got host %s port %d user %s db %s tls %v; want the PG* variables", cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.TLSConfig != nil)
	}
}

// A command run with only PG* variables connects where they say.
func TestPGEnvFallbackReachesTheServer(t *testing.T) {
	for k, v := range map[string]string{"PGHOST": "127.0.0.1", "PGPORT": "1", "PGUSER": "nobody", "PGDATABASE": "none", "PGSSLMODE": "disable", "PGCONNECT_TIMEOUT": "2"} {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv}, []string{"migrate", "status"})
	if code != ExitError || !strings.Contains(errb.String(), "database unavailable") {
		t.Errorf("got exit %d, stderr %q; want a connection attempt to 127.0.0.1:1 (database unavailable)", code, errb.String())
	}
}

func TestReplayResetNeedsYes(t *testing.T) {
	code, _, stderr := runCLIEnv(t, map[string]string{"CORDON_DATABASE_URL": deadURL}, "replay", "--store", "postgres", "--reset", "../testdata/replay/basic.json")
	if code != ExitUsage || !strings.Contains(stderr, "add --yes") {
		t.Errorf("got exit %d, stderr %q; want exit 2 asking for --yes", code, stderr)
	}
	// With --yes it goes on to the database.
	code, _, stderr = runCLIEnv(t, map[string]string{"CORDON_DATABASE_URL": deadURL}, "replay", "--store", "postgres", "--reset", "--yes", "../testdata/replay/basic.json")
	if code != ExitError || !strings.Contains(stderr, "database unavailable") {
		t.Errorf("with --yes: got exit %d, stderr %q; want the database to be tried", code, stderr)
	}
}

func TestListFlag(t *testing.T) {
	var l cmdline.ListFlag
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(&l, "role", "")
	if err := fs.Parse([]string{"--role", "reader, writer", "--role", "admin", "--role", ","}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"reader", "writer", "admin"}; !slices.Equal(l, want) {
		t.Errorf("got %q, want %q", l, want)
	}
}

func TestCollectFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"README", "a.gz", "x.md", "y.txt", "sub/z.markdown", "sub/CHANGELOG.md", ".git/config.md", "img.png", "web/page.html"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("text"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		sel         ingestSelect
		wantIDs     []string
		wantSkipped string
	}{
		{"defaults", ingestSelect{}, []string{"sub/CHANGELOG", "sub/z.markdown", "web/page", "x", "y.txt"},
			"1 hidden folder, 2 not Markdown, HTML or text by name, 1 compressed"},
		{"include README", ingestSelect{include: []string{"README"}}, []string{"README", "sub/CHANGELOG", "sub/z.markdown", "web/page", "x", "y.txt"},
			"1 hidden folder, 1 compressed, 1 not Markdown, HTML or text by name"},
		{"exclude by name and by path", ingestSelect{exclude: []string{"CHANGELOG*", "sub/*.markdown"}}, []string{"web/page", "x", "y.txt"},
			"1 hidden folder, 2 not Markdown, HTML or text by name, 1 compressed, 2 excluded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, skipped, err := collectFiles([]string{dir}, tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, f := range files {
				ids = append(ids, f.docID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("got ids %q, want %q", ids, tt.wantIDs)
			}
			if got := skipSummary(skipped); got != tt.wantSkipped {
				t.Errorf("got skipped %q, want %q", got, tt.wantSkipped)
			}
		})
	}
	if _, _, err := collectFiles([]string{filepath.Join(dir, "README")}, ingestSelect{}); err != nil {
		t.Errorf("a file named as a PATH: %v", err)
	}
}

// ingest and corpus/eval agree on doc ids: the slash path without ".md"
// (or, for HTML, ".html" or ".htm").
func TestDocIDRule(t *testing.T) {
	tests := []struct{ rel, want string }{
		{"man/1/ls.md", "man/1/ls"},
		{"payments/holds.md", "payments/holds"},
		{"notes.txt", "notes.txt"},
		{"guide.markdown", "guide.markdown"},
		{"settlement window.txt", "settlement_window.txt"},
		{"guide/intro.html", "guide/intro"},
		{"guide/old.htm", "guide/old"},
		{"guide/INDEX.HTML", "guide/INDEX.HTML"},
		{"page.html.md", "page.html"},
	}
	for _, tt := range tests {
		if got := docIDFor(tt.rel); got != tt.want {
			t.Errorf("docIDFor(%q) = %q, want %q", tt.rel, got, tt.want)
		}
	}
}

func TestProgressNotATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 3, false)
	p.draw(1, false) // within lineEvery of the start: nothing
	p.draw(3, true)
	if got := b.String(); strings.Contains(got, "\r") || got != strings.TrimSuffix(got, "\n")+"\n" || strings.Count(got, "\n") != 1 ||
		!strings.HasPrefix(got, "ingest: 3/3 files (100%)") || !strings.Contains(got, "ETA") {
		t.Errorf("got %q, want one plain line without \\r", got)
	}
	p.tty = true
	b.Reset()
	p.draw(3, true)
	if !strings.HasPrefix(b.String(), "\r[") {
		t.Errorf("on a terminal: got %q, want a bar redrawn with \\r", b.String())
	}
}

// TestProgressFinalLineOnce: the last line is not printed again when the
// line before it already said the same (a slow last batch used to print
// "N/N files" twice); it is when something moved since.
func TestProgressFinalLineOnce(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 2, false)
	p.lineEvery = 0 // every draw may print
	p.draw(2, false)
	p.draw(2, true)
	if got := b.String(); strings.Count(got, "ingest: 2/2 files (100%)") != 1 || strings.Count(got, "\n") != 1 {
		t.Errorf("got %q, want the final line once", got)
	}
	b.Reset()
	p = newProgress(&b, 2, false)
	p.lineEvery = 0
	p.draw(1, false)
	p.draw(2, true)
	if got := b.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "ingest: 2/2 files (100%)") {
		t.Errorf("got %q, want a line for 1/2 and a final one for 2/2", got)
	}
}

// TestProgressChunks: while ingest embeds, each answered request may draw
// a line counting the chunks embedded of those handed to the model.
func TestProgressChunks(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, 4, false)
	p.lineEvery = 0
	p.draw(1, false)
	p.Begin(100)
	p.Embedded(32)
	p.Embedded(32)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "ingest: 1/4 files") || !strings.HasSuffix(lines[1], "chunks embedded 32/100") ||
		!strings.HasSuffix(lines[2], "chunks embedded 64/100") {
		t.Errorf("got %q, want a line per answered request with chunks embedded/total", lines)
	}
	p.Embedded(36)
	p.draw(4, true)
	lines = strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "ingest: 4/4 files (100%)") || !strings.HasSuffix(last, "chunks embedded 100/100") {
		t.Errorf("got %q, want a final line with every chunk embedded", last)
	}
}

// TestServingBinaryHasNoLab: the binary that serves links no lab package
// and not the plotting library (cordon-lab measures and draws the charts).
func TestServingBinaryHasNoLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/cordon-rag/cordon/cmd/cordon").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/cordon-rag/cordon/server") {
		t.Fatalf("go list -deps of cmd/cordon lacks the server package: %s", out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "gonum.org/v1/plot") || strings.HasPrefix(dep, "github.com/cordon-rag/cordon/lab/") {
			t.Errorf("cmd/cordon depends on %s", dep)
		}
	}
	// The same check sees the lab packages where they are linked.
	out, err = exec.Command("go", "list", "-deps", "github.com/cordon-rag/cordon/cmd/cordon-lab").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if deps := strings.Fields(string(out)); !slices.Contains(deps, "github.com/cordon-rag/cordon/lab/bench") || !slices.Contains(deps, "gonum.org/v1/plot") {
		t.Errorf("go list -deps of cmd/cordon-lab lacks lab/bench or gonum.org/v1/plot: %s", out)
	}
}

// The measuring commands moved to cordon-lab: cordon names where, and
// fails, and its help does not list them.
func TestMovedCommands(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"eval", "--corpus", "x"}, {"eval", "score", "--help"}, {"corpus", "manpages"}, {"help", "bench"}, {"--help", "corpus"}} {
		code, out, stderr := runCLIEnv(t, nil, args...)
		name := args[len(args)-1]
		if args[0] != "help" && args[0] != "--help" {
			name = args[0]
		}
		if want := "cordon " + name + ": moved: run cordon-lab " + name + "\n"; code != ExitUsage || out != "" || stderr != want {
			t.Errorf("%q: got exit %d, stdout %q, stderr %q; want exit %d and %q", args, code, out, stderr, ExitUsage, want)
		}
	}
	_, out, _ := runCLIEnv(t, nil, "--help")
	for _, name := range movedCommands {
		if strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("cordon --help lists %s:\n%s", name, out)
		}
	}
}

// Each tenant subcommand takes only its own flags, and its help lists only
// those; set without a flag changes nothing and says so.
func TestTenantSubcommandFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"set without a flag", []string{"tenant", "set", "legacy", "--database-url", deadURL}, ExitUsage, "set changes nothing without a flag: give --bm25-statistics"},
		{"list takes no --dims", []string{"tenant", "list", "--dims", "9", "--database-url", deadURL}, ExitUsage, "flag provided but not defined: -dims"},
		{"drop takes no --model", []string{"tenant", "drop", "--yes", "--model", "x", "t1", "--database-url", deadURL}, ExitUsage, "flag provided but not defined: -model"},
		{"set takes no --yes", []string{"tenant", "set", "--yes", "--bm25-statistics", "tenant", "t1", "--database-url", deadURL}, ExitUsage, "flag provided but not defined: -yes"},
		{"grant takes no --bm25-statistics", []string{"tenant", "grant", "--bm25-statistics", "tenant", "r", "--database-url", deadURL}, ExitUsage, "flag provided but not defined: -bm25-statistics"},
		{"create of an unknown model needs --dims", []string{"tenant", "create", "--model", "nomic-embed-text", "t1", "--database-url", deadURL}, ExitUsage, "--model nomic-embed-text needs --dims"},
		{"set with a flag reaches the database", []string{"tenant", "set", "--bm25-statistics", "tenant", "t1", "--database-url", deadURL}, ExitError, "database unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLIEnv(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
		})
	}

	create := []string{"-dims", "-model", "-k1", "-b ", "-max-words", "-overlap-words", "-bm25-statistics"}
	helps := []struct {
		sub        string
		want, deny []string
	}{
		{"create", create, []string{"-yes", "-json"}},
		{"set", []string{"-bm25-statistics"}, []string{"-dims", "-model", "-max-words", "-yes", "-json"}},
		{"drop", []string{"-yes"}, []string{"-dims", "-model", "-bm25-statistics", "-json"}},
		{"list", []string{"-json"}, []string{"-dims", "-model", "-bm25-statistics", "-yes"}},
		{"grant", nil, []string{"-dims", "-model", "-bm25-statistics", "-yes", "-json"}},
		{"revoke", nil, []string{"-dims", "-model", "-bm25-statistics", "-yes", "-json"}},
	}
	for _, h := range helps {
		t.Run("help "+h.sub, func(t *testing.T) {
			code, out, _ := runCLIEnv(t, nil, "tenant", h.sub, "--help")
			_, flags, _ := strings.Cut(out, "\nFlags:\n")
			if code != ExitOK || !strings.Contains(flags, "-database-url") {
				t.Fatalf("exit %d, no flag list:\n%s", code, out)
			}
			for _, f := range h.want {
				if !strings.Contains(flags, "  "+f) {
					t.Errorf("tenant %s --help lacks %s:\n%s", h.sub, f, flags)
				}
			}
			for _, f := range h.deny {
				if strings.Contains(flags, "  "+f) {
					t.Errorf("tenant %s --help lists %s, another subcommand's flag:\n%s", h.sub, f, flags)
				}
			}
		})
	}

	_, out, _ := runCLIEnv(t, nil, "tenant", "--help")
	if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, "reembed") {
		t.Errorf("tenant usage line leaves out reembed: %q", first)
	}
}

// Without --dims, a tenant's dimensions are its model's when the name fixes
// them; any other model must say.
func TestSettingsDimsFromModel(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"hash by default", nil, 256, ""},
		{"use-lite", []string{"--model", "use-lite"}, 512, ""},
		{"use-lite with --dims", []string{"--model", "use-lite", "--dims", "128"}, 128, ""},
		{"hash with --dims", []string{"--dims", "64"}, 64, ""},
		{"unknown model", []string{"--model", "text-embedding-3-small"}, 0, "needs --dims"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cmdline.Command{Name: "create"}
			fs := cmdline.NewFlagSet(c)
			settings := settingsFlags(fs)
			if err := cmdline.ParseFlags(fs, c, Env{}, tt.args); err != nil {
				t.Fatal(err)
			}
			s, err := settings()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error with %q", s, err, tt.wantErr)
				}
				return
			}
			if err != nil || s.Dims != tt.want {
				t.Fatalf("got dims %d, %v; want %d", s.Dims, err, tt.want)
			}
		})
	}
}

// A keyring file readable by others, or by a group that is not this
// process's, draws a warning; 0600, 0400 and the Kubernetes Secret volume's
// 0440 with the process's own group do not.
func TestAuditKeyFileWarning(t *testing.T) {
	tests := []struct {
		name      string
		mode      os.FileMode
		otherGid  bool
		wantWords string // "" for no warning
	}{
		{"owner only", 0o600, false, ""},
		{"owner read only", 0o400, false, ""},
		{"own group", 0o440, false, ""},
		{"others", 0o644, false, "readable by others"},
		{"others only", 0o604, false, "readable by others"},
		{"another group", 0o640, true, "readable by its group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "audit.keys")
			if err := os.WriteFile(p, []byte("k1 x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			if tt.otherGid {
				if err := os.Chown(p, -1, os.Getegid()+1); err != nil {
					t.Skipf("cannot give the file another group (%v): needs root", err)
				}
			}
			got := auditKeyFileWarning(p)
			if tt.wantWords == "" && got != "" || tt.wantWords != "" && !strings.Contains(got, tt.wantWords) {
				t.Fatalf("got %q, want %q", got, tt.wantWords)
			}
		})
	}
}

// An HTML file (by extension under --format auto, any file under --format
// html) is converted: the text stored and hashed is the converted text, and
// its <title> is the document's title.
func TestIngestReadHTML(t *testing.T) {
	dir := t.TempDir()
	page := "<title>Intro</title><nav>menu</nav><h2>Setup</h2><p>Run <code>make</code>.</p>"
	for name, text := range map[string]string{"intro.HTML": page, "notes.md": page, "untitled.htm": "<p>no title</p>", "bad.html": "<p>caf\xe9</p>"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		format, file, wantText, wantTitle string
	}{
		{"auto", "intro.HTML", "## Setup\n\nRun make.\n", "Intro"},
		{"auto", "untitled.htm", "no title\n", "untitled.htm"},
		{"auto", "notes.md", page, "notes.md"},
		{"html", "notes.md", "## Setup\n\nRun make.\n", "Intro"},
		{"text", "intro.HTML", page, "intro.HTML"},
		{"markdown", "intro.HTML", page, "intro.HTML"},
	}
	for _, tt := range tests {
		t.Run(tt.format+" "+tt.file, func(t *testing.T) {
			format, err := ingestFormat(tt.format)
			if err != nil {
				t.Fatal(err)
			}
			j := ingestJob{tenant: "docs", format: format}
			f := ingestFile{path: filepath.Join(dir, tt.file), docID: docIDFor(tt.file)}
			tally := &ingestTally{}
			doc, size, ok := j.read(context.Background(), f, nil, tally)
			if !ok || doc.Text != tt.wantText || doc.Title != tt.wantTitle || size != len(tt.wantText) {
				t.Fatalf("got %q title %q size %d ok %v (%v), want %q title %q", doc.Text, doc.Title, size, ok, tally.failures, tt.wantText, tt.wantTitle)
			}
			// Unchanged when the stored hash is the converted text's.
			sum := blake2b.Sum256([]byte(tt.wantText))
			if _, _, ok := j.read(context.Background(), f, map[string][]byte{f.docID: sum[:]}, tally); ok || tally.unchanged != 1 {
				t.Fatalf("a stored hash of the converted text: got put again (unchanged %d)", tally.unchanged)
			}
		})
	}
	format, _ := ingestFormat("auto")
	tally := &ingestTally{}
	if _, _, ok := (ingestJob{tenant: "docs", format: format}).read(context.Background(), ingestFile{path: filepath.Join(dir, "bad.html"), docID: "bad"}, nil, tally); ok ||
		len(tally.failures) != 1 || !strings.Contains(tally.failures[0].msg, "not valid UTF-8") {
		t.Fatalf("non-UTF-8 HTML: got ok %v, failures %v", ok, tally.failures)
	}
	// A page built to be slow to parse (list items 500 elements deep) is a
	// failure naming the file, found before parsing; a conversion whose
	// context ends is no failure of the file (the run stops as interrupted).
	deep := filepath.Join(dir, "deep.html")
	if err := os.WriteFile(deep, []byte(strings.Repeat("<ul><li>", 250)+strings.Repeat("<li>x", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	tally = &ingestTally{}
	if _, _, ok := (ingestJob{tenant: "docs", format: format}).read(context.Background(), ingestFile{path: deep, docID: "deep"}, nil, tally); ok ||
		len(tally.failures) != 1 || tally.failures[0].path != deep || !strings.Contains(tally.failures[0].msg, "units of parsing work") {
		t.Fatalf("hostile HTML: got ok %v, failures %v", ok, tally.failures)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tally = &ingestTally{}
	if _, _, ok := (ingestJob{tenant: "docs", format: format}).read(ctx, ingestFile{path: filepath.Join(dir, "intro.HTML"), docID: "intro"}, nil, tally); ok || len(tally.failures) != 0 {
		t.Fatalf("a done context: got ok %v, failures %v", ok, tally.failures)
	}
	if _, err := ingestFormat("pdf"); err == nil || !strings.Contains(err.Error(), "auto, markdown, html, text") {
		t.Fatalf("--format pdf: got %v", err)
	}
}
