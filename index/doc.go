// Package index turns a document into what a store writes: its chunks, each
// with term frequencies and a signed-hash count vector, under a tenant's index
// [Settings]. Both stores call [Prepare], so a document is chunked, tokenized
// and hashed the same way whichever store keeps it.
package index
