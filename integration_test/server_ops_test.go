package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/server"
)

// TestServerMetrics: the metrics are not on the API listener (GET /metrics
// there is a 404 like any unknown path) but on a listener of their own,
// with aggregate counters and no tenant label unless asked for.
func TestServerMetrics(t *testing.T) {
	tests := []struct {
		name         string
		tenantLabels bool
		want         []string
	}{
		{"aggregate", false, []string{
			"cordon_retrievals_total 2\n",
			"cordon_retrieval_considered_total ",
			"cordon_retrieval_excluded_by_entitlement_total ",
			"cordon_retrieval_excluded_by_freshness_total 0\n",
			`cordon_retrieval_degraded_total{stage="rerank"} 1`,
		}},
		{"tenant labels", true, []string{
			`cordon_retrievals_total{tenant="wholesale"} 2`,
			`cordon_retrieval_considered_total{tenant="wholesale"}`,
			`cordon_retrieval_excluded_by_entitlement_total{tenant="wholesale"}`,
			`cordon_retrieval_excluded_by_freshness_total{tenant="wholesale"} 0`,
			`cordon_retrieval_degraded_total{stage="rerank",tenant="wholesale"} 1`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{MetricsTenantLabels: tt.tenantLabels}})
			a.seed(t)
			reader := tok(t, "p", "tenant=wholesale", "clearance=public", "reader")
			a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury hold approval"}), http.StatusOK)
			a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury", "policy": map[string]any{"enable_rerank": false}}), http.StatusOK)

			unknown := a.want(t, a.call(t, "GET", "/no-such-path", "", nil), http.StatusNotFound)
			for _, method := range []string{"GET", "POST"} {
				r := a.want(t, a.call(t, method, "/metrics", "", nil), http.StatusNotFound)
				if string(r.body) != string(unknown.body) {
					t.Errorf("%s /metrics on the API listener = %s, want the unknown-path body %s", method, r.body, unknown.body)
				}
			}

			body := a.get(t, a.metricsURL+"/metrics")
			for _, want := range append(tt.want,
				`cordon_http_request_duration_seconds_bucket{code="200",method="POST",route="POST /v1/tenants/{tenant}/retrieve",le="0.1"}`,
				`cordon_db_pool_total_conns`, `cordon_db_pool_acquires_total`, `cordon_audit_append_failures_total 0`, `go_goroutines`,
				// The two retrievals' records, one transaction each.
				"cordon_audit_records_total 2\n", "cordon_audit_commits_total 2\n", "cordon_audit_shared_commits_total 0\n",
				"cordon_audit_shared_redone_total 0\n", "cordon_audit_queued_records 0\n",
				"cordon_audit_oldest_queued_seconds 0\n", "cordon_audit_queue_waited_records_total 2\n",
				"cordon_audit_queue_wait_seconds_total ", "cordon_audit_queue_wait_max_seconds ") {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if got := strings.Contains(body, `tenant="`); got != tt.tenantLabels {
				t.Errorf("tenant labels in /metrics: %v, want %v", got, tt.tenantLabels)
			}
			if strings.Contains(body, "cordon_retrieval_excluded_by_entitlement_total 0\n") ||
				strings.Contains(body, `cordon_retrieval_excluded_by_entitlement_total{tenant="wholesale"} 0`) {
				t.Errorf("hidden chunks were not counted in metrics")
			}
			// The metrics listener serves nothing else.
			res, err := a.client.Get(a.metricsURL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("GET /healthz on the metrics listener = %d, want 404", res.StatusCode)
			}
		})
	}
}

// tcpProxy forwards loopback connections to a target; stop cuts every
// connection and refuses new ones, start listens again on the same address;
// hold stops forwarding what clients send (connections stay open) until
// release.
type tcpProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	// gate is held while the proxy holds client traffic.
	gate sync.RWMutex
}

