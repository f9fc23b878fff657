// Package postgres is Cordon's PostgreSQL store: one schema per tenant,
// pgvector for the integer count vectors, a custom BM25 postings table (no
// tsvector anywhere), goose migrations, and results byte-identical to the
// in-memory reference store.
//
// # Layout
//
// The control schema "cordon" holds the tenant registry and each tenant's
// index settings. Tenant t lives in schema cordon_t_<t>: documents, chunks
// (with a vector column), postings and a one-row stats table (N, the sum of
// chunk lengths, the largest vector component, a version). Postings are
// stored in segments (postings.go, migrations 00006 and 00012): a write adds
// one, with a row per common term holding its postings as parallel arrays
// (chunk ids, tfs) and, for the rare terms, a row per bucket of a hash of
// the term that also names each posting's term; writers merge segments
// size-tiered.
// Tenant schema DDL comes from the migrations (cordon.create_tenant), never from
// this package. Schema names are derived from validated tenant names, quoted
// with pgx.Identifier, and every table reference is schema-qualified; nothing
// depends on search_path, and no SQL is built from user text.
//
// # Query path
//
// A retrieval (query.go) runs in one read-only REPEATABLE READ transaction,
// so both rankings and the statistics come from one snapshot. Its first
// statement reads the tenant's registry row and its stats row together;
// nothing later reads either again. The entitlement and freshness
// pre-filter is evaluated in SQL: a chunk the principal may not see is
// never a candidate; it reaches Go only as an internal id with its length
// and verdict, to be counted (in the funnel, and in df under the tenant
// statistics scope), never with its chunk id or text.
//
//   - Postings: the postings rows of the query's terms (their term rows and
//     their buckets' rows) are read as stored, in one statement, and their
//     arrays decoded in Go, keeping a bucket's postings of the query's
//     terms (readQueryPostings in postings.go). Nothing is joined per
//     posting.
//   - One scan of the tenant's chunks (scanChunks) computes each chunk's
//     exact integer dot product with the query (pgvector's inner product is
//     exact when every partial sum stays below 2^24, which the stats'
//     max_abs bound proves per query; otherwise an exact bigint sum over the
//     unnested vector is used), counts the dense funnel, orders the visible,
//     fresh chunks by float64(dot) / (|q| * |d|) (the same correctly
//     rounded IEEE operations in the same order as hashembed.Cosine), then
//     chunk id, returning only top_n, and returns the length and verdict
//     of every chunk the postings name.
//   - Lexical: df is counted from the postings of chunks that exist (only
//     visible ones under the entitled scope), N and the length sum come
//     from stats, and Go computes BM25 with package bm25 in the pinned
//     summation order (SQL's sum() has no defined order and SQL's ln() is
//     glibc's, which differs from ours in the last bit), as the reference
//     does; the best top_n, with ties, are candidates.
//   - Then the texts of both sides' candidates are fetched by internal id,
//     visibility and freshness checked again in the WHERE clause, each side
//     ordered by score, then chunk id, and cut to top_n; fusion, rerank and
//     limit run in Go, shared with every store.
//
// # Writes
//
// A put or delete is one transaction: a failure anywhere rolls back to the
// previous version. Writes to one tenant run in parallel: a write locks its
// documents' rows (in doc id order), writes its chunks and its postings
// segment, and only then locks the tenant's stats row to update N, the
// length sums, the version and the change log, so the statistics stay exact
// and versions commit in order while the bulk of the work overlaps
// (write.go). Batches that reach a tenant at once are committed together,
// as one transaction with one postings segment, each batch still all or
// nothing (writegroup.go). A delete removes documents and chunks; their postings stay in
// their blocks, unread, until a merge drops them.
//
// # In-memory query path
//
// With Options.CacheBytes, a tenant's index is also kept in process memory
// (package memindex, texts included; cache.go) and checked against the
// committed stats.version and the tenant's incarnation (the registry's
// never-reused incarnation number) by the same lookup statement, sent alone outside a
// transaction: a current cache answers in that one round trip. A cache that
// is behind is brought forward from the change log in a snapshot, one that
// does not fit falls back to SQL.
//
// The budget is never exceeded: the cache accounts every index's bytes (the
// memory the index counts itself holding, memindex.Index.Bytes) plus what
// loads in progress have reserved, and a load reserves each document's
// bytes before adding it, evicting least recently used tenants
// to make room (only tenants unqueried for 30 seconds, so tenants in use do
// not evict each other); when room cannot be made the load gives up, or is
// not started, and the tenant is ranked in SQL. With Options.CacheLoadInBackground (what 'cordon serve'
// uses) a tenant not in memory is loaded in the background, in a snapshot
// of its own, while its queries are ranked in SQL; one load per tenant at a
// time, two at once. Store.CacheStats reports the budget, the bytes held,
// loads, evictions and which path answered.
//
// # Citus
//
// On a Citus coordinator with workers (migrations/00013_citus.sql,
// citus.go) each tenant is a distributed schema on one worker and the
// registry a reference table, so every statement above, which touches one
// tenant and the registry, is routed whole to the tenant's worker. A
// snapshot read also checks, with its last statement, that a tenant move
// did not switch it to the other placement half way (Store.MovedReads).
package postgres
