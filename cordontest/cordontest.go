package cordontest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// The database Run creates, and its superuser.
const (
	DatabaseName = "cordon"
	DatabaseUser = "postgres"
	// DatabasePassword is fixed: the database lives as long as the test.
	DatabasePassword = "postgres"
)

// startTimeout bounds each container's start (an image already present).
const startTimeout = 2 * time.Minute

// Container is a running Cordon: the PostgreSQL container it embeds, and
// the API, in the test process or in [Container.Cordon].
type Container struct {
	testcontainers.Container // PostgreSQL with pgvector

	// Cordon is the container serving the API under [WithCordonImage];
	// nil otherwise.
	Cordon testcontainers.Container

	databaseURL string
	url         string
	secret      string
	stopServer  func(context.Context) error // the in-process server; nil without one
}

// Run starts PostgreSQL with pgvector from image, migrates Cordon's schema
// into its database, and serves Cordon's API on loopback (see the package
// documentation for where and how). opts are Cordon's [Option]s and
// testcontainers-go's customizers for the PostgreSQL container. On error
// the returned Container, when not nil, holds what was started: terminate
// it (testcontainers.CleanupContainer does, nil or not).
func Run(ctx context.Context, image string, opts ...testcontainers.ContainerCustomizer) (*Container, error) {
	var o options
	for _, opt := range opts {
		if apply, ok := opt.(Option); ok {
			apply(&o)
		}
	}
	secret, err := randomBase64(32)
	if err != nil {
		return nil, err
	}
	if err := engineNetworking(ctx, &o); err != nil {
		return nil, err
	}
	c := &Container{secret: secret}
	if err := c.startPostgres(ctx, image, o, opts); err != nil {
		return c.orNil(), err
	}
	switch {
	case o.cordonImage != "":
		err = c.runCordonImage(ctx, o)
	default:
		if _, err = migrate.Up(ctx, c.databaseURL); err != nil {
			err = fmt.Errorf("migrate: %w", err)
		}
	}
	if err == nil {
		err = c.createTenants(ctx, o.tenants)
	}
	if err == nil && !o.noServer && o.cordonImage == "" {
		err = c.serveInProcess(ctx, o)
	}
	return c, err
}

// orNil is c, or nil when nothing was started.
func (c *Container) orNil() *Container {
	if c.Container == nil {
		return nil
	}
	return c
}

// DatabaseURL is the URL of the migrated database, as its superuser, on
// loopback (or the Docker host).
func (c *Container) DatabaseURL() string { return c.databaseURL }

// URL is the API's base URL, such as http://127.0.0.1:40123; empty under
// [WithoutServer].
func (c *Container) URL() string { return c.url }

// Secret is the HS256 secret the server verifies tokens with (what
// 'cordon serve' reads from CORDON_JWT_HS256_SECRET).
func (c *Container) Secret() string { return c.secret }

// Principal is who a token speaks for. Roles are "reader", "writer",
// "auditor" and "admin"; Clearance is "public" (when empty), "internal",
// "confidential" or "restricted".
type Principal struct {
	Subject   string
	Tenant    string
	Clearance string
	Barriers  []string
	Roles     []string
	// TTL is the token's lifetime (default an hour).
	TTL time.Duration
}

// Token mints a bearer token for p, as 'cordon token' does. Claims the
// server would refuse (an unknown role or clearance) are an error here.
func (c *Container) Token(p Principal) (string, error) {
	if p.Subject == "" {
		return "", errors.New("cordontest: a token needs a Subject")
	}
	for _, r := range p.Roles {
		if !server.IsRole(r) {
			return "", fmt.Errorf("cordontest: unknown role %q (want reader, writer, auditor or admin)", r)
		}
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	clearance := p.Clearance
	if clearance == "" {
		clearance = "public"
	}
	now := time.Now()
	claims := server.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: p.Subject, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))},
		Tenant:           p.Tenant, Clearance: clearance, Barriers: p.Barriers, Roles: p.Roles,
	}
	if _, err := server.IdentityFromClaims(claims); err != nil {
		return "", fmt.Errorf("cordontest: %w", err)
	}
	return server.MintHS256(c.secret, claims)
}

