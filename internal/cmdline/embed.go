package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/embed"
)

// EmbedFlags are the flags that configure an embedding provider: one HTTP
// server serving one model (docs/embeddings.md). Without --embed-url no
// model is served, and only hashing tenants can be written or queried.
type EmbedFlags struct {
	api, url, model, keyFile, keyEnv, docPrefix, queryPrefix *string
	dims, batch, concurrency, retries, burst                 *int
	timeout                                                  *time.Duration
	rate                                                     *float64
	requestDims, sameOrigin                                  *bool
}

func AddEmbedFlags(fs *flag.FlagSet) *EmbedFlags {
	return &EmbedFlags{
		url:         fs.String("embed-url", "", "base URL of an embedding server for tenants whose model is not hash (e.g. http://127.0.0.1:11434)"),
		api:         fs.String("embed-api", embed.APIOpenAI, "the server's API: openai (/v1/embeddings), ollama (/api/embed) or tei (/embed)"),
		model:       fs.String("embed-model", "", "the model name the server serves (the name tenants record)"),
		dims:        fs.Int("embed-dims", 0, "the model's vector length (1..16000)"),
		requestDims: fs.Bool("embed-request-dims", false, `send --embed-dims as the request's "dimensions" (openai API only)`),
		keyFile:     fs.String("embed-key-file", "", "file holding the server's API key (sent as a bearer token)"),
		keyEnv:      fs.String("embed-key-env", "", "environment variable holding the server's API key"),
		batch:       fs.Int("embed-batch", embed.DefaultBatch, "most texts per request"),
		concurrency: fs.Int("embed-concurrency", 1, "requests of one call in flight at once"),
		timeout:     fs.Duration("embed-timeout", embed.DefaultTimeout, "timeout of each request"),
		retries:     fs.Int("embed-retries", embed.DefaultRetries, "retries of a transient failure (no connection, timeout, 429, 5xx)"),
		rate:        fs.Float64("embed-rate", 0, "most requests per second to the server (0: no limit)"),
		burst:       fs.Int("embed-burst", 0, "requests that may go at once before --embed-rate spaces them (0: 1)"),
		docPrefix:   fs.String("embed-doc-prefix", "", `prefix of every document text (e.g. "passage: ")`),
		queryPrefix: fs.String("embed-query-prefix", "", `prefix of every query text (e.g. "query: ")`),
		sameOrigin: fs.Bool("embed-same-origin-redirects", false,
			"follow the server's redirects within the scheme, host and port of --embed-url (default: no redirect is followed)"),
	}
}

// Model is the model --embed-model names and --embed-dims its vector
// length ("" and 0 without them).
func (f *EmbedFlags) Model() (name string, dims int) { return *f.model, *f.dims }

// URL is the server's --embed-url ("" when no model is served).
func (f *EmbedFlags) URL() string { return *f.url }

// LogAttrs describes the provider for the config log line.
func (f *EmbedFlags) LogAttrs() []any {
	return []any{"embed_url", RedactURL(*f.url), "embed_api", *f.api, "embed_model", *f.model, "embed_dims", *f.dims,
		"embed_same_origin_redirects", *f.sameOrigin}
}

// Registry returns the providers the flags configure: none without
// --embed-url.
func (f *EmbedFlags) Registry() (*embed.Registry, error) {
	reg, _, err := f.CachedRegistry("")
	return reg, err
}

// CachedRegistry is Registry with the provider's vectors cached in
// cacheDir/MODEL-DIMS.vec when cacheDir is not empty (see embed.Cache);
// the caller closes the cache.
func (f *EmbedFlags) CachedRegistry(cacheDir string) (*embed.Registry, *embed.Cache, error) {
	var reg embed.Registry
	if *f.url == "" {
		if *f.model != "" {
			return nil, nil, fmt.Errorf("%w: --embed-model %q needs --embed-url (the server that serves it)", ErrUsage, *f.model)
		}
		return &reg, nil, nil
	}
	h, err := embed.NewHTTP(embed.HTTPConfig{API: *f.api, URL: *f.url, Model: *f.model, Dims: *f.dims, RequestDims: *f.requestDims,
		KeyFile: *f.keyFile, KeyEnv: *f.keyEnv, Batch: *f.batch, Concurrency: *f.concurrency, Timeout: *f.timeout,
		Retries: *f.retries, RateLimit: *f.rate, RateBurst: *f.burst, DocPrefix: *f.docPrefix, QueryPrefix: *f.queryPrefix,
		SameOriginRedirects: *f.sameOrigin})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	var e embed.Embedder = h
	var cache *embed.Cache
	if cacheDir != "" {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(*f.model)
		if cache, err = embed.NewCache(h, *f.dims, filepath.Join(cacheDir, fmt.Sprintf("%s-%d.vec", name, *f.dims))); err != nil {
			return nil, nil, err
		}
		e = cache
	}
	if err := reg.Register(*f.model, e); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return &reg, cache, nil
}

// Probe embeds one short text with the configured model, so that a server
// that is down, serves another model or answers other dimensions is named
// at start rather than at the first request. A dimension mismatch is a
// configuration error; anything else may be transient and is only
// reported.
func (f *EmbedFlags) Probe(ctx context.Context, reg *embed.Registry) (warning string, err error) {
	if *f.url == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = reg.Vectors(ctx, embed.Spec{Model: *f.model, Dims: *f.dims}, []string{"cordon embedding probe"}, embed.Query)
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, embed.ErrDims):
		return "", fmt.Errorf("%w: --embed-dims %d: %w", ErrUsage, *f.dims, err)
	}
	return err.Error(), nil
}
