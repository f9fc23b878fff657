// Package eval measures Cordon's retrieval quality the way IR people do:
// known-item and ad-hoc queries with judged relevant documents, recall@k,
// MRR@10 and nDCG@10, over four pipelines built from the same index.
//
// # Pipelines
//
//   - [BM25Only]: the store's lexical ranking alone (SPEC section 4).
//   - [DenseOnly]: the store's signed-feature-hashing cosine ranking alone
//     (SPEC section 3).
//   - [HybridRRF]: the service profile with rerank shed (EnableRerank false):
//     both rankings fused by reciprocal rank fusion.
//   - [HybridRerank]: the service profile ([retrieval.ServicePolicy]): RRF,
//     then the rerank with its relevance floor.
//   - [Seed]: SPEC's seed profile ([retrieval.DefaultPolicy]).
//   - any [Profile]: a named policy of its own.
//
// The hybrid pipelines are [retrieval.Tail] over the store's rankings, so
// they return exactly what the Retriever returns. [Run] also reports
// document-level metrics (first K distinct documents of the whole ranking),
// paired bootstrap intervals ([PairedBootstrap]) against a baseline, and
// [ScoreRun] scores another system's TREC run ([ReadRun]) the same way.
//
// Every pipeline returns at most [K] (10) chunks: the single-retriever
// pipelines take the first 10 chunks of the store's ranking (a principal with
// clearance restricted, so nothing is filtered), the hybrid pipelines run with
// Policy.Limit 10. The rerank floor may return fewer than 10, or none: that is
// the design ("nothing relevant" stays empty) and the report counts it.
//
// [Options.Depth] deepens each pipeline's document-level ranking (its TREC
// run) to 100 documents or more, for R@100: past what the pipeline's own
// ranking holds, the same pipeline ranked deeper (top_n, and rerank_depth for
// a hybrid pipeline, raised to [DeepChunks] times the depth) continues it, so
// the first documents, and every @10 metric, stay the pipeline's own.
//
// # Document-level relevance
//
// Relevance is judged per document: a document is retrieved at the rank of its
// best (first) chunk, and the ranking the metrics see is the list of distinct
// documents in that order ([DocRanking]). Ten chunks may cover fewer than ten
// documents.
//
// # Metrics
//
// Averaged over queries: [RecallAt] (share of the relevant documents in the
// first k; R@100 only over rankings that deep), [ReciprocalRankAt] (1/rank of
// the first relevant document within k, else 0) and nDCG@10. nDCG is
// [GradedNDCGAt]: each document's gain (its grade, [Query.Grades]; 1 for a
// relevant document without one) over log2(rank+1), divided by the DCG of
// the ideal ranking; with binary relevance that is [NDCGAt]. Score ties do
// not need special handling: every Cordon ranking breaks them by chunk id
// (SPEC section 8), so the metrics are those of one deterministic order.
//
// # BEIR datasets
//
// [ReadBEIR] reads one split of a BEIR-format dataset (corpus.jsonl, the
// queries, the qrels): a document per corpus line (its title placed as
// [TitleMode] says), a query per judged query, graded by the qrels' scores.
//
// # Chunking bake-off
//
// [BakeOff] re-indexes the same corpus under several chunkings ([Variant]):
// fixed-size windows that ignore structure ([Flat]: heading and fence markers
// are neutralised so the chunker sees one "body" section), structure-aware
// windows without overlap, and structure-aware windows with overlap, at
// several window sizes, and runs the same queries through all four pipelines.
package eval
