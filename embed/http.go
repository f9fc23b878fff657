package embed

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/cordon-rag/cordon/internal/redact"
)

// The APIs [NewHTTP] speaks (HTTPConfig.API).
const (
	// APIOpenAI is POST {url}/v1/embeddings, the OpenAI embeddings API,
	// also served by Ollama, text-embeddings-inference and vLLM.
	APIOpenAI = "openai"
	// APIOllama is Ollama's own POST {url}/api/embed.
	APIOllama = "ollama"
	// APITEI is text-embeddings-inference's own POST {url}/embed.
	APITEI = "tei"
)

// Defaults and limits of [HTTPConfig].
const (
	// DefaultBatch is the most texts per request when Batch is 0:
	// text-embeddings-inference refuses more than 32 by default
	// (--max-client-batch-size).
	DefaultBatch = 32
	// MaxBatch is the OpenAI API's limit of inputs per request.
	MaxBatch = 2048
	// DefaultTimeout bounds one request when Timeout is 0.
	DefaultTimeout = 30 * time.Second
	// DefaultRetries is the retry count the command line uses; the zero
	// HTTPConfig.Retries means no retries.
	DefaultRetries = 3
	// MaxRetries bounds Retries.
	MaxRetries = 10
	// DefaultBackoff is the first retry's wait when Backoff is 0; each
	// further retry doubles it, up to MaxBackoff.
	DefaultBackoff = 250 * time.Millisecond
	// DefaultMaxBackoff caps the backoff when MaxBackoff is 0.
	DefaultMaxBackoff = 10 * time.Second
	// MaxRetryAfter is the longest Retry-After a provider may ask for;
	// a longer one ends the call instead of parking it.
	MaxRetryAfter = time.Minute
	// MaxConcurrency bounds Concurrency.
	MaxConcurrency = 16
	// MaxPrefixBytes bounds DocPrefix and QueryPrefix.
	MaxPrefixBytes = 1024
	// maxErrorBody is how much of an error answer is read for its message.
	maxErrorBody = 4 << 10
)

// HTTPConfig configures an embedding provider reached over HTTP. The
// comments name the cordon command-line flags that set each field.
type HTTPConfig struct {
	// API is the protocol: APIOpenAI, APIOllama or APITEI (--embed-api).
	API string
	// URL is the server's base URL, http or https, without credentials,
	// query or fragment, e.g. "http://localhost:11434" (--embed-url). For
	// APIOpenAI a trailing "/v1" is accepted and not doubled.
	URL string
	// Model is the name the server serves the model under (--embed-model).
	Model string
	// Dims is the model's vector length, 1..16000; every vector is checked
	// against it (--embed-dims).
	Dims int
	// RequestDims sends Dims as the request's "dimensions" (APIOpenAI only),
	// for models that can shorten their vectors, such as OpenAI's
	// text-embedding-3 (--embed-request-dims).
	RequestDims bool
	// KeyFile is a file holding the API key, sent as "Authorization:
	// Bearer <key>" (--embed-key-file). Surrounding whitespace is ignored.
	KeyFile string
	// KeyEnv names an environment variable holding the API key instead
	// (--embed-key-env). The key is read once, by NewHTTP.
	KeyEnv string
	// Batch is the most texts per request, 1..MaxBatch; 0 is DefaultBatch
	// (--embed-batch). Longer calls are split and reassembled in order.
	Batch int
	// Concurrency is how many requests of one call may be in flight,
	// 1..MaxConcurrency; 0 is 1 (--embed-concurrency).
	Concurrency int
	// Timeout bounds each request, answer included; 0 is DefaultTimeout
	// (--embed-timeout).
	Timeout time.Duration
	// Retries is how many times a transient failure (no connection, a
	// timeout, 429, 5xx) is retried, 0..MaxRetries; 0 is none
	// (--embed-retries, whose default is DefaultRetries).
	Retries int
	// Backoff is the wait before the first retry, doubled for each next one
	// up to MaxBackoff, each wait drawn uniformly from its upper half;
	// 0 is DefaultBackoff and DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// RateLimit caps requests per second to the server (retries included);
	// 0 is no limit (--embed-rate).
	RateLimit float64
	// RateBurst is how many requests may go at once before RateLimit
	// spaces them; 0 is 1 (--embed-burst).
	RateBurst int
	// MaxResponseBytes bounds a successful answer's size; 0 allows 48
	// bytes per vector component plus 1 MiB.
	MaxResponseBytes int64
	// DocPrefix and QueryPrefix are prepended to document and query texts,
	// for models trained with them, e.g. "passage: " and "query: " for E5
	// (--embed-doc-prefix, --embed-query-prefix).
	DocPrefix, QueryPrefix string
	// SameOriginRedirects follows a redirect whose target has the scheme,
	// host and port of URL (--embed-same-origin-redirects); any other
	// redirect is an error. Off, no redirect is followed: a redirect would
	// send the texts, and on the same host the API key too, to an address
	// the operator did not name.
	SameOriginRedirects bool
	// Client sends the requests; nil is a client of its own (per-request
	// timeouts come from Timeout and the context, not the client). Its
	// redirect policy is replaced by SameOriginRedirects' (a copy of the
	// client is used).
	Client *http.Client
}

