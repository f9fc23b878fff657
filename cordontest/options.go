package cordontest

import (
	"log/slog"

	"github.com/testcontainers/testcontainers-go"
)

// Option configures [Run]. It is a [testcontainers.ContainerCustomizer]
// that changes nothing, so Cordon's options and testcontainers-go's
// customizers (which apply to the PostgreSQL container) share Run's
// argument list, as in testcontainers-go's modules.
type Option func(*options)

// Customize implements [testcontainers.ContainerCustomizer]; Run reads
// Cordon's options itself.
func (Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

type options struct {
	hostNetwork bool
	cordonImage string
	noServer    bool
	tenants     []string
	logger      *slog.Logger
}

// WithHostNetwork runs the containers in the host's network namespace,
// each server on a free port of 127.0.0.1, instead of publishing ports.
// Run does so by itself on an engine without a bridge (dockerd
// --bridge=none) that runs on this machine; this option asks for it on any
// engine, local or not. Linux only.
func WithHostNetwork() Option { return func(o *options) { o.hostNetwork = true } }

// WithCordonImage runs Cordon from image (built from deploy/Dockerfile, e.g.
// cordon:local) instead of in the test process: 'cordon migrate' in a
// one-shot container, then 'cordon serve', as deploy/compose.yaml runs
// them. [Container.Cordon] is then the serving container.
func WithCordonImage(image string) Option { return func(o *options) { o.cordonImage = image } }

// WithoutServer migrates the database and serves no API: [Container.URL]
// is empty. [Container.Token] still mints tokens, for a server of your own
// that verifies them with [Container.Secret].
func WithoutServer() Option { return func(o *options) { o.noServer = true } }

// WithTenants creates these tenants (default settings, hashing
// embeddings) through the API before Run returns.
func WithTenants(names ...string) Option {
	return func(o *options) { o.tenants = append(o.tenants, names...) }
}

// WithLogger receives the in-process server's log (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
