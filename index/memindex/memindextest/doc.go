// Package memindextest is a test helper: [Store] puts one
// [memindex.Index] per tenant behind the replay and retrieval store
// interfaces, so that differential tests can run replay scripts and
// retrievals on memindex and compare them with the reference store
// (store/memory) and the Postgres store. The service itself reaches
// memindex through store/postgres's in-memory query path, never through
// Store.
package memindextest
