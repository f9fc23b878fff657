package integration_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cli"
)

// The helpers that run the cordon command in-process.

// mainCLI is the one place the tests run cordon in-process: args under
// ctx, with env as its environment (nil: empty), writing to stdout and
// stderr. It returns the exit code.
func mainCLI(ctx context.Context, env map[string]string, stdout, stderr io.Writer, args ...string) int {
	return cli.Main(ctx, cli.Env{Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return env[k] }}, args)
}

// runCLI runs 'cordon args...' to its end and returns the exit code, stdout
// and stderr.
func runCLI(t testing.TB, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := mainCLI(context.Background(), env, &out, &errOut, args...)
	return code, out.String(), errOut.String()
}

// cordonCLI runs 'cordon args...' with an empty environment, fails the test
// unless it exits 0, and returns its stdout.
func cordonCLI(t testing.TB, args ...string) []byte {
	t.Helper()
	code, stdout, stderr := runCLI(t, nil, args...)
	if code != cli.ExitOK {
		t.Fatalf("cordon %v: exit %d: %s", args, code, stderr)
	}
	return []byte(stdout)
}

// startServe runs 'cordon serve args...' with env until the test ends and
// returns the API and metrics URLs and the log.
func startServe(t *testing.T, env map[string]string, args ...string) (base, metricsURL string, logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- mainCLI(ctx, env, stdout, stderr, append([]string{"serve"}, args...)...)
	}()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && base == ""; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stdout.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "listening on "); ok {
				base = v
			}
			if v, ok := strings.CutPrefix(line, "metrics on "); ok {
				metricsURL = v
			}
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop on cancel")
		}
	})
	return base, metricsURL, stderr
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
