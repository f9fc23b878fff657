// Package memindex is a fast, exact in-memory index of one tenant's chunks,
// laid out for scoring rather than for reading:
//
//   - dense vectors are stored column-wise as int8 (one column per dimension),
//     so a query touches only its own non-zero dimensions, summed four at
//     a time into int32 dot products (vectorized with AVX2 on amd64) when
//     the query's weights keep every partial sum within int32, else into
//     int64; a chunk with a component outside int8 keeps its exact vector
//     aside;
//   - postings are per-term slices of (slot, tf), scored into a reused
//     accumulator in query-term order;
//   - entitlement attributes are plain arrays (classification, an interned
//     barrier-set id, as_of_tick), checked per slot before any ranking;
//     beside them an alive bitmap and, for the last few principals that
//     queried, a bitmap of the slots each may see (computed on a
//     principal's first query, kept up to date by writes), so the funnel
//     is counted 64 slots at a time and only visible slots are checked
//     for freshness;
//   - a lexical range dense in postings is ranked by MaxScore: a term whose
//     bound (its list's largest tf in its shortest chunk) cannot lift a
//     chunk into the top list stops proposing chunks, and a chunk proposed
//     by the others is scored whole in query-term order; every chunk
//     holding a term is still counted, from a bitmap of the range's
//     postings (a list with a sixteenth of the slots or more keeps its own
//     bitmap, joined a word at a time);
//   - top_n is kept with a bounded heap under the same total order as the
//     reference (score descending, chunk id ascending);
//   - the document ranking is summed from the lexical parts' own pass over
//     the postings: a document's chunks hold consecutive slots and no part
//     cuts a document, so each part sums its postings into one run per
//     document and scores its own documents once every part has counted;
//     when the query's terms hold many postings, each list's own document
//     counts and bounds (kept by every write) give the idfs first, and each
//     part scores by MaxScore only the documents that may enter the top
//     list.
//
// Scores come from the same functions as the reference store (bm25.Term,
// hashembed.Cosine) over the same exact integers, so results are
// byte-identical; the differential tests hold it to that.
//
// [Index] is not safe for concurrent use. store/postgres keeps one per
// tenant behind its own lock; memindextest wraps one per tenant as a replay
// and retrieval store for the differential tests.
package memindex
