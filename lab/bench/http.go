package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// httpSystem is the service path: the real server (see localServer) in
// this process or in a process of its own (Options.HTTPServerProcess),
// driven over HTTP on a loopback port with a bearer token per principal.
// It reads the tenants the cordon system ingested.
type httpSystem struct {
	srv    benchServer
	base   string
	client *http.Client
	secret string
	// statsErr is the first error reading the server's stats.
	statsErr error

	g      *Generator
	mu     sync.Mutex
	tokens map[string]string // role and principal -> token
	puts   int               // documents the mix wrote
}

// newHTTP starts the server, in a process of its own when process is set
// (writing its CPU profile to cpuProfile when that is not ""), and the
// clients' transport.
func newHTTP(ctx context.Context, dbURL string, conns int32, clients int, cacheBytes int64, process bool, cpuProfile string) (*httpSystem, error) {
	secret, err := randomText(32)
	if err != nil {
		return nil, err
	}
	key := make([]byte, audit.MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	cfg := serverConfig{DatabaseURL: dbURL, Conns: conns, Clients: clients, CacheBytes: cacheBytes, Secret: secret, AuditKey: key}
	var srv benchServer
	if process {
		cfg.CPUProfile = cpuProfile
		srv, err = startChildServer(cfg)
	} else {
		srv, err = startLocalServer(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	// One kept-alive connection per client, as a pooled service client
	// holds; the default keeps only 2 per host. MaxConnsPerHost caps the
	// pool at one connection per client: a connection goes back to the idle
	// pool on the transport's own goroutine after its body is read, so a
	// client's next request may start before that, and without the cap it
	// would dial another connection instead of waiting a moment for its own.
	tr := &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients, MaxConnsPerHost: clients, DisableCompression: true}
	return &httpSystem{srv: srv, base: "http://" + srv.Addr(), client: &http.Client{Transport: tr}, secret: secret, tokens: map[string]string{}}, nil
}

// stats reads the server's stats; the first error is kept in statsErr
// (a zero value is returned).
func (h *httpSystem) stats() serverStats {
	st, err := h.srv.Stats()
	if err != nil && h.statsErr == nil {
		h.statsErr = err
	}
	return st
}

// CacheStats is the server's store's.
func (h *httpSystem) CacheStats() postgres.CacheStats { return h.stats().Cache }

func randomText(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// Ingest stores nothing: the server reads the cordon system's tenants.
func (h *httpSystem) Ingest(_ context.Context, g *Generator, _, _ int, _ func(int64)) (bool, error) {
	h.g = g
	return false, nil
}

// token returns a token of role for the query's principal, minted on first
// use.
func (h *httpSystem) token(role string, q Query) (string, error) {
	p := q.Principal
	key := role + "\x00" + p.Tenant + "\x00" + p.Clearance.String() + "\x00" + strings.Join(p.Barriers, "\x00")
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.tokens[key]; ok {
		return t, nil
	}
	now := time.Now()
	t, err := server.MintHS256(h.secret, server.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "bench-" + role, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(24 * time.Hour))},
		Tenant:           p.Tenant, Clearance: p.Clearance.String(), Barriers: p.Barriers, Roles: []string{role},
	})
	if err != nil {
		return "", err
	}
	h.tokens[key] = t
	return t, nil
}

// do sends body as JSON with role's token for q's principal and decodes a
// 200 answer into out (nil: discarded).
func (h *httpSystem) do(ctx context.Context, method, path, role string, q Query, body, out any) error {
	tok, err := h.token(role, q)
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))}
	}
	// The whole body, to its end: the transport reuses a connection only
	// once its body was read to EOF, and a kept-alive connection is what a
	// service client holds. Then all of it is decoded.
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer bodyBuffers.Put(buf)
	buf.Reset()
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(buf.Bytes(), out)
}