func (p *tcpProxy) hold()    { p.gate.Lock() }
func (p *tcpProxy) release() { p.gate.Unlock() }

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.stop(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			pipe := func(dst, src net.Conn, gated bool) {
				defer p.wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 {
						if gated {
							p.gate.RLock()
							//lint:ignore SA2001 the lock is a gate: taking it waits while hold() has the write lock
							p.gate.RUnlock()
						}
						if _, werr := dst.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				dst.Close()
				src.Close()
			}
			p.wg.Add(2)
			go pipe(up, c, true)
			go pipe(c, up, false)
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *tcpProxy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("re-listen on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestServerDatabaseOutage cuts the server's database connections while it
// runs (through a TCP proxy: the shared test PostgreSQL must not be
// stopped): requests get 503 and /readyz fails while /healthz stays up;
// service recovers when the database is back; no goroutine leaks.
func TestServerDatabaseOutage(t *testing.T) {
	baseline := runtime.NumGoroutine()
	dbURL := newDatabase(t)
	u, _ := url.Parse(dbURL)
	p := newTCPProxy(t, u.Host)
	pu := *u
	pu.Host = p.addr
	func() {
		a := startAPIServerScoped(t, serverOpts{dbURL: dbURL, storeURL: pu.String()})
		defer a.close()
		a.seed(t)
		reader := tok(t, "r", "tenant=wholesale", "clearance=confidential", "reader")
		writer := tok(t, "w", "tenant=wholesale", "writer")
		retrieve := func() resp {
			return a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "PMT-771 hold"})
		}
		a.want(t, retrieve(), http.StatusOK)
		a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)

		p.stop()
		for i := 0; i < 3; i++ {
			r := retrieve()
			if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" || r.header.Get("Retry-After") == "" {
				t.Fatalf("retrieve during the outage: %d %s, want 503 unavailable", r.status, r.body)
			}
		}
		r := a.call(t, "PUT", "/v1/tenants/wholesale/documents/x", writer, map[string]any{"text": "during outage", "classification": "public"})
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("put during the outage: %d %s, want 503", r.status, r.body)
		}
		r = a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, map[string]any{"claims": []string{"x"}, "chunk_ids": []string{"pay-001::0"}})
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("ground during the outage: %d %s, want 503", r.status, r.body)
		}
		a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusServiceUnavailable)
		a.want(t, a.call(t, "GET", "/healthz", "", nil), http.StatusOK)

		p.start(t)
		deadline := time.Now().Add(15 * time.Second)
		for {
			r := retrieve()
			if r.status == http.StatusOK {
				break
			}
			if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("after the outage: %d %s", r.status, r.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		a.want(t, a.call(t, "GET", "/readyz", "", nil), http.StatusOK)
		a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/x", writer, map[string]any{"text": "after outage", "classification": "public"}), http.StatusOK)
		if _, err := a.store.VerifyAudit(context.Background(), "wholesale"); err != nil {
			t.Fatalf("audit chain after the outage: %v", err)
		}
	}()
	p.stop()
	p.wg.Wait()
	// Everything the server started has ended.
	var n int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= baseline+2 {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d after the server stopped, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
}

// listenerEvents wraps the server's listener to report two events: the
// server reads from a connection again after reading a marker from it, and
// the listener is closed (as a shutdown does first).
//
// Seeing the marker alone is not enough: the request's header and the
// marker (in its body) may arrive in one read, before net/http has parsed
// the header, and a request whose header is parsed after Shutdown has
// begun is dropped with its connection (it was never in flight). The next
// read after the marker comes from the handler reading the rest of the
// body, so by then the request is in flight.
type listenerEvents struct {
	marker       []byte
	read, closed chan struct{}
	onRead       sync.Once
	onClose      sync.Once
}

func newListenerEvents(marker string) *listenerEvents {
	return &listenerEvents{marker: []byte(marker), read: make(chan struct{}), closed: make(chan struct{})}
}

func (e *listenerEvents) wrap(ln net.Listener) net.Listener {
	return &eventListener{Listener: ln, e: e}
}

type eventListener struct {
	net.Listener
	e *listenerEvents
}

func (l *eventListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &eventConn{Conn: c, e: l.e}, nil
}

func (l *eventListener) Close() error {
	l.e.onClose.Do(func() { close(l.e.closed) })
	return l.Listener.Close()
}

type eventConn struct {
	net.Conn
	e      *listenerEvents
	tail   []byte // the last bytes read, so a marker split across reads is seen
	marked bool   // the marker has been read from this connection
}

func (c *eventConn) Read(b []byte) (int, error) {
	if c.marked {
		c.e.onRead.Do(func() { close(c.e.read) })
	}
	n, err := c.Conn.Read(b)
	seen := append(c.tail, b[:n]...)
	if bytes.Contains(seen, c.e.marker) {
		c.marked = true
	}
	if k := len(c.e.marker) - 1; len(seen) > k {
		seen = seen[len(seen)-k:]
	}
	c.tail = append(c.tail[:0], seen...)
	return n, err
}

// TestServerGracefulShutdown stops the server while a request is in flight
// (its body still arriving): the request completes, and new connections are
// refused.
func TestServerGracefulShutdown(t *testing.T) {
	ev := newListenerEvents(`"s1"`)
	a := startAPIServerScoped(t, serverOpts{listener: ev.wrap})
	defer a.close()
	a.seed(t)
	w := tok(t, "w", "tenant=wholesale", "writer")
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", a.url+"/v1/tenants/wholesale/documents:batch", pr)
	req.Header.Set("Authorization", "Bearer "+w)
	req.Header.Set("Content-Type", "application/x-ndjson")
	type result struct {
		r   *http.Response
		err error
	}
	// The in-flight request gets a connection of its own. On a kept-alive
	// connection from a.seed the server would still count the connection
	// idle between reading the bytes the test waits for and parsing the
	// request's header, and Shutdown closes idle connections: the race of
	// any keep-alive client with a shutdown, not the guarantee under test.
	// A new connection is not closed before its first request is parsed.
	fresh := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	done := make(chan result, 1)
	go func() {
		r, err := fresh.Do(req)
		done <- result{r, err}
	}()
	if _, err := pw.Write([]byte(`{"doc_id": "s1", "text": "first in flight", "classification": "public"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	<-ev.read // the handler is now reading the body
	stopped := make(chan struct{})
	go func() { a.close(); close(stopped) }()
	<-ev.closed // the shutdown has begun: no new connections
	select {
	case <-stopped:
		t.Fatalf("the server stopped with a request in flight")
	default:
	}
	if _, err := pw.Write([]byte(`{"doc_id": "s2", "text": "second in flight", "classification": "public"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	res := <-done
	if res.err != nil {
		t.Fatalf("in-flight request failed: %v", res.err)
	}
	body, _ := io.ReadAll(res.r.Body)
	res.r.Body.Close()
	if res.r.StatusCode != 200 || !strings.Contains(string(body), `"succeeded":2`) {
		t.Fatalf("in-flight request: %d %s", res.r.StatusCode, body)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not stop after the in-flight request finished")
	}
	if _, err := (&http.Client{Timeout: 2 * time.Second}).Get(a.url + "/healthz"); err == nil {
		t.Fatalf("the stopped server still accepts connections")
	}
}

// TestServerRequestTimeout: the request context (with the server's request
// timeout) is the one the database calls run under. The database is held
// (through a proxy that forwards nothing until released), so the call can
// only end by the request's deadline: a 503, not a hang.
func TestServerRequestTimeout(t *testing.T) {
	dbURL := newDatabase(t)
	u, _ := url.Parse(dbURL)
	p := newTCPProxy(t, u.Host)
	pu := *u
	pu.Host = p.addr
	a := startAPIServer(t, serverOpts{dbURL: dbURL, storeURL: pu.String(), cfg: server.Config{RequestTimeout: 500 * time.Millisecond}})
	p.hold()
	r := a.call(t, "POST", "/v1/tenants", tok(t, "root", "admin"), map[string]string{"tenant": "wholesale"})
	p.release()
	if r.status != http.StatusServiceUnavailable || r.errCode(t) != "unavailable" {
		t.Fatalf("a request past its deadline: %d %s, want 503", r.status, r.body)
	}
}

// TestServerMetricsLabelsBounded: over a real listener and database, with
// tenant labels on, requests carrying made-up methods, random paths and
// made-up tenant names in their URLs (without a token, with another
// tenant's, and with valid tokens naming the made-up tenant) add no series
// to /metrics: a second round of different made-up values leaves the series
// as they were, and the only tenant named is the one that was served.
func TestServerMetricsLabelsBounded(t *testing.T) {
	a := startAPIServer(t, serverOpts{metrics: true, cfg: server.Config{MetricsTenantLabels: true}})
	a.seed(t)
	reader := tok(t, "p", "tenant=wholesale", "clearance=public", "reader")
	// Redirects are answered, not followed: the router's own 307s count.
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, token, body string) {
		t.Helper()
		req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	scrape := func() (series map[string]bool, tenants []string, body string) {
		t.Helper()
		body = a.get(t, a.metricsURL+"/metrics")
		series = map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "cordon_") {
				continue
			}
			name, _, _ := strings.Cut(line, " ")
			series[name] = true
			if _, rest, ok := strings.Cut(name, `tenant="`); ok {
				tn, _, _ := strings.Cut(rest, `"`)
				if !slices.Contains(tenants, tn) {
					tenants = append(tenants, tn)
				}
			}
		}
		return series, tenants, body
	}
	const query = `{"query": "treasury hold approval"}`
	var words []string
	round := func(r int) {
		for i := range 20 {
			word := fmt.Sprintf("zq%dx%02d", r, i)
			words = append(words, word)
			send(strings.ToUpper(word), "/healthz", "", "")
			send(strings.ToUpper(word)+"ABCDEFGHIJ", "/v1/tenants/wholesale/retrieve", reader, query)
			send("GET", "/"+word+"/"+word+"?"+word+"=1", "", "")
			send("POST", "/v1/tenants/"+word+"/retrieve", "", query)
			send("POST", "/v1/tenants/"+word+"/retrieve", reader, query)
			send("PUT", "/v1/tenants/"+word+"/documents", reader, "")
			// Valid tokens whose tenant is the made-up one.
			own := tok(t, "u-"+word, "tenant="+word, "clearance=restricted", "reader", "writer", "auditor")
			send("POST", "/v1/tenants/"+word+"/retrieve", own, query)
			send("POST", "/v1/tenants/"+word+"/ground", own, `{"chunk_ids": ["x::0"]}`)
			send("PUT", "/v1/tenants/"+word+"/documents/"+word, own, `{"text": "treasury"}`)
			send("DELETE", "/v1/tenants/"+word+"/documents/"+word, own, "")
		}
		a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", reader, map[string]any{"query": "treasury"}), http.StatusOK)
	}
	round(1)
	first, tenants, body := scrape()
	if !slices.Equal(tenants, []string{"wholesale"}) {
		t.Errorf("tenant labels %v, want only wholesale", tenants)
	}
	for _, w := range words {
		if strings.Contains(strings.ToLower(body), w) {
			t.Fatalf("/metrics carries the made-up %q", w)
		}
	}
	// The valid tokens naming no tenant were answered as an empty tenant,
	// and counted for the operator: at least the 20 retrieves a round.
	unknown := func(body string) int {
		for line := range strings.SplitSeq(body, "\n") {
			if v, ok := strings.CutPrefix(line, "cordon_unknown_tenant_requests_total "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("cordon_unknown_tenant_requests_total %q", v)
				}
				return n
			}
		}
		t.Fatal("/metrics lacks cordon_unknown_tenant_requests_total")
		return 0
	}
	n1 := unknown(body)
	if n1 < 20 {
		t.Fatalf("cordon_unknown_tenant_requests_total %d after a round of 20 retrieves by tokens naming no tenant", n1)
	}
	round(2)
	second, _, body2 := scrape()
	if n2 := unknown(body2); n2 != 2*n1 {
		t.Fatalf("cordon_unknown_tenant_requests_total %d after the second round, want %d", n2, 2*n1)
	}
	var added []string
	for s := range second {
		if !first[s] {
			added = append(added, s)
		}
	}
	if len(added) > 0 {
		t.Fatalf("a second round of made-up values added %d series (%d, then %d), e.g. %v", len(added), len(first), len(second), added[:min(3, len(added))])
	}
}
