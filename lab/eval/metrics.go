package eval

import "math"

// K is the cut-off of the reported metrics and the number of chunks every
// pipeline returns.
const K = 10

// DocRanking maps a chunk-level ranking, given as each chunk's document id in
// rank order, to a document-level ranking: distinct documents in the order of
// their first (best) chunk.
func DocRanking(chunkDocs []string) []string {
	seen := make(map[string]bool, len(chunkDocs))
	out := make([]string, 0, len(chunkDocs))
	for _, d := range chunkDocs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// relevantSet returns the distinct relevant documents.
func relevantSet(relevant []string) map[string]bool {
	s := make(map[string]bool, len(relevant))
	for _, r := range relevant {
		s[r] = true
	}
	return s
}

// hitRanks returns the 1-based ranks (within the first k) of the relevant
// documents of ranked, each document counted once at its first rank.
func hitRanks(ranked, relevant []string, k int) []int {
	rel := relevantSet(relevant)
	var out []int
	for i, d := range DocRanking(ranked) {
		if i >= k {
			break
		}
		if rel[d] {
			out = append(out, i+1)
		}
	}
	return out
}

// RecallAt is the share of the distinct relevant documents found in the first
// k documents of ranked. A repeated document counts once, at its first rank.
// With no relevant documents it is 0: nothing can be found, and callers
// (see [ReadQueries]) refuse such queries rather than average them in.
func RecallAt(ranked, relevant []string, k int) float64 {
	n := len(relevantSet(relevant))
	if n == 0 {
		return 0
	}
	return float64(len(hitRanks(ranked, relevant, k))) / float64(n)
}

// ReciprocalRankAt is 1/r for the rank r of the first relevant document when
// r <= k, else 0 (the per-query term of MRR@k).
func ReciprocalRankAt(ranked, relevant []string, k int) float64 {
	h := hitRanks(ranked, relevant, k)
	if len(h) == 0 {
		return 0
	}
	return 1 / float64(h[0])
}

// NDCGAt is binary-gain nDCG@k: the sum of 1/log2(r+1) over the ranks r <= k
// of relevant documents, divided by the same sum for an ideal ranking, which
// places min(|relevant|, k) relevant documents first. 0 with no relevant
// documents.
func NDCGAt(ranked, relevant []string, k int) float64 {
	n := len(relevantSet(relevant))
	if n == 0 {
		return 0
	}
	var dcg, ideal float64
	for _, r := range hitRanks(ranked, relevant, k) {
		dcg += 1 / math.Log2(float64(r+1))
	}
	for r := 1; r <= min(n, k); r++ {
		ideal += 1 / math.Log2(float64(r+1))
	}
	return dcg / ideal
}

// Metrics are one pipeline's scores, each averaged over queries.
type Metrics struct {
	RecallAt1  float64 `json:"recall_at_1"`
	RecallAt5  float64 `json:"recall_at_5"`
	RecallAt10 float64 `json:"recall_at_10"`
	MRRAt10    float64 `json:"mrr_at_10"`
	NDCGAt10   float64 `json:"ndcg_at_10"`
}

// Score computes one query's metrics for a ranking.
func Score(ranked, relevant []string) Metrics {
	return Metrics{
		RecallAt1:  RecallAt(ranked, relevant, 1),
		RecallAt5:  RecallAt(ranked, relevant, 5),
		RecallAt10: RecallAt(ranked, relevant, 10),
		MRRAt10:    ReciprocalRankAt(ranked, relevant, 10),
		NDCGAt10:   NDCGAt(ranked, relevant, 10),
	}
}

// Mean averages per-query metrics, summing in the given order. The mean of
// no queries is all zeros.
func Mean(per []Metrics) Metrics {
	var m Metrics
	if len(per) == 0 {
		return m
	}
	for _, p := range per {
		m.RecallAt1 += p.RecallAt1
		m.RecallAt5 += p.RecallAt5
		m.RecallAt10 += p.RecallAt10
		m.MRRAt10 += p.MRRAt10
		m.NDCGAt10 += p.NDCGAt10
	}
	n := float64(len(per))
	m.RecallAt1 /= n
	m.RecallAt5 /= n
	m.RecallAt10 /= n
	m.MRRAt10 /= n
	m.NDCGAt10 /= n
	return m
}
