// Package server is Cordon's JSON-over-HTTP API over a [Store] (the
// Postgres store in cordon serve): the handlers consume small interfaces
// declared here, not the store's concrete type.
//
// # Authentication and authorization
//
// Every /v1 request carries "Authorization: Bearer <JWT>". The principal
// (tenant, clearance, barriers) comes only from the verified token
// ([Verifier]), never from a request body. Roles: reader (retrieve, ground,
// assemble), writer (documents), auditor (sees the retrieval funnel counters),
// admin (creates tenants). A request for another tenant's path is a 404 with
// the same body whether that tenant exists or not; a missing role for one's
// own tenant is a 403.
//
// # Requests
//
// Bodies are decoded strictly ([DecodeStrict]): valid UTF-8 only, at most
// [MaxJSONDepth] levels of nesting, no duplicate keys, no unknown fields, no
// trailing data, integers without fractions. Token claims are checked the
// same way before they are trusted. Bad input is a 400 with {"error": {"code", "message"}}, never a
// 500; the database being unreachable is a 503.
//
// # Tenant admission
//
// A tenant's costly requests (retrieve, ground, assemble, document PUT,
// DELETE and batch) pass its admission before their body is read: at most
// Config.TenantRequests run at once (by default half the store's pool,
// [DefaultTenantRequests]), Config.TenantQueue more wait, and any beyond
// are a 429 too_many_requests naming the limits, so one tenant's callers
// never hold the whole database pool. A ground or assemble names at most
// Config.MaxChunkIDs chunks. Refusals are counted by operation and reason
// (cordon_requests_refused_total) and the access log line says why
// (refused).
//
// # Chunk digests
//
// Each retrieve result carries the digest of its chunk
// ([cordontype.Chunk.Digest]). Ground and assemble reload their chunks by id
// and re-check visibility first (hidden or missing is the one 404); given
// digests, they then refuse with 409 chunk_changed, naming them, the chunks
// whose document was replaced since. Without digests the current version is
// used.
//
// # Model reranker
//
// With Config.Reranker set, a retrieve may ask for rerank "model": the
// retriever sends the first rerank_depth fused chunks to the model within
// the request's rerank_budget_ms (default Config.RerankBudget, per tenant
// Config.RerankBudgetTenant). A late, failed or refused call sheds the stage
// (the answer is the enable_rerank=false one, with "rerank" in degraded);
// the request still succeeds. Every call is counted by outcome and timed in
// the metrics, the audit record names the provider, model and outcome, and
// the access log line says why a stage was shed (rerank_shed).
//
// # Embedding models
//
// With Config.Models, a model tenant's queries are embedded by its
// provider, whose calls, requests and retries are counted in the metrics
// (cordon_embed_*). When the provider fails, a retrieve answers 503
// embedding_unavailable unless its policy says dense_fallback "lexical"
// (the default for Config.DenseFallbackTenants): it then answers the
// enable_dense=false result with "dense" in degraded, and the access log
// line says why (dense_shed).
//
// # Audit
//
// Every retrieve, ground and assemble appends a record to the tenant's audit
// table before the answer is sent, chained with HMAC-SHA256 under the
// store's audit key; a record that cannot be written fails the request with
// 503. See store/postgres (AppendAudit, VerifyAudit) and docs/security.md.
//
// # Metrics
//
// Prometheus metrics are not part of [Server.Handler]: they are served by
// [Server.ServeMetrics] on a listener of their own, as aggregates unless
// Config.MetricsTenantLabels is set.
//
// The routes and bodies are described by openapi.yaml, served at
// GET /openapi.yaml.
package server
