package rerank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/cordon-rag/cordon/internal/redact"
)

// API names a reranker wire format.
type API string

// The wire formats [New] speaks.
const (
	// TEI is text-embeddings-inference's POST /rerank.
	TEI API = "tei"
	// Cohere is the POST /v2/rerank shape of Cohere, Jina and others.
	Cohere API = "cohere"
)

// defaultPath is each API's endpoint path under a base URL.
var defaultPath = map[API]string{TEI: "/rerank", Cohere: "/v2/rerank"}

// Client defaults.
const (
	// DefaultBatchSize is text-embeddings-inference's default
	// --max-client-batch-size: a larger batch is refused there.
	DefaultBatchSize = 32
	// DefaultConcurrency bounds the batches of one call in flight.
	DefaultConcurrency = 4
	// DefaultMaxResponseBytes bounds one batch's response body: scores
	// take tens of bytes each, but some providers echo the passages.
	DefaultMaxResponseBytes = 4 << 20
	// MaxBatchSize bounds Config.BatchSize.
	MaxBatchSize = 1024
	// maxErrorBody is how much of an error answer is read for its message
	// (and searched for an echoed key before its start is quoted).
	maxErrorBody = 4 << 10
)

// Config configures a [Client].
type Config struct {
	// URL is the model server: a base URL such as http://127.0.0.1:8081,
	// to which the API's path (/rerank or /v2/rerank) is appended, or a
	// full endpoint URL (any other path, e.g. a provider's /v1/rerank),
	// used as it is. http or https, no user:password part.
	URL string
	API API
	// Model is sent in Cohere requests (required there) and reported by
	// [Client.Model]; text-embeddings-inference serves one model and
	// ignores it.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer APIKey". It
	// appears in no error or log line: an error answer that echoes it, in
	// any encoding package redact recognises, is quoted with the key
	// hidden.
	APIKey string
	// BatchSize is the most passages per request (default
	// [DefaultBatchSize], at most [MaxBatchSize]); Concurrency the most
	// requests of one call in flight (default [DefaultConcurrency]).
	BatchSize   int
	Concurrency int
	// MaxResponseBytes bounds one response body (default
	// [DefaultMaxResponseBytes]).
	MaxResponseBytes int64
	// Truncate asks text-embeddings-inference to truncate passages longer
	// than the model's input ("truncate": true) instead of refusing them.
	Truncate bool
	// HTTPClient, when set, sends the requests; the default follows no
	// redirect (a 3xx is an error) and has no timeout of its own: the
	// caller's context bounds every call.
	HTTPClient *http.Client
}

// Client is a [Reranker] over HTTP. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	path     string
	hc       *http.Client
	// redactor hides the API key in error answers.
	redactor *redact.Redactor
}

var _ Reranker = (*Client)(nil)

