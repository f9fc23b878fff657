package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
)

// dockerfileRun returns the Dockerfile's RUN instruction that builds the
// binary, continuation lines joined.
func dockerfileRun(t *testing.T) string {
	t.Helper()
	for _, in := range dockerfile(t) {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			return in.args
		}
	}
	t.Fatal("deploy/Dockerfile has no RUN ... go build")
	return ""
}

type instruction struct {
	cmd, args string
	stage     int // 0 for the first FROM's stage
}

// dockerfile reads deploy/Dockerfile into instructions (comments dropped,
// backslash continuations joined).
func dockerfile(t *testing.T) []instruction {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	stage := -1
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd: cmd, args: strings.Join(strings.Fields(args), " "), stage: stage})
	}
	return out
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// buildAsDockerfile runs the Dockerfile's build line as it is, with the
// output redirected into a temporary directory, once per test binary.
func buildAsDockerfile(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-deploy-test")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "cordon")
		line := dockerfileRun(t)
		if !strings.Contains(line, "-o /out/cordon ") {
			buildErr = errors.New("the build line does not write /out/cordon")
			return
		}
		cmd := exec.Command("sh", "-c", strings.Replace(line, "-o /out/cordon ", "-o "+buildPath+" ", 1))
		cmd.Dir = ".." // the Dockerfile's WORKDIR holds the repository root
		cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "COMMIT=0123456789abcdef", "DATE=2026-01-02T03:04:05Z")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building as deploy/Dockerfile does: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
	os.Exit(code)
}

// TestDockerfile: a multi-stage build of a static binary run as a non-root
// user that listens on every interface inside the container.
func TestDockerfile(t *testing.T) {
	ins := dockerfile(t)
	last := ins[len(ins)-1].stage
	if last < 1 {
		t.Fatalf("one stage; want a build stage and a run stage")
	}
	var user, env, expose []string
	for _, in := range ins {
		if in.stage != last {
			continue
		}
		switch in.cmd {
		case "USER":
			user = append(user, in.args)
		case "ENV":
			env = append(env, strings.Fields(in.args)...)
		case "EXPOSE":
			expose = append(expose, strings.Fields(in.args)...)
		case "RUN":
			t.Errorf("the run stage runs %q: it has no shell", in.args)
		}
	}
	if len(user) != 1 || strings.HasPrefix(user[0], "0") || strings.HasPrefix(user[0], "root") {
		t.Errorf("run stage USER %q, want one non-root user", user)
	}
	for _, want := range []string{"CORDON_LISTEN=0.0.0.0:8080", "CORDON_METRICS_ADDR=0.0.0.0:9090"} {
		if !slices.Contains(env, want) {
			t.Errorf("run stage ENV %q lacks %s", env, want)
		}
	}
	if !slices.Contains(expose, "8080") || !slices.Contains(expose, "9090") {
		t.Errorf("EXPOSE %q, want 8080 and 9090", expose)
	}
	run := dockerfileRun(t)
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "internal/version.version=${VERSION}", "internal/version.commit=${COMMIT}", "internal/version.date=${DATE}"} {
		if !strings.Contains(run, want) {
			t.Errorf("the build line lacks %s: %s", want, run)
		}
	}
}

// TestDockerfileBinary builds the binary as the Dockerfile's build stage
// does and checks that it is static and stamped with the build arguments.
func TestDockerfileBinary(t *testing.T) {
	bin := buildAsDockerfile(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader: not static")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("the binary links %q (%v): not static", libs, err)
	}
	if out, err := exec.Command("file", bin).Output(); err == nil {
		if !strings.Contains(string(out), "statically linked") {
			t.Errorf("file: %s", out)
		}
	} else {
		t.Logf("file(1) not available (%v); the ELF check above stands alone", err)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("cordon version: %v", err)
	}
	var info map[string]string
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("cordon version --json: %v: %s", err, out)
	}
	want := map[string]string{"version": "v9.8.7-test", "revision": "0123456789abcdef", "build_date": "2026-01-02T03:04:05Z"}
	for k, v := range want {
		if info[k] != v {
			t.Errorf("version %s = %q, want %q", k, info[k], v)
		}
	}
	if !strings.HasPrefix(info["go_version"], "go1.") {
		t.Errorf("go_version = %q", info["go_version"])
	}
}

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// get walks a parsed YAML document: string keys index maps, ints index
// lists. It fails the test when the path is not there.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %v", path, path[:i])
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("%v: no %q", path, k)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