// HTTP is an [Embedder] that asks an embedding server over HTTP (see
// [NewHTTP]). It is safe for concurrent use.
type HTTP struct {
	api         wireAPI
	endpoint    string // the URL posted to, for requests and messages
	model       string
	dims        int
	requestDims bool
	key         string
	batch       int
	concurrency int
	timeout     time.Duration
	retries     int
	backoff     time.Duration
	maxBackoff  time.Duration
	limiter     *rate.Limiter
	maxResponse int64
	docPrefix   string
	queryPrefix string
	client      *http.Client
	sameOrigin  bool // SameOriginRedirects
	clock       clock
	// redactor hides the API key in what a server sends back.
	redactor *redact.Redactor
	// observer, when set, is told of every call, request and retry
	// ([HTTP.Observe]).
	observer atomic.Pointer[Observer]
}

var _ Embedder = (*HTTP)(nil)

// clock is time as the client sees it; tests replace it to check waits
// without sleeping.
type clock struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

var realClock = clock{now: time.Now, sleep: sleepCtx}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wireAPI is what differs between the APIs: the path, the request body and
// the decoding of a successful answer.
type wireAPI struct {
	name    string
	path    string
	request func(h *HTTP, texts []string) any
	// decode returns exactly n vectors in input order, each non-empty and
	// finite as float32, or an error saying what is wrong.
	decode func(data []byte, n int) ([][]float32, error)
}

var wireAPIs = map[string]wireAPI{
	APIOpenAI: openAIAPI,
	APIOllama: ollamaAPI,
	APITEI:    teiAPI,
}

