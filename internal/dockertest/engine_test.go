package dockertest_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/internal/dockertest"
)

// TestEngineScriptRefusesForeign: scripts/docker-engine.sh neither joins
// nor stops an engine it did not start. A fake engine (enough of the
// Engine API for the docker CLI's version and info) answers on the
// script's socket; start and stop must fail, saying so, and leave it
// answering. With the owner file's token among the engine's labels the
// same engine is the script's own, and start joins it.
func TestEngineScriptRefusesForeign(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		if dockertest.Required() {
			t.Fatalf("the docker CLI is required here (CORDON_REQUIRE_DOCKER): %v", err)
		}
		t.Skipf("SKIPPING: no docker CLI (%v); make test/containers installs it", err)
	}
	const token = "0123456789abcdef"
	tests := []struct {
		name   string
		owner  string // the owner file's content; none when empty
		labels []string
		cmd    string
		ok     bool
	}{
		{"start, no owner file", "", nil, "start", false},
		{"stop, no owner file", "", nil, "stop", false},
		{"start, another token", "pid=1\ntoken=" + token + "\n", []string{"cordon.engine=fedcba9876543210"}, "start", false},
		{"stop, another token", "pid=1\ntoken=" + token + "\n", []string{"cordon.engine=fedcba9876543210"}, "stop", false},
		{"start, our token", "pid=1\ntoken=" + token + "\n", []string{"other=1", "cordon.engine=" + token}, "start", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A short directory: a Unix socket's path has at most 107 bytes.
			run, err := os.MkdirTemp("", "cde")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(run) })
			sock := filepath.Join(run, "docker.sock")
			fakeEngine(t, sock, tt.labels)
			if tt.owner != "" {
				if err := os.WriteFile(filepath.Join(run, "owner"), []byte(tt.owner), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "../../scripts/docker-engine.sh", tt.cmd)
			cmd.Env = append(os.Environ(), "CORDON_DOCKER_RUN="+run, "CORDON_DOCKER_ROOT="+filepath.Join(run, "root"))
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err = cmd.Run()
			t.Logf("%s: %v\nstdout: %s\nstderr: %s", tt.cmd, err, stdout.String(), stderr.String())
			if tt.ok {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if want := "DOCKER_HOST=unix://" + sock + "\n"; stdout.String() != want {
					t.Fatalf("got stdout %q, want %q", stdout.String(), want)
				}
				return
			}
			if err == nil {
				t.Fatal("got success, want a refusal")
			}
			if !strings.Contains(stderr.String(), "did not start") || !strings.Contains(stderr.String(), "CORDON_DOCKER_RUN=") {
				t.Errorf("got stderr %q, want it to say the engine is not the script's and what to do", stderr.String())
			}
			if stdout.String() != "" {
				t.Errorf("got stdout %q, want none", stdout.String())
			}
			if _, err := os.Stat(sock); err != nil {
				t.Errorf("the fake engine's socket: %v", err)
			}
		})
	}
}

// fakeEngine serves the few Engine API calls the script makes on sock.
func fakeEngine(t *testing.T, sock string, labels []string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if labels == nil {
		labels = []string{}
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Ostype", "linux")
		var body any
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			_, _ = w.Write([]byte("OK"))
			return
		case strings.HasSuffix(r.URL.Path, "/version"):
			body = map[string]any{"Version": "0.0.0-fake", "ApiVersion": "1.41", "MinAPIVersion": "1.12", "Os": "linux", "Arch": "amd64"}
		case strings.HasSuffix(r.URL.Path, "/info"):
			body = map[string]any{"ID": "fake", "ServerVersion": "0.0.0-fake", "OSType": "linux", "Labels": labels}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}
