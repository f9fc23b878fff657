package server

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// The server's needs of its store, one small interface per concern, as the
// handlers consume them (the consumer declares the interface; the Postgres
// store satisfies it). The values they carry (audit records, statistics,
// consistency tokens) and the sentinel errors the server translates remain
// the store package's.

// Documents writes a tenant's documents (PUT, DELETE, batch).
type Documents interface {
	Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error)
	Delete(ctx context.Context, tenant, docID string) (bool, error)
}

// ChunkLoader reloads chunks by id for ground and assemble, visible to the
// principal only, with the index version that answered.
type ChunkLoader interface {
	LoadChunks(ctx context.Context, p cordontype.Principal, ids []string) ([]cordontype.Chunk, int64, error)
}

// Tenants creates tenants and changes their statistics scope (admin).
type Tenants interface {
	CreateTenant(ctx context.Context, tenant string, settings index.Settings) (created bool, err error)
	SetStatistics(ctx context.Context, tenant string, scope bm25.Scope) (bool, error)
}

// AuditLog appends a request's record to its tenant's audit chain.
type AuditLog interface {
	AppendAudit(ctx context.Context, tenant string, r audit.Record) (audit.Record, error)
}

// Consistency gives the token a write's response carries when reads may go
// to replicas.
type Consistency interface {
	HasReplicas() bool
	Position(ctx context.Context) (postgres.Token, error)
}

// Readiness answers /readyz.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Stats are what the metrics read at each scrape.
type Stats interface {
	Pool() *pgxpool.Pool
	AuditStats() audit.Stats
	CacheStats() postgres.CacheStats
	// ReadStats reports the read replicas' routing and lag.
	ReadStats() postgres.ReadStats
	// Models is the registry the store embeds documents and queries with,
	// whose providers report to the metrics.
	Models() *embed.Registry
}

// Store is everything [New] needs: the ranking store the retriever reads
// (a [retrieval.VersionedStore], so the audit record cites the index
// version that answered, and a [retrieval.QueryEmbedder], so a model
// tenant's query is embedded with its model) and the interfaces above.
type Store interface {
	retrieval.VersionedStore
	retrieval.QueryEmbedder
	Documents
	ChunkLoader
	Tenants
	AuditLog
	Consistency
	Readiness
	Stats
}

var _ Store = (*postgres.Store)(nil)