// New checks cfg, fills in its defaults and returns a client. Nothing is
// sent until the first Score.
func New(cfg Config) (*Client, error) {
	if _, ok := defaultPath[cfg.API]; !ok {
		return nil, fmt.Errorf("%w: API %q: want %q or %q", ErrConfig, cfg.API, TEI, Cohere)
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, fmt.Errorf("%w: no URL: give the model server's base URL, e.g. http://127.0.0.1:8081", ErrConfig)
	case err != nil:
		return nil, fmt.Errorf("%w: URL does not parse: give e.g. http://127.0.0.1:8081", ErrConfig)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: URL scheme %q: want http or https", ErrConfig, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("%w: URL has no host", ErrConfig)
	case u.User != nil:
		return nil, fmt.Errorf("%w: URL holds credentials: pass the API key apart (a key file), never in the URL", ErrConfig)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: URL has a #fragment", ErrConfig)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = defaultPath[cfg.API]
	}
	if cfg.API == Cohere && cfg.Model == "" {
		return nil, fmt.Errorf("%w: the cohere API needs a model name", ErrConfig)
	}
	if strings.ContainsFunc(cfg.APIKey, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return nil, fmt.Errorf("%w: the API key holds spaces or control or non-ASCII characters", ErrConfig)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("%w: batch size %d: want 1 to %d", ErrConfig, cfg.BatchSize, MaxBatchSize)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Concurrency < 1 {
		return nil, fmt.Errorf("%w: concurrency %d: want >= 1", ErrConfig, cfg.Concurrency)
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxResponseBytes < 1 {
		return nil, fmt.Errorf("%w: max response bytes %d: want >= 1", ErrConfig, cfg.MaxResponseBytes)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 2 * cfg.Concurrency
		hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Client{cfg: cfg, endpoint: u.String(), path: u.EscapedPath(), hc: hc, redactor: redact.New(cfg.APIKey)}, nil
}

// String describes c without its API key (fmt's %v and %+v use it).
func (c *Client) String() string {
	return fmt.Sprintf("rerank.Client{%s %s model=%q batch=%d}", c.cfg.API, c.endpoint, c.cfg.Model, c.cfg.BatchSize)
}

// GoString is String, for %#v: the key must not reach a log that way either.
func (c *Client) GoString() string { return c.String() }

// String describes cfg with its API key redacted.
func (cfg Config) String() string {
	key := "unset"
	if cfg.APIKey != "" {
		key = "REDACTED"
	}
	return fmt.Sprintf("rerank.Config{URL:%s API:%s Model:%q APIKey:%s BatchSize:%d Concurrency:%d}",
		cfg.URL, cfg.API, cfg.Model, key, cfg.BatchSize, cfg.Concurrency)
}

// GoString is String, for %#v.
func (cfg Config) GoString() string { return cfg.String() }

// Name returns the API ("tei" or "cohere").
func (c *Client) Name() string { return string(c.cfg.API) }

// Model returns the configured model name.
func (c *Client) Model() string { return c.cfg.Model }

// Score sends texts in batches of at most BatchSize, at most Concurrency at
// a time, and returns one score per text in input order. The first failure
// cancels the other batches and is returned; a context that ends first
// makes the error wrap its ctx.Err().
func (c *Client) Score(ctx context.Context, query string, texts []string) ([]float64, error) {
	out := make([]float64, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for start := 0; start < len(texts); start += c.cfg.BatchSize {
		end := min(start+c.cfg.BatchSize, len(texts))
		g.Go(func() error {
			scores, err := c.batch(gctx, query, texts[start:end])
			if err != nil {
				return err
			}
			copy(out[start:end], scores)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// The wire bodies.
type teiRequest struct {
	Query     string   `json:"query"`
	Texts     []string `json:"texts"`
	RawScores bool     `json:"raw_scores"`
	Truncate  bool     `json:"truncate,omitempty"`
}

type teiResult struct {
	Index *int     `json:"index"`
	Score *float64 `json:"score"`
}

type cohereRequest struct {
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n"`
}

type cohereResponse struct {
	Results []struct {
		Index          *int     `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
}

// result is one decoded (index, score) pair, nil where the field was absent
// or null.
type result struct {
	index *int
	score *float64
}

// batch scores one batch: one request, no retry.
func (c *Client) batch(ctx context.Context, query string, texts []string) ([]float64, error) {
	var body any = teiRequest{Query: query, Texts: texts, Truncate: c.cfg.Truncate}
	if c.cfg.API == Cohere {
		// top_n = all: every passage must come back with its score.
		body = cohereRequest{Model: c.cfg.Model, Query: query, Documents: texts, TopN: len(texts)}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, c.errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(data))
	if err != nil {
		return nil, c.errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The key is hidden in all that was read before the quote is cut
		// short: a key cut in two would not be recognised.
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, c.errorf("%w: status %d: %s", ErrStatus, resp.StatusCode, snippet(c.redactor.String(string(raw))))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if int64(len(raw)) > c.cfg.MaxResponseBytes {
		return nil, c.errorf("%w: response body over %d bytes", ErrBadResponse, c.cfg.MaxResponseBytes)
	}
	var results []result
	if c.cfg.API == Cohere {
		var r cohereResponse
		if err := decode(raw, &r); err != nil {
			return nil, c.errorf("%w: %w", ErrBadResponse, err)
		}
		if r.Results == nil {
			return nil, c.errorf("%w: no \"results\" array", ErrBadResponse)
		}
		for _, x := range r.Results {
			results = append(results, result{x.Index, x.RelevanceScore})
		}
	} else {
		var r []teiResult
		if err := decode(raw, &r); err != nil {
			return nil, c.errorf("%w: %w", ErrBadResponse, err)
		}
		if r == nil {
			return nil, c.errorf("%w: want a JSON array of results, got null", ErrBadResponse)
		}
		for _, x := range r {
			results = append(results, result{x.Index, x.Score})
		}
	}
	scores, err := collect(len(texts), results)
	if err != nil {
		return nil, c.errorf("%w: %w", ErrBadResponse, err)
	}
	return scores, nil
}

// decode reads exactly one JSON value into v.
func decode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not the expected JSON: %w", err)
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// collect turns n passages' results (any order) into scores in passage
// order: exactly one result per index in [0, n), each with a finite score.
func collect(n int, results []result) ([]float64, error) {
	if len(results) != n {
		return nil, fmt.Errorf("%d results for %d passages", len(results), n)
	}
	out := make([]float64, n)
	seen := make([]bool, n)
	for i, r := range results {
		switch {
		case r.index == nil:
			return nil, fmt.Errorf("result %d has no index", i)
		case *r.index < 0 || *r.index >= n:
			return nil, fmt.Errorf("result %d: index %d out of range [0, %d)", i, *r.index, n)
		case seen[*r.index]:
			return nil, fmt.Errorf("result %d: index %d given twice", i, *r.index)
		case r.score == nil:
			return nil, fmt.Errorf("result %d (index %d) has no score", i, *r.index)
		case math.IsNaN(*r.score) || math.IsInf(*r.score, 0):
			return nil, fmt.Errorf("result %d (index %d): score %v is not finite", i, *r.index, *r.score)
		}
		seen[*r.index] = true
		out[*r.index] = *r.score
	}
	return out, nil
}

// errorf prefixes an error with the provider and the URL path (never the
// host's credentials or the key).
func (c *Client) errorf(format string, args ...any) error {
	return fmt.Errorf("rerank %s POST %s: "+format, append([]any{c.cfg.API, c.path}, args...)...)
}

// transportError wraps a failed send or read: the context's error when it
// ended (so a budget's end reads as a timeout), else the cause without
// url.Error's copy of the URL.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return c.errorf("%w", ctxErr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return c.errorf("%w", err)
}

// snippet is the start of an error response's body, for the error message:
// at most 200 bytes, valid UTF-8, on one line.
func snippet(b string) string {
	const max = 200
	cut := len(b) > max
	if cut {
		b = b[:max]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(b, "?")), " ")
	if s == "" {
		return "(empty body)"
	}
	if cut {
		s += "..."
	}
	return s
}