// Client returns an HTTP client that sends token as the bearer of every
// request that carries no Authorization header of its own.
func (c *Container) Client(token string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: bearer{token: token, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// Terminate stops the server (gracefully: in-flight requests finish) and
// removes the containers. It implements testcontainers.Container's
// Terminate, so testcontainers.CleanupContainer and TerminateContainer
// take a *Container.
func (c *Container) Terminate(ctx context.Context, opts ...testcontainers.TerminateOption) error {
	var errs []error
	if c.stopServer != nil {
		errs = append(errs, c.stopServer(ctx))
		c.stopServer = nil
	}
	if c.Cordon != nil {
		errs = append(errs, c.Cordon.Terminate(ctx, opts...))
	}
	if c.Container != nil {
		errs = append(errs, c.Container.Terminate(ctx, opts...))
	}
	return errors.Join(errs...)
}

// postgresSettings is an init script (run once, before the server's real
// start) that tunes the throwaway server as scripts/db.sh tunes its
// cluster: durability off, room for the connections of parallel tests. In
// postgresql.conf rather than on the command line, so that a standby
// cloned from the server (pg_basebackup) gets the same max_connections, as
// a hot standby must.
const postgresSettings = `cat >>"$PGDATA/postgresql.conf" <<'EOF'
# --- cordontest (throwaway test server) ---
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
`

// startPostgres starts the database container and waits until it takes
// connections.
func (c *Container) startPostgres(ctx context.Context, image string, o options, opts []testcontainers.ContainerCustomizer) error {
	cmd := []string{"postgres"}
	env := map[string]string{"POSTGRES_USER": DatabaseUser, "POSTGRES_PASSWORD": DatabasePassword, "POSTGRES_DB": DatabaseName}
	base := []testcontainers.ContainerCustomizer{
		testcontainers.WithEnv(env),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(postgresSettings), ContainerFilePath: "/docker-entrypoint-initdb.d/cordontest.sh", FileMode: 0o644}),
		// The official image logs "ready" for its init server and again for
		// the real one; the second means the database exists.
		testcontainers.WithWaitStrategy(wait.ForLog("database system is ready to accept connections").
			WithOccurrence(2).WithStartupTimeout(startTimeout)),
	}
	var port int
	if o.hostNetwork {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
		env["PGPORT"] = strconv.Itoa(port)
		cmd = append(cmd, "-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(port))
		base = append(base, hostNetwork())
	} else {
		base = append(base, testcontainers.WithExposedPorts("5432/tcp"))
	}
	base = append(base, testcontainers.WithCmd(cmd...))
	ctr, err := run(ctx, o.hostNetwork, image, append(base, opts...)...)
	if present(ctr) {
		c.Container = ctr
	}
	if err != nil {
		return fmt.Errorf("cordontest: start PostgreSQL (%s): %w", image, err)
	}
	host := "127.0.0.1"
	if !o.hostNetwork {
		if host, err = ctr.Host(ctx); err != nil {
			return fmt.Errorf("cordontest: %w", err)
		}
		p, err := ctr.MappedPort(ctx, "5432/tcp")
		if err != nil {
			return fmt.Errorf("cordontest: %w", err)
		}
		port = int(p.Num())
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(DatabaseUser, DatabasePassword),
		Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/" + DatabaseName, RawQuery: "sslmode=disable"}
	c.databaseURL = u.String()
	return ping(ctx, c.databaseURL)
}

// ping connects until the database answers: the log line comes a moment
// before a published port forwards.
func ping(ctx context.Context, dsn string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cordontest: PostgreSQL does not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTenants creates the tenants through the store, whichever process
// serves.
func (c *Container) createTenants(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	st, err := postgres.Open(ctx, c.databaseURL, postgres.Options{})
	if err != nil {
		return fmt.Errorf("cordontest: %w", err)
	}
	defer st.Close()
	for _, n := range names {
		if _, err := st.CreateTenant(ctx, n, index.DefaultSettings()); err != nil {
			return fmt.Errorf("cordontest: create tenant %q: %w", n, err)
		}
	}
	return nil
}

// auditKeyring is a fresh keyring of one key, k1, and its file form.
func auditKeyring() (*audit.Keyring, string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, "", err
	}
	return &audit.Keyring{Active: "k1", Keys: map[string][]byte{"k1": key}},
		"k1 " + base64.StdEncoding.EncodeToString(key) + "\n", nil
}

// serveInProcess serves the API from this process on a loopback port, as
// 'cordon serve' would with an HS256 secret and a generated audit key.
func (c *Container) serveInProcess(ctx context.Context, o options) error {
	keys, _, err := auditKeyring()
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, c.databaseURL, postgres.Options{AuditKeys: keys})
	if err != nil {
		return fmt.Errorf("cordontest: %w", err)
	}
	v, err := server.NewVerifier(ctx, server.AuthConfig{HS256Secret: c.secret, Leeway: server.DefaultLeeway})
	if err != nil {
		st.Close()
		return fmt.Errorf("cordontest: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return fmt.Errorf("cordontest: %w", err)
	}
	cfg := server.DefaultConfig()
	cfg.Logger = o.logger
	srv := server.New(cfg, st, v)
	// The server outlives Run's ctx: it stops in Terminate.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(sctx, ln)
		st.Close()
		done <- err
	}()
	c.url = "http://" + ln.Addr().String()
	c.stopServer = func(ctx context.Context) error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// runCordonImage runs 'cordon migrate' to completion, then (unless
// WithoutServer) 'cordon serve', both from o.cordonImage.
func (c *Container) runCordonImage(ctx context.Context, o options) error {
	dbURL := c.databaseURL
	if !o.hostNetwork {
		// Container to container: PostgreSQL's own address and port.
		ip, err := c.Container.ContainerIP(ctx)
		if err != nil {
			return fmt.Errorf("cordontest: %w", err)
		}
		u, _ := url.Parse(dbURL)
		u.Host = net.JoinHostPort(ip, "5432")
		dbURL = u.String()
	}
	migrate := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd("migrate"),
		testcontainers.WithEnv(map[string]string{"CORDON_DATABASE_URL": dbURL}),
		testcontainers.WithWaitStrategy(wait.ForExit().WithExitTimeout(startTimeout)),
	}
	if o.hostNetwork {
		migrate = append(migrate, hostNetwork())
	}
	mig, err := run(ctx, o.hostNetwork, o.cordonImage, migrate...)
	if present(mig) {
		defer func() { _ = mig.Terminate(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		return fmt.Errorf("cordontest: cordon migrate (%s): %w", o.cordonImage, err)
	}
	if err := exitedZero(ctx, mig); err != nil {
		return fmt.Errorf("cordontest: cordon migrate (%s): %w", o.cordonImage, err)
	}
	if o.noServer {
		return nil
	}
	_, keyFile, err := auditKeyring()
	if err != nil {
		return err
	}
	env := map[string]string{
		"CORDON_DATABASE_URL":     dbURL,
		"CORDON_JWT_HS256_SECRET": c.secret,
		"CORDON_AUDIT_KEY_FILE":   "/etc/cordon/audit.keys",
		// The image listens on 0.0.0.0:9090 for metrics: on the host's
		// network that would be every interface, so none.
		"CORDON_METRICS_ADDR": "",
	}
	customizers := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd("serve"),
		testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(keyFile), ContainerFilePath: "/etc/cordon/audit.keys", FileMode: 0o444}),
	}
	var port int
	if o.hostNetwork {
		if port, err = freePort(); err != nil {
			return err
		}
		env["CORDON_LISTEN"] = "127.0.0.1:" + strconv.Itoa(port)
		customizers = append(customizers, hostNetwork())
	} else {
		customizers = append(customizers, testcontainers.WithExposedPorts("8080/tcp"))
	}
	customizers = append(customizers, testcontainers.WithEnv(env))
	srv, err := run(ctx, o.hostNetwork, o.cordonImage, customizers...)
	if present(srv) {
		c.Cordon = srv
	}
	if err != nil {
		return fmt.Errorf("cordontest: cordon serve (%s): %w", o.cordonImage, err)
	}
	host := "127.0.0.1"
	if !o.hostNetwork {
		if host, err = srv.Host(ctx); err != nil {
			return fmt.Errorf("cordontest: %w", err)
		}
		p, err := srv.MappedPort(ctx, "8080/tcp")
		if err != nil {
			return fmt.Errorf("cordontest: %w", err)
		}
		port = int(p.Num())
	}
	c.url = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	return c.waitReady(ctx, srv)
}