// TestCompose: the migration runs once as the database's owner and grants
// the service role, which the service connects as and the database's init
// script creates; the image is built with both base image digests, which
// must be set.
func TestCompose(t *testing.T) {
	docs := yamlDocs(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	c := docs[0]
	if img := get(t, c, "services", "postgres", "image"); img != "pgvector/pgvector:pg16" {
		t.Errorf("postgres image %v", img)
	}
	if get(t, c, "services", "migrate", "image") != get(t, c, "services", "cordon", "image") {
		t.Errorf("migrate and cordon run different images")
	}
	if df := get(t, c, "services", "migrate", "build", "dockerfile"); df != "deploy/Dockerfile" {
		t.Errorf("migrate builds %v", df)
	}
	tests := []struct {
		name string
		path []any
		want any
	}{
		{"migrate runs cordon migrate", []any{"services", "migrate", "command", 0}, "migrate"},
		{"migrate grants the service role", []any{"services", "migrate", "command", 1}, "--service-role"},
		{"migrate waits for a healthy database", []any{"services", "migrate", "depends_on", "postgres", "condition"}, "service_healthy"},
		{"migrate runs once", []any{"services", "migrate", "restart"}, "no"},
		{"cordon serves", []any{"services", "cordon", "command", 0}, "serve"},
		{"cordon waits for the migration", []any{"services", "cordon", "depends_on", "migrate", "condition"}, "service_completed_successfully"},
		{"cordon listens inside the container", []any{"services", "cordon", "environment", "CORDON_LISTEN"}, "0.0.0.0:8080"},
		{"metrics listener", []any{"services", "cordon", "environment", "CORDON_METRICS_ADDR"}, "0.0.0.0:9090"},
		{"audit keyring from a secret", []any{"services", "cordon", "environment", "CORDON_AUDIT_KEY_FILE"}, "/run/secrets/audit_keys"},
		{"API published on loopback", []any{"services", "cordon", "ports", 0}, "127.0.0.1:8080:8080"},
		{"the init scripts are mounted", []any{"services", "postgres", "volumes", 1}, "./initdb:/docker-entrypoint-initdb.d:ro"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(t, c, tt.path...); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	serviceURL := get(t, c, "services", "cordon", "environment", "CORDON_DATABASE_URL").(string)
	ownerURL := get(t, c, "services", "migrate", "environment", "CORDON_DATABASE_URL").(string)
	for _, u := range []string{serviceURL, ownerURL} {
		if !strings.Contains(u, "@postgres:5432/") {
			t.Errorf("database URL %q does not name the postgres service", u)
		}
	}
	role := get(t, c, "services", "migrate", "command", 2)
	if user := urlUser(t, serviceURL); user != role {
		t.Errorf("the service connects as %q but the migration grants %q", user, role)
	}
	if user := urlUser(t, ownerURL); user != get(t, c, "services", "postgres", "environment", "POSTGRES_USER") || user == role {
		t.Errorf("the migration connects as %q: want the database's owner, not the service role", user)
	}
	if r := get(t, c, "services", "postgres", "environment", "CORDON_SERVICE_ROLE"); r != role {
		t.Errorf("the init script creates role %v, the migration grants %v", r, role)
	}
	for _, arg := range dockerfileDigestArgs(t) {
		v, _ := get(t, c, "services", "migrate", "build", "args", arg).(string)
		if !strings.HasPrefix(v, "${"+arg+":?") {
			t.Errorf("build arg %s = %q: want it required from the environment (${%s:?...})", arg, v, arg)
		}
	}
}

// urlUser is the user name of a database URL in the Compose file (its
// ${VAR} parts are not expanded).
func urlUser(t *testing.T, u string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(u, "postgres://")
	if !ok {
		t.Fatalf("%q is not a postgres:// URL", u)
	}
	user, _, _ := strings.Cut(rest, ":")
	return user
}

// TestComposeInitScript runs deploy/initdb's script with psql against the
// test server, as the PostgreSQL image's entrypoint would, with a password
// that needs quoting: the role exists, may log in, owns nothing and is no
// superuser.
func TestComposeInitScript(t *testing.T) {
	dbURL := os.Getenv("CORDON_TEST_DATABASE_URL")
	if dbURL == "" {
		t.Skip("SKIPPING: no CORDON_TEST_DATABASE_URL: the init script was not run (the Compose test above checks its wiring)")
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("SKIPPING: no psql (apt-get install postgresql-client): the init script was not run")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := fmt.Sprintf("cordon_svc_deploy_%d", os.Getpid())
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize()) })
	pass, _ := u.User.Password()
	cmd := exec.Command("sh", "initdb/10-cordon-service-role.sh")
	cmd.Env = append(os.Environ(), "PGHOST="+u.Hostname(), "PGPORT="+u.Port(), "PGPASSWORD="+pass, "PGSSLMODE=disable",
		"POSTGRES_USER="+u.User.Username(), "POSTGRES_DB="+strings.TrimPrefix(u.Path, "/"),
		"CORDON_SERVICE_ROLE="+role, `CORDON_SERVICE_PASSWORD=it's a "quoted" pass`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init script: %v\n%s", err, out)
	}
	var login, super, createRole, hasPassword bool
	err = conn.QueryRow(ctx, `SELECT rolcanlogin, rolsuper, rolcreaterole, rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1`, role).
		Scan(&login, &super, &createRole, &hasPassword)
	if err != nil {
		t.Fatalf("role %s after the init script: %v", role, err)
	}
	if !login || super || createRole || !hasPassword {
		t.Fatalf("role %s: login %v, superuser %v, createrole %v, password %v", role, login, super, createRole, hasPassword)
	}
	cmd.Env = slices.DeleteFunc(slices.Clone(cmd.Env), func(e string) bool { return strings.HasPrefix(e, "CORDON_SERVICE_PASSWORD=") })
	cmd.Stdout, cmd.Stderr = nil, nil
	again := exec.Command("sh", "initdb/10-cordon-service-role.sh")
	again.Env = cmd.Env
	if out, err := again.CombinedOutput(); err == nil || !strings.Contains(string(out), "CORDON_SERVICE_PASSWORD") {
		t.Fatalf("without a password the script ran: %v\n%s", err, out)
	}
}

// dockerfileDigestArgs returns the build arguments that the Dockerfile's
// FROM lines take their digests from.
func dockerfileDigestArgs(t *testing.T) []string {
	t.Helper()
	var out []string
	globalArgs := map[string]string{}
	for _, in := range dockerfile(t) {
		if in.cmd == "ARG" && in.stage < 0 {
			name, def, _ := strings.Cut(in.args, "=")
			globalArgs[name] = def
		}
		if in.cmd != "FROM" {
			continue
		}
		_, digest, _ := strings.Cut(resolveArg(fromImage(in.args), globalArgs), "@")
		if name, ok := strings.CutPrefix(digest, "${"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}

// resolveArg is image with a whole-value build argument (${NAME}) replaced
// by that argument's default, as a build without it sees it.
func resolveArg(image string, globalArgs map[string]string) string {
	if name, ok := strings.CutPrefix(image, "${"); ok && strings.HasSuffix(name, "}") {
		if def, declared := globalArgs[strings.TrimSuffix(name, "}")]; declared && def != "" {
			return def
		}
	}
	return image
}

// fromImage is the image a FROM instruction names (flags and AS dropped).
func fromImage(args string) string {
	for _, f := range strings.Fields(args) {
		if !strings.HasPrefix(f, "--") {
			return f
		}
	}
	return ""
}

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// TestDockerfileBaseImagesPinned: every base image (directly, or as the
// default of the build argument the FROM names) is pinned by digest,
// literally or through a build argument declared before the first FROM
// whose default, if it has one, is a digest. No digest is made up: one
// without a default must be given to build at all.
func TestDockerfileBaseImagesPinned(t *testing.T) {
	ins := dockerfile(t)
	globalArgs := map[string]string{}
	froms := 0
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && in.stage < 0:
			name, def, _ := strings.Cut(in.args, "=")
			globalArgs[name] = def
		case in.cmd == "FROM":
			froms++
			image := resolveArg(fromImage(in.args), globalArgs)
			ref, digest, ok := strings.Cut(image, "@")
			if !ok || !strings.Contains(ref, ":") {
				t.Errorf("FROM %s: not pinned as name:tag@digest", image)
				continue
			}
			if sha256Digest.MatchString(digest) {
				continue
			}
			name, isArg := strings.CutPrefix(digest, "${")
			name = strings.TrimSuffix(name, "}")
			def, declared := globalArgs[name]
			switch {
			case !isArg:
				t.Errorf("FROM %s: %q is not a sha256 digest", image, digest)
			case !declared:
				t.Errorf("FROM %s: build argument %s is not declared before the first FROM", image, name)
			case def != "" && !sha256Digest.MatchString(def):
				t.Errorf("FROM %s: %s defaults to %q, not a sha256 digest", image, name, def)
			}
		}
	}
	if froms < 2 {
		t.Fatalf("%d FROM lines", froms)
	}
}

// dockerignored reports whether the Dockerfile's .dockerignore patterns
// leave path (slash-separated, relative to the context) out: a pattern
// matches the path or one of its parent folders; "**" matches any number
// of folders, "*" and "?" stay within one; a later "!" pattern takes a
// match back (Docker's rules).
func dockerignored(t *testing.T, patterns []string, path string) bool {
	t.Helper()
	out := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.Trim(strings.TrimPrefix(p, "!"), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("(/.*)?$")
		if regexp.MustCompile(re.String()).MatchString(path) {
			out = !neg
		}
	}
	return out
}

// TestDockerignore: the build context leaves out keys, scratch folders and
// node modules, and keeps every file the binary is built from.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, p := range []string{"deploy/audit.keys", "audit.keys", "etc/prod.keys", ".tmp/bench.json", "node_modules/x/index.js",
		"embed/localmodel/node_modules/@tensorflow/tfjs/package.json", ".git/HEAD", "cordon", "cli/cli.test"} {
		if !dockerignored(t, patterns, p) {
			t.Errorf("%s is in the build context", p)
		}
	}
	// Every file the binary is built from stays in the context.
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`, "../cmd/cordon").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dir, err := filepath.Rel(root, f[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(dir, name)))
		}
	}
	if len(files) < 50 {
		t.Fatalf("only %d source files listed", len(files))
	}
	for _, f := range files {
		if dockerignored(t, patterns, f) {
			t.Errorf("%s, which the binary is built from, is left out of the build context", f)
		}
	}
}

// TestKubernetes: every manifest parses; kustomization lists every file;
// the Deployment migrates in an init container (same image, the owner's
// URL, granting the role the service connects as) and serves with startup,
// liveness and readiness probes, non-root with requests, under its own
// service account; no fixed-name Job; a PodDisruptionBudget, a
// NetworkPolicy that keeps the metrics port from API callers, scrape
// annotations and a PodMonitor component; the Service reaches the API port
// only.
func TestKubernetes(t *testing.T) {
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	byKind := map[string][]map[string]any{}
	var listed []any
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			kind, _ := d["kind"].(string)
			if kind == "" || d["apiVersion"] == nil {
				t.Fatalf("%s: a document without kind or apiVersion", f)
			}
			byKind[kind] = append(byKind[kind], d)
			if kind == "Kustomization" {
				listed = get(t, d, "resources").([]any)
			}
		}
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, want := range []string{"ConfigMap", "Deployment", "Kustomization", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"} {
		if len(byKind[want]) == 0 {
			t.Errorf("no %s among %q", want, kinds)
		}
	}
	// A Job's pod template is immutable: one with a fixed name fails the
	// next 'kubectl apply -k' with a new image tag.
	if len(byKind["Job"]) > 0 {
		t.Errorf("a Job among the manifests: migrations run in the Deployment's init container")
	}
	var want []any
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].(string) < listed[j].(string) })
	if !slices.Equal(listed, want) {
		t.Errorf("kustomization resources %v, want %v", listed, want)
	}

	dep := byKind["Deployment"][0]
	selector := get(t, dep, "spec", "selector", "matchLabels").(map[string]any)
	podLabels := get(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	pod := get(t, dep, "spec", "template", "spec")
	ctr := get(t, pod, "containers", 0)
	initCtr := get(t, pod, "initContainers", 0)

	image := get(t, ctr, "image").(string)
	kimg := get(t, byKind["Kustomization"][0], "images", 0, "name").(string)
	if get(t, initCtr, "image") != image || !strings.HasPrefix(image, kimg+":") {
		t.Errorf("images: server %v, init container %v, kustomization %v", image, get(t, initCtr, "image"), kimg)
	}
	if args := get(t, initCtr, "args"); !slices.Equal(args.([]any), []any{"migrate"}) {
		t.Errorf("the init container runs %v, want cordon migrate", args)
	}
	if args := get(t, ctr, "args"); !slices.Equal(args.([]any), []any{"serve"}) {
		t.Errorf("the Deployment runs %v, want cordon serve", args)
	}
	envOf := func(c any) map[string]any {
		out := map[string]any{}
		for _, e := range get(t, c, "env").([]any) {
			name := get(t, e, "name").(string)
			if v, ok := e.(map[string]any)["value"]; ok {
				out[name] = v
			} else {
				out[name] = get(t, e, "valueFrom", "secretKeyRef", "key")
			}
		}
		return out
	}
	initEnv, srvEnv := envOf(initCtr), envOf(ctr)
	if initEnv["CORDON_DATABASE_URL"] != "owner-url" || srvEnv["CORDON_DATABASE_URL"] != "service-url" {
		t.Errorf("database URLs: init container %v, server %v; want owner-url and service-url", initEnv["CORDON_DATABASE_URL"], srvEnv["CORDON_DATABASE_URL"])
	}
	var serviceURL string
	for _, s := range byKind["Secret"] {
		if u, ok := get(t, s, "stringData").(map[string]any)["service-url"]; ok {
			serviceURL = u.(string)
		}
	}
	if serviceURL == "" || initEnv["CORDON_SERVICE_ROLE"] != urlUser(t, serviceURL) {
		t.Errorf("the migration grants %v, but the service connects as %q", initEnv["CORDON_SERVICE_ROLE"], serviceURL)
	}
	probes := []struct{ probe, path string }{{"startupProbe", "/healthz"}, {"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}}
	for _, p := range probes {
		if got := get(t, ctr, p.probe, "httpGet", "path"); got != p.path {
			t.Errorf("%s path %v, want %s", p.probe, got, p.path)
		}
		if got := get(t, ctr, p.probe, "httpGet", "port"); got != "http" {
			t.Errorf("%s port %v, want the API port", p.probe, got)
		}
	}
	for name, c := range map[string]any{"server": ctr, "init container": initCtr} {
		if get(t, c, "securityContext", "allowPrivilegeEscalation") != false || get(t, c, "securityContext", "readOnlyRootFilesystem") != true {
			t.Errorf("%s: the container may escalate or write its root file system", name)
		}
		if drop := get(t, c, "securityContext", "capabilities", "drop"); !slices.Equal(drop.([]any), []any{"ALL"}) {
			t.Errorf("%s: capabilities drop %v", name, drop)
		}
		for _, r := range []string{"cpu", "memory"} {
			if get(t, c, "resources", "requests", r) == "" {
				t.Errorf("%s: no %s request", name, r)
			}
		}
	}
	if get(t, pod, "securityContext", "runAsNonRoot") != true {
		t.Errorf("runAsNonRoot is not true")
	}
	if uid := get(t, pod, "securityContext", "runAsUser"); uid == 0 {
		t.Errorf("runAsUser 0")
	}
	if get(t, dep, "spec", "strategy", "rollingUpdate", "maxUnavailable") != 0 {
		t.Errorf("a rollout may take serving pods away before new ones are ready")
	}

	sa := byKind["ServiceAccount"][0]
	if get(t, pod, "serviceAccountName") != get(t, sa, "metadata", "name") {
		t.Errorf("the pods run as service account %v, not %v", get(t, pod, "serviceAccountName"), get(t, sa, "metadata", "name"))
	}
	if get(t, sa, "automountServiceAccountToken") != false || get(t, pod, "automountServiceAccountToken") != false {
		t.Errorf("a service account token is mounted")
	}

	pdb := byKind["PodDisruptionBudget"][0]
	if !maps.Equal(get(t, pdb, "spec", "selector", "matchLabels").(map[string]any), selector) {
		t.Errorf("the PodDisruptionBudget selects %v, the Deployment %v", get(t, pdb, "spec", "selector", "matchLabels"), selector)
	}
	if min, ok := get(t, pdb, "spec", "minAvailable").(int); !ok || min < 1 || min >= get(t, dep, "spec", "replicas").(int) {
		t.Errorf("PodDisruptionBudget minAvailable %v: want at least 1 and fewer than the replicas", get(t, pdb, "spec", "minAvailable"))
	}

	// The NetworkPolicy selects the server pods; the API port is open, the
	// metrics port only to named peers; no rule opens every port.
	np := byKind["NetworkPolicy"][0]
	if !maps.Equal(get(t, np, "spec", "podSelector", "matchLabels").(map[string]any), selector) {
		t.Errorf("the NetworkPolicy selects %v, not the server pods", get(t, np, "spec", "podSelector", "matchLabels"))
	}
	if types := get(t, np, "spec", "policyTypes").([]any); !slices.Contains(types, any("Ingress")) {
		t.Errorf("the NetworkPolicy does not restrict ingress: %v", types)
	}
	apiOpen, metricsScraped := false, false
	for i, r := range get(t, np, "spec", "ingress").([]any) {
		rule := r.(map[string]any)
		from, _ := rule["from"].([]any)
		ports, _ := rule["ports"].([]any)
		if len(ports) == 0 {
			t.Errorf("ingress rule %d opens every port", i)
		}
		for _, p := range ports {
			switch port := get(t, p, "port"); port {
			case "metrics", 9090:
				if len(from) == 0 {
					t.Errorf("ingress rule %d opens the metrics port to everyone", i)
				}
				metricsScraped = true
			case "http", 8080:
				apiOpen = true
			default:
				t.Errorf("ingress rule %d opens port %v", i, port)
			}
		}
	}
	if !apiOpen || !metricsScraped {
		t.Errorf("NetworkPolicy: API port open %v, metrics reachable by monitoring %v", apiOpen, metricsScraped)
	}

	ann := get(t, dep, "spec", "template", "metadata", "annotations").(map[string]any)
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9090" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v", ann)
	}
	comp := yamlDocs(t, "k8s/podmonitor/kustomization.yaml")[0]
	if get(t, comp, "kind") != "Component" || !slices.Equal(get(t, comp, "resources").([]any), []any{"podmonitor.yaml"}) {
		t.Errorf("podmonitor component: %v", comp)
	}
	pm := yamlDocs(t, "k8s/podmonitor/podmonitor.yaml")[0]
	if get(t, pm, "kind") != "PodMonitor" || !maps.Equal(get(t, pm, "spec", "selector", "matchLabels").(map[string]any), selector) ||
		get(t, pm, "spec", "podMetricsEndpoints", 0, "port") != "metrics" {
		t.Errorf("PodMonitor: %v", pm)
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("pod label %s=%v, the selector wants %v", k, podLabels[k], v)
		}
	}

	// The Service targets the container's API port, never metrics.
	var ports []string
	for _, p := range get(t, ctr, "ports").([]any) {
		ports = append(ports, fmt.Sprintf("%v:%v", get(t, p, "name"), get(t, p, "containerPort")))
	}
	if !slices.Contains(ports, "http:8080") || !slices.Contains(ports, "metrics:9090") {
		t.Errorf("container ports %q", ports)
	}
	for _, p := range get(t, byKind["Service"][0], "spec", "ports").([]any) {
		if get(t, p, "targetPort") != "http" {
			t.Errorf("the Service exposes %v", get(t, p, "targetPort"))
		}
	}
	cm := get(t, byKind["ConfigMap"][0], "data").(map[string]any)
	if cm["CORDON_LISTEN"] != "0.0.0.0:8080" || cm["CORDON_METRICS_ADDR"] != "0.0.0.0:9090" {
		t.Errorf("ConfigMap listen addresses %v, %v", cm["CORDON_LISTEN"], cm["CORDON_METRICS_ADDR"])
	}
}

// unitSettings reads a systemd unit into section.key -> values.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not KEY=VALUE", path, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// TestSystemdUnit: the unit's hardening, and systemd-analyze verify on it
// (with ExecStart pointing at a binary built as the Dockerfile does).
func TestSystemdUnit(t *testing.T) {
	u := unitSettings(t, "cordon.service")
	tests := []struct{ key, want string }{
		{"Service.DynamicUser", "yes"},
		{"Service.NoNewPrivileges", "yes"},
		{"Service.ProtectSystem", "strict"},
		{"Service.ProtectHome", "yes"},
		{"Service.PrivateTmp", "yes"},
		{"Service.CapabilityBoundingSet", ""},
		{"Service.EnvironmentFile", "/etc/cordon/cordon.env"},
		{"Service.KillSignal", "SIGTERM"},
		{"Install.WantedBy", "multi-user.target"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := u[tt.key]; len(got) != 1 || got[0] != tt.want {
				t.Fatalf("%s = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
	exec0 := u["Service.ExecStart"]
	if len(exec0) != 1 || !strings.HasPrefix(exec0[0], "/usr/local/bin/cordon serve ") {
		t.Fatalf("ExecStart %q", exec0)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed (apt-get install systemd): only the settings above were checked")
		return
	}
	bin := buildAsDockerfile(t)
	raw, _ := os.ReadFile("cordon.service")
	unit := filepath.Join(t.TempDir(), "cordon.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/cordon"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

var update = flag.Bool("update", false, "rewrite k8s/prometheusrule/prometheusrule.yaml from prometheus/cordon-rules.yaml")

// prometheusRuleFrom returns the PrometheusRule that holds rules' groups:
// the current file's lines up to its "spec:", then the rules file from its
// "groups:" on, indented under spec.
func prometheusRuleFrom(t *testing.T, current, rules []byte) []byte {
	t.Helper()
	head, _, ok := bytes.Cut(current, []byte("\nspec:\n"))
	if !ok {
		t.Fatal("k8s/prometheusrule/prometheusrule.yaml has no line spec:")
	}
	i := bytes.Index(rules, []byte("\ngroups:\n"))
	if i < 0 {
		t.Fatal("prometheus/cordon-rules.yaml has no line groups:")
	}
	var out bytes.Buffer
	out.Write(head)
	out.WriteString("\nspec:\n")
	for _, line := range strings.SplitAfter(string(rules[i+1:]), "\n") {
		if strings.TrimSpace(line) != "" {
			out.WriteString("  ")
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// headingAnchors returns the anchors of a Markdown file's headings, as
// GitHub makes them.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inFence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if inFence || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				a.WriteRune(r)
			}
		}
		out = append(out, a.String())
	}
	return out
}

// TestPrometheusRule: the alert rules are one source. The PrometheusRule
// component holds exactly the plain rules file's groups (regenerate it
// with -update), the component lists it, and every alert has a severity
// of critical or warning, a summary, a description and a runbook_url that
// names a heading of docs/running.md.
func TestPrometheusRule(t *testing.T) {
	const path = "k8s/prometheusrule/prometheusrule.yaml"
	rules, err := os.ReadFile("prometheus/cordon-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRuleFrom(t, current, rules)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		current = want
	}
	if !bytes.Equal(current, want) {
		t.Errorf("%s is not prometheus/cordon-rules.yaml's groups: go test ./deploy -run TestPrometheusRule -update", path)
	}
	plain := yamlDocs(t, "prometheus/cordon-rules.yaml")[0]
	pr := yamlDocs(t, path)[0]
	if get(t, pr, "kind") != "PrometheusRule" || get(t, pr, "apiVersion") != "monitoring.coreos.com/v1" {
		t.Errorf("%s: kind %v, apiVersion %v", path, get(t, pr, "kind"), get(t, pr, "apiVersion"))
	}
	if got, want := get(t, pr, "spec", "groups"), get(t, plain, "groups"); !reflect.DeepEqual(got, want) {
		t.Errorf("%s spec.groups differ from prometheus/cordon-rules.yaml's groups", path)
	}
	comp := yamlDocs(t, "k8s/prometheusrule/kustomization.yaml")[0]
	if get(t, comp, "kind") != "Component" || !slices.Equal(get(t, comp, "resources").([]any), []any{"prometheusrule.yaml"}) {
		t.Errorf("prometheusrule component: %v", comp)
	}

	anchors := headingAnchors(t, "../docs/running.md")
	var alerts []string
	for _, g := range get(t, plain, "groups").([]any) {
		for _, r := range get(t, g, "rules").([]any) {
			name, _ := get(t, r, "alert").(string)
			if name == "" {
				t.Errorf("group %v: a rule without alert (recording rules belong elsewhere)", get(t, g, "name"))
				continue
			}
			alerts = append(alerts, name)
			if sev := get(t, r, "labels", "severity"); sev != "critical" && sev != "warning" {
				t.Errorf("%s: severity %v, want critical or warning", name, sev)
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if s, _ := get(t, r, "annotations").(map[string]any)[k].(string); strings.TrimSpace(s) == "" {
					t.Errorf("%s: no %s", name, k)
				}
			}
			url, _ := get(t, r, "annotations").(map[string]any)["runbook_url"].(string)
			anchor, ok := strings.CutPrefix(url, "docs/running.md#")
			if !ok || !slices.Contains(anchors, anchor) {
				t.Errorf("%s: runbook_url %q names no heading of docs/running.md", name, url)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("prometheus/cordon-rules.yaml has no alert")
	}
	if dup := len(alerts) - len(slices.Compact(slices.Sorted(slices.Values(alerts)))); dup != 0 {
		t.Errorf("%d alert names repeated: %v", dup, alerts)
	}
}

// TestGrafanaDashboard: the dashboard parses, has a fixed uid, and each
// panel but the rows queries Prometheus through the datasource variable.
// (That its metrics exist is server's TestAlertsNameExportedMetrics.)
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/cordon.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != "cordon" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d queries", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q: an empty query", p.Title)
			}
			queries++
		}
	}
	if queries < 20 {
		t.Errorf("%d queries, want the dashboard's (at least 20)", queries)
	}
}
