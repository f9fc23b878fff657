// Package rerank scores (query, passage) pairs with a model served over
// HTTP: the reranker behind the retrieve pipeline's rerank kind "model"
// (docs/spec.md, section 5).
//
// # Providers
//
// [New] speaks one of two wire formats:
//
//   - [TEI], text-embeddings-inference's POST /rerank:
//     {"query": q, "texts": [...], "raw_scores": false} answered by
//     [{"index": i, "score": s}, ...] in any order;
//   - [Cohere], the POST /v2/rerank shape Cohere, Jina and others share:
//     {"model": m, "query": q, "documents": [...], "top_n": n} answered by
//     {"results": [{"index": i, "relevance_score": s}, ...]}.
//
// A call is split into batches of at most [Config.BatchSize] passages, sent
// concurrently; the answer is one finite score per passage, in input order,
// or an error. Responses are checked strictly (every index exactly once, in
// range, with a finite score, and no more than [Config.MaxResponseBytes]):
// a model server that answers something else is broken, and a wrong score
// would reorder results silently.
//
// # Budgets and failure
//
// The client never retries: the caller's context is the budget, and a call
// that cannot finish within it fails with the context's error. [Breaker]
// stops calling a model that keeps failing: after [BreakerConfig.Failures]
// consecutive failures it refuses calls at once ([ErrBreakerOpen]) for
// [BreakerConfig.CoolDown], then lets one probe through; the probe's
// success closes it, its failure opens it again. [Observe] reports every
// call's [Outcome] and duration (the server's metrics).
//
// The retriever sheds the model stage on any error (docs/spec.md): a
// reranker's failure degrades a retrieval, it never fails it.
//
// # Secrets
//
// [Config.APIKey] is sent as a bearer token and appears in no error, log
// line or String form: errors name the provider and the URL path only, and
// an error answer's body is quoted with the key hidden in every encoding a
// server may echo it in (JSON escapes such as "\/" and "\u002b",
// percent-encoding, quoting, HTML, base64, hex; see package
// internal/redact).
package rerank
