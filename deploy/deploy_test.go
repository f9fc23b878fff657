package deploy_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

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
		{"migrate waits for a healthy database", []any{"services", "migrate", "depends_on", "postgres", "condition"}, "service_healthy"},
		{"migrate runs once", []any{"services", "migrate", "restart"}, "no"},
		{"cordon serves", []any{"services", "cordon", "command", 0}, "serve"},
		{"cordon waits for the migration", []any{"services", "cordon", "depends_on", "migrate", "condition"}, "service_completed_successfully"},
		{"cordon listens inside the container", []any{"services", "cordon", "environment", "CORDON_LISTEN"}, "0.0.0.0:8080"},
		{"metrics listener", []any{"services", "cordon", "environment", "CORDON_METRICS_ADDR"}, "0.0.0.0:9090"},
		{"audit keyring from a secret", []any{"services", "cordon", "environment", "CORDON_AUDIT_KEY_FILE"}, "/run/secrets/audit_keys"},
		{"API published on loopback", []any{"services", "cordon", "ports", 0}, "127.0.0.1:8080:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(t, c, tt.path...); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if u := get(t, c, "services", "cordon", "environment", "CORDON_DATABASE_URL").(string); !strings.Contains(u, "@postgres:5432/") {
		t.Errorf("database URL %q does not name the postgres service", u)
	}
}

// TestKubernetes: every manifest parses; the Deployment probes /healthz and
// /readyz, runs non-root with requests, and runs the same image as the
// migration Job; the Service reaches the API port; kustomization lists
// every file.
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
	for _, want := range []string{"ConfigMap", "Deployment", "Job", "Kustomization", "Namespace", "Secret", "Service"} {
		if len(byKind[want]) == 0 {
			t.Errorf("no %s among %q", want, kinds)
		}
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
	pod := get(t, dep, "spec", "template", "spec")
	ctr := get(t, pod, "containers", 0)
	job := byKind["Job"][0]
	jobPod := get(t, job, "spec", "template", "spec")
	jobCtr := get(t, jobPod, "containers", 0)

	image := get(t, ctr, "image").(string)
	kimg := get(t, byKind["Kustomization"][0], "images", 0, "name").(string)
	if get(t, jobCtr, "image") != image || !strings.HasPrefix(image, kimg+":") {
		t.Errorf("images: deployment %v, job %v, kustomization %v", image, get(t, jobCtr, "image"), kimg)
	}
	if args := get(t, jobCtr, "args"); !slices.Equal(args.([]any), []any{"migrate"}) {
		t.Errorf("the Job runs %v, want cordon migrate", args)
	}
	if get(t, jobPod, "restartPolicy") != "Never" {
		t.Errorf("the Job restarts its pod in place")
	}
	if args := get(t, ctr, "args"); !slices.Equal(args.([]any), []any{"serve"}) {
		t.Errorf("the Deployment runs %v, want cordon serve", args)
	}
	probes := []struct{ probe, path string }{{"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}}
	for _, p := range probes {
		if got := get(t, ctr, p.probe, "httpGet", "path"); got != p.path {
			t.Errorf("%s path %v, want %s", p.probe, got, p.path)
		}
		if got := get(t, ctr, p.probe, "httpGet", "port"); got != "http" {
			t.Errorf("%s port %v, want the API port", p.probe, got)
		}
	}
	for name, spec := range map[string]struct{ pod, ctr any }{"Deployment": {pod, ctr}, "Job": {jobPod, jobCtr}} {
		if get(t, spec.pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: runAsNonRoot is not true", name)
		}
		if uid := get(t, spec.pod, "securityContext", "runAsUser"); uid == 0 {
			t.Errorf("%s: runAsUser 0", name)
		}
		if get(t, spec.ctr, "securityContext", "allowPrivilegeEscalation") != false || get(t, spec.ctr, "securityContext", "readOnlyRootFilesystem") != true {
			t.Errorf("%s: the container may escalate or write its root file system", name)
		}
		if drop := get(t, spec.ctr, "securityContext", "capabilities", "drop"); !slices.Equal(drop.([]any), []any{"ALL"}) {
			t.Errorf("%s: capabilities drop %v", name, drop)
		}
		for _, r := range []string{"cpu", "memory"} {
			if get(t, spec.ctr, "resources", "requests", r) == "" {
				t.Errorf("%s: no %s request", name, r)
			}
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
