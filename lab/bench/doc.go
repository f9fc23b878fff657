// Package bench measures Cordon's exact hybrid retrieval through the Postgres
// store against the alternatives a user would otherwise pick, on the same
// corpus, queries and machine, in one run.
//
// # Corpus and queries
//
// [Generator] builds a deterministic synthetic corpus from a seed: a
// Zipf-distributed vocabulary of pronounceable words, Markdown documents of
// realistic section and document sizes, rare identifiers ("tx4096",
// "PMT-771"), classifications, information barriers and as-of ticks, split
// across tenants with an exact number of chunks per tenant. Its queries have
// 2-8 terms, some with a rare identifier, a random tenant each, a principal
// with clearance confidential and one barrier, and a freshness contract on
// half of them.
//
// # Systems
//
// A [System] ingests the corpus and answers queries with a top-10 list of
// chunk ids. The systems are:
//
//   - "cordon": [postgres.Store] behind [retrieval.Retriever] (exact);
//   - "http": the service path over the same tenants as "cordon": the real
//     server ([server.New], same store options, a generated audit key, every
//     request audited) on a loopback listener, in this process or in a
//     process of its own ([Options.HTTPServerProcess]: its CPU is then
//     measured apart from its clients'), queried with
//     POST /v1/tenants/{t}/retrieve under the same policy with an HS256
//     token per principal; its report carries its qps over cordon's
//     (qps_ratio_to_cordon), its CPU per query over cordon's and the CPU
//     it adds a query ([CPUOverCordon]) and, with [Options.Mix], a mixed run of
//     retrieve, ground, assemble and document puts with each operation's
//     latency. It runs only when named;
//   - "memory": [memory.Store], the reference store (exact);
//   - "sql_exact": the same pipeline written entirely in SQL over Cordon's
//     own tables (BM25 with SQL ln and sum over the postings table, a full
//     pgvector inner-product scan, the entitlement filter in WHERE, RRF and
//     the rerank floor in SQL) — the "just do it in SQL" baseline;
//   - "sql_hybrid": the usual SQL hybrid recipe (a tsvector column with a GIN
//     index ranked by ts_rank_cd, a pgvector HNSW index, fused with RRF in
//     SQL), in its own schema; approximate.
//
// Every system gets the same queries with the same retrieval policy (top_n
// 50, rrf_k 60, rerank depth 20, min_score 0.2, limit 10); recall@10 is
// measured against the exact reference result.
//
// [Run] ingests, queries and reports latency percentiles, throughput, ingest
// rate and storage per chunk as a [Report]; [Plot] draws latency against
// corpus size from several reports.
package bench
