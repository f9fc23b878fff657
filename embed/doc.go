// Package embed is Cordon's seam for dense embedding models: a tenant's
// model [Spec] (recorded with its index), the [Embedder] interface that
// providers implement, and the integer quantization that keeps dense scores
// exact and byte-identical across stores and architectures.
//
// The default model, [Hash], is SPEC section 3's signed feature hashing
// (package hashembed): its vectors are integer counts already and it needs no
// provider; [Registry] serves it itself, so [Registry.Vectors] is the one way
// from text to a vector for every model. Any other model's float vectors are quantized once, document
// vectors at write time and a query's vector once per query, to int8 range
// integers by [Quantize]; stores keep only those integers and score them with
// exact integer dot products and SPEC's cosine formula.
//
// # Providers
//
// [NewHTTP] builds an [Embedder] that asks an embedding server over HTTP in
// one of three APIs: [APIOpenAI] (POST /v1/embeddings, served by OpenAI,
// Ollama, text-embeddings-inference and vLLM), [APIOllama] (POST
// /api/embed) and [APITEI] (POST /embed). One client serves all three: it
// splits long calls into batches and reassembles them in order, bounds each
// request by a timeout, retries transient failures (no connection, a
// timeout, 429, 5xx) with jittered exponential backoff that honours
// Retry-After, spaces requests by a client-side rate limit, bounds the
// answer's size and decodes it strictly, checking every vector's count,
// length and finiteness. Its errors wrap [ErrProvider], name the API, the
// URL and the HTTP status, and say what to check next. docs/embeddings.md
// describes the configuration and the messages.
package embed
