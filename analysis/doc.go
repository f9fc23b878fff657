// Package analysis holds Cordon's text primitives (SPEC section 1): the
// tokenizer, whitespace, and code-point offsets.
//
// Tokens are the lower-cased maximal runs of Unicode letters and numbers. There
// is no stemming and no stop-word list. The tables are those of the Go release
// that built the binary, so a change of Go's Unicode version changes stored
// statistics: [TokenizerVersion] names the tokenizer and its tables, and the
// Postgres store records it with each tenant's index.
package analysis