// statusError is an answer other than 200.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// bodyBuffers hold response bodies between requests.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func tenantPath(tenant, rest string) string {
	return "/v1/tenants/" + url.PathEscape(tenant) + rest
}

// retrievePolicy is the bench policy (policy) as a request patch that sets
// every field, so the server ranks exactly as the store-only systems do
// whatever its profile.
func retrievePolicy(q Query) *retrieval.PolicyPatch { return policy(q).Patch() }

func (h *httpSystem) Query(ctx context.Context, q Query) ([]string, error) {
	text, now := q.Text, q.NowTick
	var out struct {
		Results []struct {
			ChunkID string `json:"chunk_id"`
		} `json:"results"`
	}
	err := h.do(ctx, http.MethodPost, tenantPath(q.Principal.Tenant, "/retrieve"), server.RoleReader, q,
		server.RetrieveRequest{Query: &text, NowTick: &now, Policy: retrievePolicy(q)}, &out)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Results))
	for i, r := range out.Results {
		ids[i] = r.ChunkID
	}
	return ids, nil
}

func (h *httpSystem) BytesPerChunk(context.Context) (float64, bool, error) { return 0, false, nil }

func (h *httpSystem) Close() error {
	h.client.CloseIdleConnections()
	if err := h.srv.Close(); err != nil {
		return fmt.Errorf("the http server: %w", err)
	}
	return nil
}

// Operations of a mix.
const (
	OpRetrieve = "retrieve"
	OpGround   = "ground"
	OpAssemble = "assemble"
	OpPut      = "put"
)

var mixOps = []string{OpRetrieve, OpGround, OpAssemble, OpPut}

// DefaultMix is the mix 'cordon-lab bench --mix default' runs.
const DefaultMix = "retrieve=80,ground=10,assemble=5,put=5"

// Mix weighs the operations of a mixed run: retrieve, ground and assemble
// (both over the chunks the query retrieved), and put (a new document of
// the query's tenant).
type Mix map[string]int

// ParseMix parses "retrieve=80,ground=10,assemble=5,put=5" (any subset, in
// any order; weights are relative).
func ParseMix(s string) (Mix, error) {
	if s == "default" {
		s = DefaultMix
	}
	m := Mix{}
	total := 0
	for part := range strings.SplitSeq(s, ",") {
		op, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("mix %q: want OP=WEIGHT,... with OP one of %v", s, mixOps)
		}
		if !slices.Contains(mixOps, op) {
			return nil, fmt.Errorf("mix %q: unknown operation %q (want %v)", s, op, mixOps)
		}
		if _, dup := m[op]; dup {
			return nil, fmt.Errorf("mix %q: %s given twice", s, op)
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("mix %q: weight of %s %q: want an integer >= 0", s, op, w)
		}
		m[op] = n
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("mix %q: the weights sum to 0", s)
	}
	return m, nil
}

// String is the mix in ParseMix's form, operations in a fixed order.
func (m Mix) String() string {
	var parts []string
	for _, op := range mixOps {
		if w, ok := m[op]; ok {
			parts = append(parts, op+"="+strconv.Itoa(w))
		}
	}
	return strings.Join(parts, ",")
}

// schedule assigns an operation to each of n requests: a deterministic
// interleaving (smooth weighted round robin), so every run of a mix sends
// the same sequence.
func (m Mix) schedule(n int) []string {
	total := 0
	for _, w := range m {
		total += w
	}
	cur := make(map[string]int, len(m))
	out := make([]string, n)
	for i := range out {
		best := ""
		for _, op := range mixOps {
			w, ok := m[op]
			if !ok || w == 0 {
				continue
			}
			cur[op] += w
			if best == "" || cur[op] > cur[best] {
				best = op
			}
		}
		cur[best] -= total
		out[i] = best
	}
	return out
}

