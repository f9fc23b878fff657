// Package memory is Cordon's in-memory store: the reference implementation of
// SPEC sections 2-5 that every other store must match byte for byte. It keeps
// each tenant's chunks, postings and vectors in process memory and ranks in Go.
// It is safe for concurrent use.
package memory