// NewHTTP validates c, reads the API key, and returns the provider. Its
// errors wrap [ErrInvalidConfig] and name the flag to fix.
func NewHTTP(c HTTPConfig) (*HTTP, error) {
	bad := func(format string, a ...any) (*HTTP, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	api, ok := wireAPIs[c.API]
	if !ok {
		return bad("--embed-api %q is not an API Cordon speaks: use openai, ollama or tei", c.API)
	}
	endpoint, err := endpointURL(c.URL, api)
	if err != nil {
		return bad("%v", err)
	}
	if err := ValidateModel(c.Model); err != nil {
		return bad("--embed-model: %v", err)
	}
	if c.Model == Hash {
		return bad("--embed-model %q is built in and needs no provider", Hash)
	}
	if c.Dims < 1 || c.Dims > 16000 {
		return bad("--embed-dims %d must be the model's vector length, 1..16000", c.Dims)
	}
	if c.RequestDims && c.API != APIOpenAI {
		return bad("--embed-request-dims needs --embed-api openai (the %s API has no \"dimensions\")", c.API)
	}
	key, err := readKey(c.KeyFile, c.KeyEnv)
	if err != nil {
		return bad("%v", err)
	}
	h := &HTTP{
		api: api, endpoint: endpoint, model: c.Model, dims: c.Dims, requestDims: c.RequestDims, key: key,
		batch: cmpOr(c.Batch, DefaultBatch), concurrency: cmpOr(c.Concurrency, 1),
		timeout: cmpOr(c.Timeout, DefaultTimeout), retries: c.Retries,
		backoff: cmpOr(c.Backoff, DefaultBackoff), maxBackoff: cmpOr(c.MaxBackoff, DefaultMaxBackoff),
		docPrefix: c.DocPrefix, queryPrefix: c.QueryPrefix,
		sameOrigin: c.SameOriginRedirects, clock: realClock, redactor: redact.New(key),
	}
	switch {
	case h.batch < 1 || h.batch > MaxBatch:
		return bad("--embed-batch %d must be in 1..%d", c.Batch, MaxBatch)
	case h.concurrency < 1 || h.concurrency > MaxConcurrency:
		return bad("--embed-concurrency %d must be in 1..%d", c.Concurrency, MaxConcurrency)
	case h.timeout < 0:
		return bad("--embed-timeout %s must be positive", c.Timeout)
	case h.retries < 0 || h.retries > MaxRetries:
		return bad("--embed-retries %d must be in 0..%d", c.Retries, MaxRetries)
	case h.backoff < 0 || h.maxBackoff < 0 || h.backoff > h.maxBackoff:
		return bad("backoff %s and max backoff %s must be positive, the first no larger than the second", h.backoff, h.maxBackoff)
	case math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) || c.RateLimit < 0:
		return bad("--embed-rate %v must be a finite number of requests per second, or 0 for no limit", c.RateLimit)
	case c.RateBurst < 0:
		return bad("--embed-burst %d must not be negative", c.RateBurst)
	case c.RateBurst > 0 && c.RateLimit == 0:
		return bad("--embed-burst needs --embed-rate")
	case c.MaxResponseBytes < 0:
		return bad("max response bytes %d must not be negative", c.MaxResponseBytes)
	}
	for _, p := range []struct{ flag, v string }{{"--embed-doc-prefix", c.DocPrefix}, {"--embed-query-prefix", c.QueryPrefix}} {
		if len(p.v) > MaxPrefixBytes || !utf8.ValidString(p.v) {
			return bad("%s must be valid UTF-8 of at most %d bytes", p.flag, MaxPrefixBytes)
		}
	}
	if c.RateLimit > 0 {
		h.limiter = rate.NewLimiter(rate.Limit(c.RateLimit), cmpOr(c.RateBurst, 1))
	}
	h.maxResponse = c.MaxResponseBytes
	if h.maxResponse == 0 {
		h.maxResponse = 1<<20 + int64(h.batch)*int64(h.dims)*48
	}
	if c.Client != nil {
		cl := *c.Client
		h.client = &cl
	} else {
		// Keep a connection per concurrent batch (the default keeps 2).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, h.concurrency)
		h.client = &http.Client{Transport: t}
	}
	h.client.CheckRedirect = h.checkRedirect
	return h, nil
}

// maxRedirects bounds the same-origin redirects of one request, as
// net/http's default policy does.
const maxRedirects = 10

