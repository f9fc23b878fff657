package localmodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultModelName is the model name the server reports and accepts
	// unless [Options.ModelName] says otherwise.
	DefaultModelName = "use-lite"
	// Dims is the width of every vector: Universal Sentence Encoder lite's
	// output.
	Dims = 512
	// DefaultMaxBatch is the most texts (or rerank documents) one request
	// may carry; more gets 413.
	DefaultMaxBatch = 256
	// DefaultMaxTokens is the most tokens per text; a longer text gets 400
	// unless the request asks for truncation.
	DefaultMaxTokens = 512
	// DefaultMaxBodyBytes is the largest request body; a larger one gets 413.
	DefaultMaxBodyBytes = 8 << 20
	// DefaultStartTimeout bounds the wait for the server to load the model
	// and listen (about half a second on an idle machine).
	DefaultStartTimeout = 60 * time.Second

	// EnvDir overrides where [Dir] looks for server.mjs.
	EnvDir = "CORDON_LOCALMODEL_DIR"
	// InstallCommand installs the model's npm packages; run it from the
	// repository root.
	InstallCommand = "bash scripts/model-install.sh"

	// minNodeMajor is the oldest Node.js the packages support ("engines").
	minNodeMajor = 18
	// stopGrace is how long Close waits after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	// stderrTail is how much of the server's standard error an error keeps.
	stderrTail = 8 << 10
)

// Options configure [Start]. The zero value starts the server with the
// defaults above.
type Options struct {
	// ModelName is the model name requests must give (--model-name); other
	// names get the provider's "model not found" answer (404). Empty means
	// [DefaultModelName].
	ModelName string
	// Delay makes the server sleep before answering each POST (--delay-ms),
	// so clients can test their timeouts. It is rounded up to whole
	// milliseconds.
	Delay time.Duration
	// MaxBatch, MaxTokens and MaxBodyBytes set the request limits; zero
	// means [DefaultMaxBatch], [DefaultMaxTokens], [DefaultMaxBodyBytes].
	MaxBatch     int
	MaxTokens    int
	MaxBodyBytes int64
	// StartTimeout bounds the wait for the "listening on" line; zero means
	// [DefaultStartTimeout].
	StartTimeout time.Duration
	// Stderr, when set, receives the server's standard error (its load
	// report, and a stack trace if it fails). The last 8 KiB are kept for
	// error messages either way.
	Stderr io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.ModelName == "" {
		o.ModelName = DefaultModelName
	}
	if strings.ContainsFunc(o.ModelName, func(r rune) bool { return r <= ' ' }) {
		return o, fmt.Errorf("%w: ModelName %q has spaces or control characters", ErrBadOptions, o.ModelName)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	switch {
	case o.Delay < 0:
		return o, fmt.Errorf("%w: Delay %v is negative", ErrBadOptions, o.Delay)
	case o.Delay > time.Hour:
		return o, fmt.Errorf("%w: Delay %v is over an hour", ErrBadOptions, o.Delay)
	case o.MaxBatch < 1 || o.MaxBatch > 100000:
		return o, fmt.Errorf("%w: MaxBatch %d is outside 1..100000", ErrBadOptions, o.MaxBatch)
	case o.MaxTokens < 1 || o.MaxTokens > 100000:
		return o, fmt.Errorf("%w: MaxTokens %d is outside 1..100000", ErrBadOptions, o.MaxTokens)
	case o.MaxBodyBytes < 1024 || o.MaxBodyBytes > 1<<30:
		return o, fmt.Errorf("%w: MaxBodyBytes %d is outside 1024..%d", ErrBadOptions, o.MaxBodyBytes, 1<<30)
	case o.StartTimeout < 0:
		return o, fmt.Errorf("%w: StartTimeout %v is negative", ErrBadOptions, o.StartTimeout)
	}
	return o, nil
}

func (o Options) args() []string {
	millis := int64((o.Delay + time.Millisecond - 1) / time.Millisecond)
	return []string{
		"server.mjs",
		"--port", "0",
		"--model-name", o.ModelName,
		"--max-batch", strconv.Itoa(o.MaxBatch),
		"--max-tokens", strconv.Itoa(o.MaxTokens),
		"--max-body-bytes", strconv.FormatInt(o.MaxBodyBytes, 10),
		"--delay-ms", strconv.FormatInt(millis, 10),
		"--exit-with-stdin",
	}
}

// Dir returns the directory that holds server.mjs: $CORDON_LOCALMODEL_DIR
// when set, else embed/localmodel under the module root, found by walking
// up from the working directory to go.mod. It returns "" when neither
// applies; [Available] then says so.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "embed", "localmodel")
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// Available reports whether the server can start: Node.js 18 or newer on
// PATH, server.mjs in [Dir], and every npm package that package.json pins
// installed at that version. The error wraps [ErrNotInstalled] and says
// what to run.
func Available() error {
	_, _, err := check()
	return err
}

// check is Available, also returning the node binary and the directory.
func check() (node, dir string, err error) {
	dir = Dir()
	if dir == "" {
		wd, _ := os.Getwd()
		return "", "", fmt.Errorf("%w: no go.mod above the working directory %s to find embed/localmodel from; set %s to that directory",
			ErrNotInstalled, wd, EnvDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "server.mjs")); err != nil {
		return "", "", fmt.Errorf("%w: no server.mjs in %s (set %s to the embed/localmodel directory of a Cordon checkout)",
			ErrNotInstalled, dir, EnvDir)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: node (Node.js %d or newer) is not on PATH; install Node.js and npm (Debian: apt-get install nodejs npm), then run %s",
			ErrNotInstalled, minNodeMajor, InstallCommand)
	}
	if err := checkNodeVersion(node); err != nil {
		return "", "", err
	}
	if err := checkPackages(dir); err != nil {
		return "", "", err
	}
	return node, dir, nil
}