// MixResult is a mixed run's measurements: every request's operation, the
// throughput of all requests together and each operation's latency.
type MixResult struct {
	Mix      string               `json:"mix"`
	Requests int                  `json:"requests"`
	QPS      float64              `json:"qps"`
	Ops      map[string]*OpResult `json:"ops"`
}

// OpResult is one operation's latency in a mixed run.
type OpResult struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
}

// runMix sends len(queries) requests with conc clients, request i being
// schedule[i] for query i; ground and assemble take the chunks lists[i]
// retrieved.
func (h *httpSystem) runMix(ctx context.Context, m Mix, queries []Query, lists [][]string, conc int, pr *progress) (*MixResult, error) {
	ops := m.schedule(len(queries))
	tenantIndex := map[string]int{}
	for t := range h.g.Config().Tenants {
		tenantIndex[h.g.TenantName(t)] = t
	}
	sys := mixSystem{h: h, ops: ops, lists: lists, tenants: tenantIndex}
	qs := slices.Clone(queries)
	for i := range qs {
		qs[i].seq = i
	}
	lat, _, wall, err := runQueries(ctx, "http mix", &sys, qs, conc, pr)
	if err != nil {
		return nil, err
	}
	res := &MixResult{Mix: m.String(), Requests: len(queries), QPS: float64(len(queries)) / wall.Seconds(), Ops: map[string]*OpResult{}}
	for _, op := range mixOps {
		var l []time.Duration
		for i, o := range ops {
			if o == op {
				l = append(l, lat[i])
			}
		}
		if len(l) == 0 {
			continue
		}
		res.Ops[op] = &OpResult{Count: len(l), P50: ms(Percentile(l, 50)), P95: ms(Percentile(l, 95)), P99: ms(Percentile(l, 99))}
	}
	return res, nil
}

// mixSystem answers query i with operation ops[i], so runQueries' clients
// and statistics drive the mix.
type mixSystem struct {
	h       *httpSystem
	ops     []string
	lists   [][]string
	tenants map[string]int
}

func (s *mixSystem) Query(ctx context.Context, q Query) ([]string, error) {
	i := q.seq
	h := s.h
	path := func(rest string) string { return tenantPath(q.Principal.Tenant, rest) }
	ids := s.lists[i]
	if ids == nil {
		ids = []string{}
	}
	switch s.ops[i] {
	case OpRetrieve:
		return h.Query(ctx, q)
	case OpGround:
		return nil, h.do(ctx, http.MethodPost, path("/ground"), server.RoleReader, q,
			server.GroundRequest{Claims: []string{q.Text}, ChunkIDs: ids}, nil)
	case OpAssemble:
		budget := 2000
		return nil, h.do(ctx, http.MethodPost, path("/assemble"), server.RoleReader, q,
			server.AssembleRequest{Question: &q.Text, ChunkIDs: ids, BudgetTokens: &budget}, nil)
	case OpPut:
		h.mu.Lock()
		n := h.puts
		h.puts++
		h.mu.Unlock()
		doc, _ := h.g.document(s.tenants[q.Principal.Tenant], 1<<24+n, 3)
		doc.DocID = fmt.Sprintf("mix/%06d", n)
		class := doc.Classification.String()
		body := server.DocumentRequest{Text: &doc.Text, Classification: &class, Barriers: doc.Barriers, AsOfTick: &doc.AsOfTick, Title: doc.Title}
		if body.Barriers == nil {
			body.Barriers = []string{}
		}
		return nil, h.do(ctx, http.MethodPut, path("/documents/"+doc.DocID), server.RoleWriter, q, body, nil)
	}
	return nil, fmt.Errorf("mix: unknown operation %q", s.ops[i])
}

func (s *mixSystem) Ingest(context.Context, *Generator, int, int, func(int64)) (bool, error) {
	return false, nil
}
func (s *mixSystem) BytesPerChunk(context.Context) (float64, bool, error) { return 0, false, nil }
func (s *mixSystem) Close() error                                         { return nil }