// checkRedirect is the client's redirect policy: a refused redirect ends
// the request with the redirect as its answer (statusFailure describes it),
// before anything is sent to its target.
func (h *HTTP) checkRedirect(req *http.Request, via []*http.Request) error {
	if !h.sameOrigin || !sameOrigin(req.URL, via[0].URL) || len(via) > maxRedirects {
		return http.ErrUseLastResponse
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (the scheme's default port when none is given).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// endpointURL checks the base URL and joins the API's path to it.
func endpointURL(base string, api wireAPI) (string, error) {
	u, err := url.Parse(base)
	if err != nil || base == "" {
		return "", fmt.Errorf("--embed-url %q is not a URL: give the server's base URL, e.g. http://localhost:11434", base)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("--embed-url %q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		return "", fmt.Errorf("--embed-url %q has no host", u.Redacted())
	case u.User != nil:
		return "", errors.New("--embed-url must not carry credentials: put the API key in --embed-key-file or --embed-key-env")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("--embed-url %q must not have a query or fragment: give the base URL only", u.Scheme+"://"+u.Host+u.EscapedPath())
	}
	path := strings.TrimRight(u.Path, "/")
	if api.name == APIOpenAI {
		path = strings.TrimSuffix(path, "/v1")
	}
	u.Path, u.RawPath = path+api.path, ""
	return u.String(), nil
}

// readKey reads the API key from a file or an environment variable. Its
// messages never contain the key.
func readKey(file, env string) (string, error) {
	var key, from string
	switch {
	case file != "" && env != "":
		return "", errors.New("give the API key by --embed-key-file or --embed-key-env, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read --embed-key-file: %w", err)
		}
		key, from = strings.TrimSpace(string(b)), "--embed-key-file "+strconv.Quote(file)
	case env != "":
		key, from = strings.TrimSpace(os.Getenv(env)), "environment variable "+env+" (--embed-key-env)"
	default:
		return "", nil
	}
	if key == "" {
		return "", fmt.Errorf("%s holds no API key", from)
	}
	for _, r := range key {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("the API key in %s has a space, line break or non-ASCII character inside; it must be one line of printable ASCII", from)
		}
	}
	return key, nil
}

// Spec is the model spec this provider serves.
func (h *HTTP) Spec() Spec { return Spec{Model: h.model, Dims: h.dims} }

// String names the provider without its API key.
func (h *HTTP) String() string {
	return fmt.Sprintf("%s %s (model %s)", h.api.name, h.endpoint, h.Spec())
}

// GoString keeps %#v from printing the API key.
func (h *HTTP) GoString() string { return "embed.HTTP{" + h.String() + "}" }

// Embed embeds texts, prefixed for kind, in batches of at most Batch texts,
// and returns one vector of Dims components per text, in order.
func (h *HTTP) Embed(ctx context.Context, texts []string, kind Kind) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	obs := h.obs()
	if obs == nil {
		return h.embed(ctx, texts, kind, nil)
	}
	obs.Begin(len(texts))
	start := h.clock.now()
	out, err := h.embed(ctx, texts, kind, obs)
	obs.Call(OutcomeOf(err), h.clock.now().Sub(start))
	return out, err
}

// embed is [HTTP.Embed] reporting each request to obs (when not nil).
func (h *HTTP) embed(ctx context.Context, texts []string, kind Kind, obs Observer) ([][]float32, error) {
	prefix := h.docPrefix
	if kind == Query {
		prefix = h.queryPrefix
	}
	out := make([][]float32, len(texts))
	run := func(ctx context.Context, lo, hi int) error {
		batch := texts[lo:hi]
		if prefix != "" {
			batch = make([]string, hi-lo)
			for i, t := range texts[lo:hi] {
				batch[i] = prefix + t
			}
		}
		if obs != nil {
			obs.Batch(len(batch))
		}
		vs, err := h.embedBatch(ctx, batch, obs)
		if err != nil {
			if len(texts) > h.batch {
				return fmt.Errorf("texts %d..%d of %d: %w", lo, hi-1, len(texts), err)
			}
			return err
		}
		copy(out[lo:hi], vs)
		if obs != nil {
			obs.Embedded(len(vs))
		}
		return nil
	}
	if h.concurrency == 1 || len(texts) <= h.batch {
		for lo := 0; lo < len(texts); lo += h.batch {
			if err := run(ctx, lo, min(lo+h.batch, len(texts))); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(h.concurrency)
	for lo := 0; lo < len(texts); lo += h.batch {
		g.Go(func() error { return run(gctx, lo, min(lo+h.batch, len(texts))) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// failure is one attempt's error and whether another attempt may succeed.
type failure struct {
	msg        string
	status     int           // the HTTP status, 0 without one
	retry      bool          // transient: a retry may succeed
	retryAfter time.Duration // the server's Retry-After, 0 without one
	err        error         // the underlying error, if any
	kind       error         // a sentinel the returned error also wraps (ErrDims), if any
	timeout    bool          // no answer within --embed-timeout
}

// embedBatch sends one request, retrying transient failures.
func (h *HTTP) embedBatch(ctx context.Context, texts []string, obs Observer) ([][]float32, error) {
	body, err := json.Marshal(h.api.request(h, texts))
	if err != nil {
		return nil, h.fail(&failure{msg: "encode the request", err: err}, 1, "")
	}
	for attempt := 1; ; attempt++ {
		if err := h.wait(ctx); err != nil {
			return nil, h.canceled(err)
		}
		vs, f := h.attempt(ctx, body, len(texts))
		if f == nil {
			return vs, nil
		}
		if ctx.Err() != nil {
			return nil, h.canceled(ctx.Err())
		}
		if !f.retry || attempt > h.retries {
			return nil, h.fail(f, attempt, "")
		}
		d := h.backoffDelay(attempt)
		if f.retryAfter > MaxRetryAfter {
			return nil, h.fail(f, attempt, fmt.Sprintf("the server asked to retry after %s, longer than the %s Cordon waits; lower --embed-rate", f.retryAfter, MaxRetryAfter))
		}
		d = max(d, f.retryAfter)
		if deadline, ok := ctx.Deadline(); ok && deadline.Sub(h.clock.now()) < d {
			return nil, h.fail(f, attempt, fmt.Sprintf("the caller's deadline leaves no time for the next retry (in %s)", d.Round(time.Millisecond)))
		}
		if err := h.clock.sleep(ctx, d); err != nil {
			return nil, h.canceled(err)
		}
		if obs != nil {
			obs.Retry()
		}
	}
}

// backoffDelay is the wait before retry number attempt (1 for the first):
// Backoff doubled attempt-1 times, capped at MaxBackoff, drawn uniformly
// from its upper half so that clients failing together spread out.
func (h *HTTP) backoffDelay(attempt int) time.Duration {
	d := h.backoff
	for i := 1; i < attempt && d < h.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, h.maxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// wait blocks until the rate limiter allows a request.
func (h *HTTP) wait(ctx context.Context) error {
	if h.limiter == nil {
		return nil
	}
	now := h.clock.now()
	r := h.limiter.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(now) < d {
		r.CancelAt(now)
		return fmt.Errorf("--embed-rate allows the next request in %s, after the caller's deadline: %w", d.Round(time.Millisecond), context.DeadlineExceeded)
	}
	if err := h.clock.sleep(ctx, d); err != nil {
		r.CancelAt(h.clock.now())
		return err
	}
	return nil
}

// attempt sends one request and decodes its answer.
func (h *HTTP) attempt(ctx context.Context, body []byte, n int) ([][]float32, *failure) {
	actx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, h.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &failure{msg: "build the request", err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportFailure(ctx, actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, h.statusFailure(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, h.maxResponse+1))
	if err != nil {
		f := h.transportFailure(ctx, actx, err)
		f.msg = "read the answer: " + f.msg
		return nil, f
	}
	if int64(len(data)) > h.maxResponse {
		return nil, &failure{msg: fmt.Sprintf("the answer is larger than %d bytes (%d texts of %d dimensions); lower --embed-batch, or check that --embed-dims matches the model", h.maxResponse, n, h.dims), status: resp.StatusCode}
	}
	vs, err := h.api.decode(data, n)
	if err != nil {
		return nil, &failure{msg: fmt.Sprintf("the answer is not a valid %s embeddings answer (%s); check --embed-api", h.api.name, h.redact(err.Error())), status: resp.StatusCode}
	}
	for i, v := range vs {
		if len(v) != h.dims {
			return nil, &failure{msg: fmt.Sprintf("text %d's vector has %d dimensions, --embed-dims says %d; set --embed-dims to the model's vector length", i, len(v), h.dims), status: resp.StatusCode, kind: ErrDims}
		}
	}
	return vs, nil
}

// transportFailure describes an error that left no usable answer.
func (h *HTTP) transportFailure(ctx, actx context.Context, err error) *failure {
	if ctx.Err() != nil {
		return &failure{msg: "canceled", err: ctx.Err()}
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &failure{msg: fmt.Sprintf("no answer within %s; raise --embed-timeout or check the server's load", h.timeout), retry: true, timeout: true}
	}
	var cert *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if errors.As(err, &cert) || errors.As(err, &unknownCA) || errors.As(err, &hostname) {
		return &failure{msg: "the server's TLS certificate is not trusted; check --embed-url", err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the message names the URL already
	}
	return &failure{msg: "cannot reach the server; is it running? check --embed-url", err: err, retry: true}
}

// statusFailure describes an answer with a non-2xx status.
func (h *HTTP) statusFailure(resp *http.Response) *failure {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	code := resp.StatusCode
	said := ""
	// The key is hidden in all that was read before the message is taken
	// from it and cut short: a key cut in two would not be recognised.
	if m := errorMessage([]byte(h.redactor.String(string(b)))); m != "" {
		said = " (" + m + ")"
	}
	f := &failure{status: code, retry: code == http.StatusTooManyRequests || code >= 500}
	if f.retry {
		f.retryAfter = retryAfter(resp.Header.Get("Retry-After"), h.clock.now())
	}
	answered := fmt.Sprintf("the server answered %d %s", code, http.StatusText(code))
	switch {
	case code >= 300 && code <= 399 && resp.Header.Get("Location") != "":
		f.msg = h.redirectMessage(resp)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		f.msg = answered + said + ": check the API key (--embed-key-file or --embed-key-env)"
	case code == http.StatusNotFound:
		f.msg = fmt.Sprintf("the server answered 404 for model %q%s: is it pulled/served, and does the server speak the %s API at %s? check --embed-model, --embed-api and --embed-url",
			h.model, said, h.api.name, h.api.path)
		if h.api.name == APIOllama {
			f.msg += " (ollama pull " + h.model + ")"
		}
	case code == http.StatusRequestEntityTooLarge:
		f.msg = answered + said + ": lower --embed-batch"
	case code == http.StatusTooManyRequests:
		f.msg = answered + said + ": the server is rate limiting; lower --embed-rate or raise --embed-retries"
	case code >= 500:
		f.msg = answered + said + ": the server failed; check its logs and health"
	case code >= 400:
		f.msg = answered + said + ": the server refused the request; check --embed-model, and lower --embed-batch if a text or the batch is too long for it"
		if h.requestDims {
			f.msg += " (or the model does not take \"dimensions\": drop --embed-request-dims)"
		}
	default:
		f.msg = answered + said + ": not an answer Cordon can use; check --embed-url"
	}
	return f
}

// redirectMessage describes a redirect that was not followed: where to,
// and what to do.
func (h *HTTP) redirectMessage(resp *http.Response) string {
	code := resp.StatusCode
	to := "an address that does not parse"
	target, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	same := false
	if err == nil {
		origin, _ := url.Parse(h.endpoint) // checked by NewHTTP
		same = sameOrigin(target, origin)
		// Without a query or credentials, which may carry a token.
		target.User, target.RawQuery, target.ForceQuery, target.Fragment = nil, "", false, ""
		to = h.redact(target.String())
	}
	msg := fmt.Sprintf("the server redirected (%d %s) to %s", code, http.StatusText(code), to)
	const fix = "set --embed-url to the address it redirects to"
	switch {
	case !h.sameOrigin && same:
		return msg + ": Cordon does not follow redirects, so that the texts and the API key go nowhere else; " + fix +
			", or allow redirects within the same scheme, host and port with --embed-same-origin-redirects"
	case !h.sameOrigin || err != nil:
		return msg + ": Cordon does not follow redirects, so that the texts and the API key go nowhere else; " + fix
	case !same:
		return msg + ", another origin: Cordon follows redirects only within the scheme, host and port of --embed-url (--embed-same-origin-redirects), so that the texts and the API key go nowhere else; " + fix
	}
	return fmt.Sprintf("%s: Cordon follows at most %d redirects; %s", msg, maxRedirects, fix)
}

// fail is the error of a batch that will not be retried.
func (h *HTTP) fail(f *failure, attempts int, note string) error {
	msg := f.msg
	if f.err != nil {
		msg = h.redact(f.err.Error()) + ": " + msg
	}
	if attempts > 1 {
		msg = fmt.Sprintf("gave up after %d attempts: %s", attempts, msg)
	}
	if note != "" {
		msg += "; " + note
	}
	var err error
	if f.kind != nil {
		err = fmt.Errorf("%w: %w: %s POST %s: %s", ErrProvider, f.kind, h.api.name, h.endpoint, msg)
	} else {
		err = fmt.Errorf("%w: %s POST %s: %s", ErrProvider, h.api.name, h.endpoint, msg)
	}
	if f.timeout {
		return timeoutError{err}
	}
	return err
}

// canceled is the error of a call the caller ended: it wraps the context's
// error, not ErrProvider.
func (h *HTTP) canceled(err error) error {
	return fmt.Errorf("%s POST %s: %w", h.api.name, h.endpoint, err)
}

// redact hides the API key in a text that may echo it, in any encoding
// package redact recognises.
func (h *HTTP) redact(s string) string { return h.redactor.String(s) }

// errorMessage is the message of an error answer: the "error" (a string, or
// an object's "message") or "message" member of a JSON object, else the
// text itself; one line of at most 200 bytes.
func errorMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	msg := string(b)
	if json.Unmarshal(b, &e) == nil {
		var s string
		var o struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(e.Error, &o) == nil && o.Message != "":
			msg = o.Message
		case e.Message != "":
			msg = e.Message
		}
	}
	msg = strings.Join(strings.FieldsFunc(strings.ToValidUTF8(msg, "?"), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if len(msg) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
// It is 0 when absent or unparsable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if s < 0 {
			return 0
		}
		if s > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
