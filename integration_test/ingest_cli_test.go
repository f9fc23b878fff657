package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/store/postgres"
)

// ingestTree writes files (relative path -> text) under a fresh folder.
func ingestTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, text := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// storedIDs are the tenant's doc ids, sorted.
func storedIDs(t *testing.T, dbURL, tenant string) []string {
	t.Helper()
	st, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.DocumentHashes(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range h {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestIngestCLISkipsIncludesExcludes: ingest says what it left out and why,
// --include and --exclude change that, and without a terminal the progress
// is plain lines.
func TestIngestCLISkipsIncludesExcludes(t *testing.T) {
	dbURL := newDatabase(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	if code, _, errs := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	if code, _, errs := runCLI(t, env, "tenant", "create", "docs"); code != 0 {
		t.Fatalf("tenant create: %s", errs)
	}
	dir := ingestTree(t, map[string]string{"README": "Read me first.", "a.gz": "\x1f\x8b binary", "x.md": "# X\nMarkdown text.", "y.txt": "Plain text."})

	code, out, errs := runCLI(t, env, "ingest", "--tenant", "docs", dir, "-v")
	if code != 0 || !strings.Contains(out, "ingested 2, unchanged 0, failed 0 of 2 files into tenant docs") ||
		!strings.Contains(out, "skipped 2: 1 not Markdown, HTML or text by name, 1 compressed:") ||
		!strings.Contains(out, "SKIPPED "+filepath.Join(dir, "README")+": no extension; --include 'README' takes it") ||
		!strings.Contains(out, "SKIPPED "+filepath.Join(dir, "a.gz")+": compressed (.gz)") {
		t.Fatalf("ingest -v: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(errs, "\r") || !strings.Contains(errs, "ingest: 2/2 files (100%)") {
		t.Fatalf("progress without a terminal: got %q, want plain lines", errs)
	}
	if got, want := storedIDs(t, dbURL, "docs"), []string{"x", "y.txt"}; !slices.Equal(got, want) {
		t.Fatalf("doc ids: got %q, want %q (.md dropped, as corpus and eval do)", got, want)
	}

	code, out, errs = runCLI(t, env, "ingest", "--tenant", "docs", "--include", "README", "--exclude", "y.*", dir)
	if code != 0 || !strings.Contains(out, "ingested 1, unchanged 1, failed 0 of 2 files") ||
		!strings.Contains(out, "skipped 2: 1 compressed, 1 excluded (-v lists them)") || strings.Contains(out, "SKIPPED") {
		t.Fatalf("ingest --include --exclude: exit %d\n%s\n%s", code, out, errs)
	}
	if got, want := storedIDs(t, dbURL, "docs"), []string{"README", "x", "y.txt"}; !slices.Equal(got, want) {
		t.Fatalf("doc ids: got %q, want %q", got, want)
	}
	if code, _, errs := runCLI(t, env, "ingest", "--tenant", "docs", "--include", "[", dir); code != 2 || !strings.Contains(errs, "bad glob pattern") {
		t.Fatalf("bad pattern: exit %d %s", code, errs)
	}
}

// TestIngestCLIBatches: files go in parallel batches; a bad file fails
// alone, not its batch, through the store and over HTTP.
func TestIngestCLIBatches(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	admin := tok(t, "root", "admin")
	for _, tn := range []string{"viadb", "viahttp"} {
		a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": tn}), http.StatusCreated)
	}
	files := map[string]string{"bad.md": "caf\xe9 latin-1", "notes/README": "not taken"}
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("d/%02d", i)
		files[id+".md"] = fmt.Sprintf("# Doc %d\nBody of document %d about settlement.", i, i)
		want = append(want, id)
	}
	dir := ingestTree(t, files)

	tests := []struct {
		name, tenant string
		env          map[string]string
		args         []string
	}{
		{"store", "viadb", map[string]string{"CORDON_DATABASE_URL": a.dbURL}, nil},
		{"http", "viahttp", map[string]string{"CORDON_TOKEN": tok(t, "bot", "tenant=viahttp", "writer")}, []string{"--server", a.url}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"ingest", "--tenant", tt.tenant, "--batch", "4", "--workers", "3", "--as-of-tick", "100"}, tt.args...)
			code, out, errs := runCLI(t, tt.env, append(args, dir)...)
			if code != 1 || !strings.Contains(out, "ingested 23, unchanged 0, failed 1 of 24 files into tenant "+tt.tenant) ||
				!strings.Contains(out, "FAILED "+filepath.Join(dir, "bad.md")) || !strings.Contains(out, "skipped 1: 1 not Markdown, HTML or text by name") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
			if got := storedIDs(t, a.dbURL, tt.tenant); !slices.Equal(got, want) {
				t.Fatalf("doc ids: got %q, want %q", got, want)
			}
		})
	}

	// The same documents either way: text, classification, tick, title and
	// source path.
	conn, err := pgx.Connect(context.Background(), a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows [2]string
	for i, tn := range []string{"viadb", "viahttp"} {
		q := `SELECT string_agg(concat_ws('|', doc_id, classification, barriers::text, as_of_tick, title, metadata->>'source_path', md5(text)), E'\n' ORDER BY doc_id) FROM cordon_t_` + tn + `.documents`
		if err := conn.QueryRow(context.Background(), q).Scan(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if rows[0] != rows[1] || !strings.Contains(rows[0], "d/00|1|{}|100|00.md|"+filepath.ToSlash(filepath.Join(dir, "d/00.md"))+"|") {
		t.Errorf("store and HTTP ingest differ or miss fields:\n%s\n---\n%s", rows[0], rows[1])
	}

	// Over HTTP a token without the writer role stops the ingest.
	code, out, errs := runCLI(t, map[string]string{"CORDON_TOKEN": tok(t, "r", "tenant=viahttp", "reader")}, "ingest", "--server", a.url, dir)
	if code != 1 || !strings.Contains(errs, "403") || !strings.Contains(errs, "re-run to resume") {
		t.Fatalf("reader token: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestReadmeBatchExample: the README's documents:batch command posts
// examples/docs.ndjson, and every line of it is stored.
func TestReadmeBatchExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "--data-binary @examples/docs.ndjson") {
		t.Fatal("the README no longer posts examples/docs.ndjson")
	}
	body, err := os.ReadFile("../examples/docs.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	a := startAPIServer(t, serverOpts{})
	a.want(t, a.call(t, "POST", "/v1/tenants", tok(t, "root", "admin"), map[string]string{"tenant": "wholesale"}), http.StatusCreated)
	r := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/documents:batch", tok(t, "w", "tenant=wholesale", "writer"), body, "application/x-ndjson"), http.StatusOK)
	if m := r.json(t); m["succeeded"] != float64(2) || m["failed"] != float64(0) {
		t.Fatalf("got %v, want 2 succeeded, 0 failed", m)
	}
}

// TestReadmeServiceExample: the README's "Running the service" block runs
// as written on a fresh machine: its database is the one `make db/start`
// creates, exported before anything uses it (not a URL no step creates),
// every example file it names exists, its audit keyring is written outside
// the repository, and it removes the database at the end. (The block itself
// was run top to bottom against a throwaway cluster when it last changed.)
func TestReadmeServiceExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Running the service\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`no sh block under "## Running the service" in the README`)
	}
	first := func(substr string) int {
		for i, line := range strings.Split(block, "\n") {
			if strings.Contains(line, substr) {
				return i
			}
		}
		return -1
	}
	db, serve := first("export CORDON_DATABASE_URL=$(make -s db/start)"), first("./cordon serve")
	if db < 0 || serve < 0 || db > serve {
		t.Errorf("the block must export CORDON_DATABASE_URL=$(make -s db/start) before ./cordon serve (lines %d, %d)", db, serve)
	}
	if n := strings.Count(block, "export CORDON_DATABASE_URL="); n != 1 {
		t.Errorf("the block exports CORDON_DATABASE_URL %d times, want once (from make db/start)", n)
	}
	if first("make db/stop") < serve {
		t.Error("the block does not end with make db/stop")
	}
	for _, p := range regexp.MustCompile(`examples/[^\s'"]+`).FindAllString(block, -1) {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("the block names %s: %v", p, err)
		}
	}
	if m := regexp.MustCompile(`>\s*[^\s~$/)]*\.keys`).FindString(block); m != "" {
		t.Errorf("the block writes a keyring into the working directory (%q), want a path outside the repository", m)
	}
}

// TestIngestCLIModelTenantAndJSON: a tenant created with --model use-lite
// and no --dims records the model's 512; ingesting into it without an
// embedding server stops before the first batch with one error naming
// 'cordon ingest --embed-url ...' (not one per file naming 'cordon serve');
// tenant list and ingest print JSON with --json.
func TestIngestCLIModelTenantAndJSON(t *testing.T) {
	dbURL := migrated(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("cordon %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out, errs
	}
	run(0, "tenant", "create", "--model", "use-lite", "emb")
	run(0, "tenant", "create", "plain")
	out, _ := run(0, "tenant", "list", "--json")
	var list struct {
		Tenants []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
			Dims  int    `json:"dims"`
		} `json:"tenants"`
		ServiceRoles []string `json:"service_roles"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("tenant list --json: %v\n%s", err, out)
	}
	got := fmt.Sprint(list.Tenants)
	if got != "[{emb use-lite 512} {plain hash 256}]" || list.ServiceRoles == nil {
		t.Fatalf("tenant list --json: tenants %s, service roles %v", got, list.ServiceRoles)
	}

	files := map[string]string{"bad.md": "caf\xe9 latin-1", "notes/README": "not taken"}
	for i := range 50 {
		files[fmt.Sprintf("d/%02d.md", i)] = fmt.Sprintf("# Doc %d\nsettlement window %d", i, i)
	}
	dir := ingestTree(t, files)

	out, errs := run(2, "ingest", "--tenant", "emb", "--batch", "1", "--quiet", dir)
	if strings.Count(errs, "embeds with") != 1 || !strings.Contains(errs, "cordon ingest --embed-url URL --embed-model use-lite --embed-dims 512") ||
		strings.Contains(errs, "cordon serve") || strings.Contains(out, "FAILED") {
		t.Fatalf("ingest without an embedding server:\nstdout %s\nstderr %s", out, errs)
	}
	if ids := storedIDs(t, dbURL, "emb"); len(ids) != 0 {
		t.Fatalf("stored %d documents", len(ids))
	}

	out, _ = run(1, "ingest", "--tenant", "plain", "--json", "--quiet", dir)
	var sum struct {
		Tenant    string         `json:"tenant"`
		Files     int            `json:"files"`
		Ingested  int            `json:"ingested"`
		Unchanged int            `json:"unchanged"`
		Failed    int            `json:"failed"`
		Skipped   int            `json:"skipped"`
		SkippedBy map[string]int `json:"skipped_by_reason"`
		Failures  []struct {
			Path   string `json:"path"`
			Reason string `json:"reason"`
		} `json:"failures"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("ingest --json: %v\n%s", err, out)
	}
	if sum.Tenant != "plain" || sum.Files != 51 || sum.Ingested != 50 || sum.Failed != 1 || sum.Skipped != 1 ||
		sum.SkippedBy["not Markdown, HTML or text by name"] != 1 || len(sum.Failures) != 1 || sum.Failures[0].Path != filepath.Join(dir, "bad.md") {
		t.Fatalf("ingest --json: %+v", sum)
	}
	out, _ = run(0, "ingest", "--tenant", "plain", "--json", "--quiet", "--exclude", "bad.md", dir)
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Unchanged != 50 || sum.Ingested != 0 || sum.Failed != 0 {
		t.Fatalf("ingest --json again: %v %+v", err, sum)
	}
}

// 'cordon ingest' into a model tenant reports the chunks embedded on
// stderr, and prints its last progress line once.
func TestIngestCLIEmbeddingProgress(t *testing.T) {
	dbURL := migrated(t)
	env := map[string]string{"CORDON_DATABASE_URL": dbURL}
	toy := &embedtest.Toy{Dims: 32}
	srv := httptest.NewServer(embedtest.Handler("toy-32", toy, 0))
	t.Cleanup(srv.Close)
	if code, out, errs := runCLI(t, env, "tenant", "create", "--model", "toy-32", "--dims", "32", "emb"); code != 0 {
		t.Fatalf("tenant create: exit %d\n%s\n%s", code, out, errs)
	}
	files := map[string]string{}
	for i := range 5 {
		files[fmt.Sprintf("d/%02d.md", i)] = fmt.Sprintf("# Doc %d\nsettlement window %d", i, i)
	}
	dir := ingestTree(t, files)
	code, out, errs := runCLI(t, env, "ingest", "--tenant", "emb", "--batch", "2", "--workers", "1",
		"--embed-url", srv.URL, "--embed-api", "openai", "--embed-model", "toy-32", "--embed-dims", "32", "--embed-batch", "1", dir)
	if code != 0 {
		t.Fatalf("ingest: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Count(errs, "ingest: 5/5 files (100%)") != 1 {
		t.Fatalf("stderr %q: want the last line once", errs)
	}
	m := regexp.MustCompile(`ingest: 5/5 files \(100%\).*  chunks embedded (\d+)/(\d+)\n`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("stderr %q: want a last line with the chunks embedded", errs)
	}
	if n, _ := strconv.Atoi(m[1]); m[1] != m[2] || n < 5 {
		t.Fatalf("stderr %q: want a last line with every chunk (at least 5) embedded", errs)
	}
}

// TestIngestCLIHTML: ingest converts .html and .htm files, into the
// database and over HTTP alike: ids without the extension, the <title> as
// title, the converted text stored, and a retrieve cites a chunk in the
// section of its h2.
func TestIngestCLIHTML(t *testing.T) {
	a := startAPIServer(t, serverOpts{})
	admin := tok(t, "root", "admin")
	for _, tn := range []string{"viadb", "viahttp"} {
		a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": tn}), http.StatusCreated)
	}
	dir := ingestTree(t, map[string]string{
		"guide/intro.html": `<!doctype html><html><head><title>Settlement guide</title><script>track("scriptword")</script></head>
<body><nav><a href="/">Home</a> navword</nav><header>Bank portal</header>
<main><h1>Settlement</h1><p>Intro to the netting window.</p>
<h2>Holds &amp; releases</h2><p>A PMT-771 hold needs dual approval before its release.</p>
<pre><code class="language-sh"># release the hold
cordon release PMT-771</code></pre></main><footer>Copyright</footer></body></html>`,
		"guide/old.htm": "<p>No title here, about clearing.</p>",
		"notes.md":      "# Notes\nPlain Markdown about custody.",
	})
	tests := []struct {
		name, tenant string
		env          map[string]string
		args         []string
	}{
		{"store", "viadb", map[string]string{"CORDON_DATABASE_URL": a.dbURL}, nil},
		{"http", "viahttp", map[string]string{"CORDON_TOKEN": tok(t, "bot", "tenant=viahttp", "writer")}, []string{"--server", a.url}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"ingest", "--tenant", tt.tenant, "--as-of-tick", "100", "--quiet"}, tt.args...)
			code, out, errs := runCLI(t, tt.env, append(args, dir)...)
			if code != 0 || !strings.Contains(out, "ingested 3, unchanged 0, failed 0 of 3 files into tenant "+tt.tenant) {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
			if got, want := storedIDs(t, a.dbURL, tt.tenant), []string{"guide/intro", "guide/old", "notes"}; !slices.Equal(got, want) {
				t.Fatalf("doc ids: got %q, want %q", got, want)
			}
			reader := tok(t, "r", "tenant="+tt.tenant, "clearance=internal", "reader")
			m := a.want(t, a.call(t, "POST", "/v1/tenants/"+tt.tenant+"/retrieve", reader,
				map[string]any{"query": "PMT-771 hold dual approval", "now_tick": 200}), http.StatusOK).json(t)
			rs, _ := m["results"].([]any)
			if len(rs) == 0 {
				t.Fatalf("no results: %v", m)
			}
			top := rs[0].(map[string]any)
			if top["doc_id"] != "guide/intro" || top["section"] != "Holds & releases" || !strings.Contains(top["text"].(string), "PMT-771 hold") {
				t.Fatalf("top result %v: want guide/intro in the section of its h2, \"Holds & releases\"", top)
			}
		})
	}

	// The same documents either way; titles from <title>, else the file's
	// name; no tag, script, navigation or page chrome in the text.
	conn, err := pgx.Connect(context.Background(), a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows [2]string
	for i, tn := range []string{"viadb", "viahttp"} {
		q := `SELECT string_agg(concat_ws('|', doc_id, title, text), E'\n---\n' ORDER BY doc_id) FROM cordon_t_` + tn + `.documents`
		if err := conn.QueryRow(context.Background(), q).Scan(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	want := "guide/intro|Settlement guide|# Settlement\n\nIntro to the netting window.\n\n## Holds & releases\n\n" +
		"A PMT-771 hold needs dual approval before its release.\n\n```sh\n# release the hold\ncordon release PMT-771\n```\n" +
		"\n---\nguide/old|old.htm|No title here, about clearing.\n" +
		"\n---\nnotes|notes.md|# Notes\nPlain Markdown about custody."
	if rows[0] != want || rows[1] != want {
		t.Errorf("stored documents:\n%s\n---- over HTTP:\n%s\n---- want:\n%s", rows[0], rows[1], want)
	}

	// Re-running against the database finds the converted text unchanged.
	code, out, errs := runCLI(t, map[string]string{"CORDON_DATABASE_URL": a.dbURL}, "ingest", "--tenant", "viadb", "--quiet", dir)
	if code != 0 || !strings.Contains(out, "ingested 0, unchanged 3, failed 0 of 3 files") {
		t.Fatalf("re-run: exit %d\n%s\n%s", code, out, errs)
	}
	// --format text takes the page as it is (tags and all).
	code, out, errs = runCLI(t, map[string]string{"CORDON_DATABASE_URL": a.dbURL}, "ingest", "--tenant", "viadb", "--quiet", "--format", "text",
		filepath.Join(dir, "guide", "intro.html"))
	if code != 0 || !strings.Contains(out, "ingested 1,") {
		t.Fatalf("--format text: exit %d\n%s\n%s", code, out, errs)
	}
	var text string
	if err := conn.QueryRow(context.Background(), `SELECT text FROM cordon_t_viadb.documents WHERE doc_id = 'intro'`).Scan(&text); err != nil || !strings.HasPrefix(text, "<!doctype html>") {
		t.Fatalf("--format text stored %q (%v), want the raw page", text, err)
	}
	if code, _, errs := runCLI(t, map[string]string{"CORDON_DATABASE_URL": a.dbURL}, "ingest", "--tenant", "viadb", "--format", "pdf", dir); code != 2 || !strings.Contains(errs, "--format \"pdf\"") {
		t.Fatalf("--format pdf: exit %d %s", code, errs)
	}
}