// waitReady polls /readyz until it answers 200, failing early when the
// server's container has exited.
func (c *Container) waitReady(ctx context.Context, srv testcontainers.Container) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := client.Get(c.url + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /readyz: %s", resp.Status)
		}
		if st, serr := srv.State(ctx); serr == nil && !st.Running {
			return fmt.Errorf("cordontest: cordon serve exited %d: %s", st.ExitCode, Logs(ctx, srv))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cordontest: cordon serve is not ready: %w: %s", err, Logs(ctx, srv))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exitedZero checks that a container that has exited exited with 0.
func exitedZero(ctx context.Context, ctr testcontainers.Container) error {
	st, err := ctr.State(ctx)
	if err != nil {
		return err
	}
	if st.Running || st.ExitCode != 0 {
		return fmt.Errorf("exit code %d (running %v): %s", st.ExitCode, st.Running, Logs(ctx, ctr))
	}
	return nil
}

// Logs returns a container's log (stdout and stderr), or why it cannot.
func Logs(ctx context.Context, ctr testcontainers.Container) string {
	r, err := ctr.Logs(ctx)
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return string(b) + "(reading logs: " + err.Error() + ")"
	}
	return string(b)
}

// run creates and starts a container as testcontainers.Run does. On the
// host's network the provider takes "host" for its default network:
// testcontainers-go otherwise, finding no "bridge" network (dockerd
// --bridge=none), creates a bridge network of its own and attaches every
// container to it, whatever its network mode.
func run(ctx context.Context, hostNet bool, image string, opts ...testcontainers.ContainerCustomizer) (testcontainers.Container, error) {
	req := testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{Image: image}, Started: true}
	for _, opt := range opts {
		if err := opt.Customize(&req); err != nil {
			return nil, fmt.Errorf("customize: %w", err)
		}
	}
	if !hostNet {
		return testcontainers.GenericContainer(ctx, req)
	}
	p, err := testcontainers.NewDockerProvider(testcontainers.WithDefaultBridgeNetwork("host"))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	ctr, err := p.CreateContainer(ctx, req.ContainerRequest)
	if err != nil {
		return ctr, fmt.Errorf("create container: %w", err)
	}
	if err := ctr.Start(ctx); err != nil {
		return ctr, fmt.Errorf("start container: %w", err)
	}
	return ctr, nil
}

// present reports whether ctr holds a container (not a nil interface, nor
// one holding a nil pointer).
func present(ctr testcontainers.Container) bool {
	if ctr == nil {
		return false
	}
	v := reflect.ValueOf(ctr)
	return v.Kind() != reflect.Pointer || !v.IsNil()
}

// hostNetwork puts a container in the host's network namespace.
func hostNetwork() testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.NetworkMode = "host" })
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the container binds it; the container then fails to
// start and Run says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cordontest: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randomBase64(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
