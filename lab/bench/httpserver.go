package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordon-rag/cordon/internal/proccpu"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// The http system's server runs in the bench process, or in a process of
// its own (Options.HTTPServerProcess): the bench's executable started again
// with serverChildEnv set, which [ServeChildIfAsked] turns into the server.
// The bench sends the child its serverConfig as one JSON line on stdin and
// reads back one line, {"addr": ...} once it listens (or {"error": ...});
// then each {"op":"stats"} line is answered with a serverStats line, and
// the end of stdin shuts the child down. Its CPU is then the server's
// alone, apart from the clients'.
const serverChildEnv = "CORDON_LAB_BENCH_SERVER"

// serverConfig is what the http system's server is made of.
type serverConfig struct {
	DatabaseURL string `json:"database_url"`
	Conns       int32  `json:"conns"`
	Clients     int    `json:"clients"`
	CacheBytes  int64  `json:"cache_bytes"`
	Secret      string `json:"secret"`
	AuditKey    []byte `json:"audit_key"`
	// CPUProfile, when set, is where a server in a process of its own
	// writes its CPU profile.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// serverStats is what the bench reads of the server.
type serverStats struct {
	Cache       postgres.CacheStats `json:"cache"`
	Audit       audit.Stats         `json:"audit"`
	Connections int64               `json:"connections"`
	// CPU is the server process's CPU so far (0 in the bench process:
	// there it is not apart from the clients').
	CPU time.Duration `json:"cpu_ns"`
}

// benchServer is the http system's server side, wherever it runs.
type benchServer interface {
	Addr() string
	Stats() (serverStats, error)
	// Separate reports whether the server runs in a process of its own.
	Separate() bool
	Close() error
}

// localServer is the real server ([server.New] over the Postgres store
// with the cordon system's options, HS256 tokens, a keyed audit log) on a
// loopback listener in this process.
type localServer struct {
	st     *postgres.Store
	addr   string
	stop   context.CancelFunc
	served chan error
	// conns counts the connections the server accepted: with keep-alive,
	// about one per client for the whole run.
	conns *countingListener
}

func startLocalServer(ctx context.Context, cfg serverConfig) (*localServer, error) {
	keys := &audit.Keyring{Active: "bench", Keys: map[string][]byte{"bench": cfg.AuditKey}}
	st, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{MaxConns: cfg.Conns, CacheBytes: cfg.CacheBytes, CacheLoadInBackground: true, AuditKeys: keys})
	if err != nil {
		return nil, err
	}
	v, err := server.NewVerifier(ctx, server.AuthConfig{HS256Secret: cfg.Secret})
	if err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	cl := &countingListener{Listener: ln}
	// Every client may have its retrieve in progress at once, even all on
	// one tenant: the bench measures the service's work, not the per-tenant
	// admission of cordon serve --tenant-retrieves.
	srv := server.New(server.Config{TenantRequests: cfg.Clients}, st, v)
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, cl) }()
	return &localServer{st: st, addr: ln.Addr().String(), stop: stop, served: served, conns: cl}, nil
}

func (s *localServer) Addr() string   { return s.addr }
func (s *localServer) Separate() bool { return false }

func (s *localServer) Stats() (serverStats, error) {
	return serverStats{Cache: s.st.CacheStats(), Audit: s.st.AuditStats(), Connections: s.conns.n.Load()}, nil
}

func (s *localServer) Close() error {
	s.stop()
	err := <-s.served
	s.st.Close()
	return err
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// childServer is a localServer in a child process (see serverChildEnv).
type childServer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *json.Decoder
	addr string
	mu   sync.Mutex // one stats exchange at a time
}

// childReply is a line of the child's stdout.
type childReply struct {
	Addr  string       `json:"addr,omitempty"`
	Error string       `json:"error,omitempty"`
	Stats *serverStats `json:"stats,omitempty"`
}

func startChildServer(cfg serverConfig) (*childServer, error) {
	if os.Getenv(serverChildEnv) != "" {
		// A server process that did not serve would start one again.
		return nil, fmt.Errorf("http server process: %s is set in this process, which should have served (ServeChildIfAsked)", serverChildEnv)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("http server process: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serverChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("http server process: %w", err)
	}
	c := &childServer{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out))}
	var r childReply
	if err = json.NewEncoder(in).Encode(cfg); err == nil {
		err = c.out.Decode(&r)
	}
	switch {
	case err != nil:
		c.kill()
		return nil, fmt.Errorf("http server process %s: %w (does the binary call bench.ServeChildIfAsked first?)", exe, err)
	case r.Error != "":
		c.Close()
		return nil, fmt.Errorf("http server process: %s", r.Error)
	case r.Addr == "":
		c.kill()
		return nil, errors.New("http server process: no address in its first reply")
	}
	c.addr = r.Addr
	return c, nil
}

func (c *childServer) Addr() string   { return c.addr }
func (c *childServer) Separate() bool { return true }

func (c *childServer) Stats() (serverStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var r childReply
	if _, err := io.WriteString(c.in, `{"op":"stats"}`+"\n"); err != nil {
		return serverStats{}, fmt.Errorf("http server process: %w", err)
	}
	if err := c.out.Decode(&r); err != nil {
		return serverStats{}, fmt.Errorf("http server process: %w", err)
	}
	if r.Stats == nil {
		return serverStats{}, fmt.Errorf("http server process: no stats in its reply (%s)", r.Error)
	}
	return *r.Stats, nil
}

// kill ends a child that is not serving as it should.
func (c *childServer) kill() {
	_ = c.cmd.Process.Kill()
	c.in.Close()
	_ = c.cmd.Wait()
}

// Close ends the child's stdin, which shuts it down, and waits for it.
func (c *childServer) Close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// ServeChildIfAsked runs the http system's server and exits when this
// process is the bench's server process (see serverChildEnv); otherwise it
// returns at once. A binary that runs the bench calls it first in main (a
// test binary in TestMain).
func ServeChildIfAsked() {
	if os.Getenv(serverChildEnv) != "1" {
		return
	}
	os.Exit(serveChild(os.Stdin, os.Stdout))
}

// serveChild is the server process's life: its config from in, then
// stats requests until in ends. It returns the exit code.
func serveChild(in io.Reader, out io.Writer) int {
	dec, enc := json.NewDecoder(bufio.NewReader(in)), json.NewEncoder(out)
	fail := func(err error) int {
		_ = enc.Encode(childReply{Error: err.Error()})
		return 1
	}
	var cfg serverConfig
	if err := dec.Decode(&cfg); err != nil {
		return fail(fmt.Errorf("config: %w", err))
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fail(fmt.Errorf("cpu profile: %w", err))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(fmt.Errorf("cpu profile: %w", err))
		}
		defer pprof.StopCPUProfile()
	}
	s, err := startLocalServer(context.Background(), cfg)
	if err != nil {
		return fail(err)
	}
	if err := enc.Encode(childReply{Addr: s.Addr()}); err != nil {
		s.Close()
		return 1
	}
	for {
		var req struct {
			Op string `json:"op"`
		}
		if err := dec.Decode(&req); err != nil {
			break // stdin ended: the bench is done with the server
		}
		if req.Op != "stats" {
			_ = enc.Encode(childReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
			continue
		}
		st, _ := s.Stats()
		st.CPU = proccpu.Self()
		if err := enc.Encode(childReply{Stats: &st}); err != nil {
			break
		}
	}
	if err := s.Close(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "http server process:", err)
		return 1
	}
	return 0
}