func checkNodeVersion(node string) error {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%w: %s --version: %w", ErrNotInstalled, node, err)
	}
	v := strings.TrimSpace(string(out))
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	n, err := strconv.Atoi(major)
	if err != nil || n < minNodeMajor {
		return fmt.Errorf("%w: %s is Node.js %s; version %d or newer is needed", ErrNotInstalled, node, v, minNodeMajor)
	}
	return nil
}

// checkPackages compares package.json's pinned dependencies with the
// versions installed under node_modules.
func checkPackages(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotInstalled, filepath.Join(dir, "package.json"), err)
	}
	names := make([]string, 0, len(pkg.Dependencies))
	for name := range pkg.Dependencies {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []string
	for _, name := range names {
		want := pkg.Dependencies[name]
		raw, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
		if err != nil {
			problems = append(problems, name+" is missing")
			continue
		}
		var got struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Version != want {
			problems = append(problems, fmt.Sprintf("%s is at %q, package.json pins %q", name, got.Version, want))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: in %s: %s; run %s", ErrNotInstalled,
			filepath.Join(dir, "node_modules"), strings.Join(problems, "; "), InstallCommand)
	}
	return nil
}

// Server is a running model server.
type Server struct {
	url  string
	opts Options
	cmd  *exec.Cmd
	// stdin is the server's lifeline: it exits when this closes, so a test
	// binary that dies without Close takes the server with it.
	stdin io.WriteCloser
	tail  *tailBuffer

	done    chan struct{} // closed once the process has been waited for
	waitErr error         // set before done closes

	closeOnce sync.Once
	closeErr  error
}

var listeningLine = regexp.MustCompile(`^listening on (http://127\.0\.0\.1:[0-9]+)$`)

// Start spawns `node server.mjs --port 0` in [Dir] and waits until it
// prints its URL. ctx bounds the start only; the server runs until
// [Server.Close]. It returns an error wrapping [ErrNotInstalled] when
// [Available] fails, [ErrBadOptions] for bad options, and [ErrNotReady]
// when the server exits or is not ready within [Options.StartTimeout].
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	node, dir, err := check()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, opts.args()...)
	cmd.Dir = dir
	setProcessGroup(cmd)
	s := &Server{opts: opts, cmd: cmd, tail: &tailBuffer{max: stderrTail}, done: make(chan struct{})}
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(s.tail, opts.Stderr)
	} else {
		cmd.Stderr = s.tail
	}
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start local model server: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start local model server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s in %s: %w", node, strings.Join(opts.args(), " "), dir, err)
	}

	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // the pipe must be drained before Wait
		s.waitErr = cmd.Wait()
		close(s.done)
	}()

	timer := time.NewTimer(opts.StartTimeout)
	defer timer.Stop()
	select {
	case s.url = <-found:
		return s, nil
	case <-s.done:
		select {
		case s.url = <-found: // it listened, then exited: Close reports why
			return s, nil
		default:
		}
		return nil, fmt.Errorf("%w: server.mjs ended (%s) before listening; its stderr ends:\n%s",
			ErrNotReady, s.cmd.ProcessState, s.tail.String())
	case <-timer.C:
		s.kill()
		return nil, fmt.Errorf("%w: no \"listening on\" line within %v; its stderr ends:\n%s",
			ErrNotReady, opts.StartTimeout, s.tail.String())
	case <-ctx.Done():
		s.kill()
		return nil, fmt.Errorf("start local model server: %w", ctx.Err())
	}
}

// URL is the server's base URL, e.g. http://127.0.0.1:40123 (no trailing
// slash); append /v1/embeddings and the other endpoint paths.
func (s *Server) URL() string { return s.url }

// ModelName is the model name the server accepts and reports.
func (s *Server) ModelName() string { return s.opts.ModelName }

// Options returns the options the server runs with, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// Close stops the server: it closes the server's standard input, sends
// SIGTERM to its process group, and after a grace period SIGKILL; then it
// waits for the process. It returns an error when the server had already
// exited on its own with a failure. Calling Close again returns the same
// result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.closeErr = fmt.Errorf("local model server exited before Close (%w); its stderr ends:\n%s", s.waitErr, s.tail.String())
			}
			return
		default:
		}
		_ = s.stdin.Close()
		signalGroup(s.cmd, false)
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			signalGroup(s.cmd, true)
			<-s.done
		}
	})
	return s.closeErr
}

// kill ends a server that never became ready and waits for it.
func (s *Server) kill() {
	_ = s.stdin.Close()
	signalGroup(s.cmd, true)
	<-s.done
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.TrimSpace(t.buf))
	if s == "" {
		return "(nothing)"
	}
	return s
}
