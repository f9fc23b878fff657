package eval

import (
	"cmp"
	"math"
	"slices"
)

// K is the cut-off of the reported metrics and the number of chunks every
// pipeline returns.
const K = 10

// DeepK is the cut-off of the deep recall, R@100 (BEIR's second metric): it
// is measured only over rankings at least that deep ([Options.Depth], a TREC
// run listing more than K documents for some query).
const DeepK = 100

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
// documents. It is [GradedNDCGAt] with gain 1 for each relevant document.
func NDCGAt(ranked, relevant []string, k int) float64 {
	return GradedNDCGAt(ranked, binaryGains(relevant), k)
}

// GradedNDCGAt is nDCG@k with graded gains, as trec_eval's ndcg_cut and
// pytrec_eval (which BEIR reports) compute it: DCG is the sum of
// gain(d)/log2(r+1) over the documents d at ranks r <= k of ranked (a
// repeated document counts once, at its first rank; a document without a
// gain adds 0), divided by the DCG of the ideal ranking, the k largest gains
// in decreasing order. The gain is the judgment's grade itself (linear, not
// 2^grade - 1). 0 when no gain is positive.
func GradedNDCGAt(ranked []string, gains map[string]float64, k int) float64 {
	ideal := make([]float64, 0, len(gains))
	for _, g := range gains {
		if g > 0 {
			ideal = append(ideal, g)
		}
	}
	if len(ideal) == 0 {
		return 0
	}
	slices.SortFunc(ideal, func(a, b float64) int { return cmp.Compare(b, a) })
	var dcg, idcg float64
	for i, d := range DocRanking(ranked) {
		if i >= k {
			break
		}
		if g := gains[d]; g > 0 {
			dcg += g / math.Log2(float64(i+2))
		}
	}
	for i, g := range ideal[:min(len(ideal), k)] {
		idcg += g / math.Log2(float64(i+2))
	}
	return dcg / idcg
}

// binaryGains gives each relevant document gain 1.
func binaryGains(relevant []string) map[string]float64 {
	g := make(map[string]float64, len(relevant))
	for _, r := range relevant {
		g[r] = 1
	}
	return g
}

// Metrics are one pipeline's scores, each averaged over queries.
type Metrics struct {
	RecallAt1  float64 `json:"recall_at_1"`
	RecallAt5  float64 `json:"recall_at_5"`
	RecallAt10 float64 `json:"recall_at_10"`
	MRRAt10    float64 `json:"mrr_at_10"`
	NDCGAt10   float64 `json:"ndcg_at_10"`
	// RecallAt100 is set only for rankings scored to [DeepK] documents
	// (else 0, and absent from JSON).
	RecallAt100 float64 `json:"recall_at_100,omitempty"`
}

// Score computes one query's metrics for a ranking with binary relevance.
func Score(ranked, relevant []string) Metrics {
	return score(ranked, relevant, binaryGains(relevant), false)
}

// score computes one query's metrics: recall and MRR over the relevant
// documents, nDCG@10 with gains, R@100 when deep.
func score(ranked, relevant []string, gains map[string]float64, deep bool) Metrics {
	m := Metrics{
		RecallAt1:  RecallAt(ranked, relevant, 1),
		RecallAt5:  RecallAt(ranked, relevant, 5),
		RecallAt10: RecallAt(ranked, relevant, 10),
		MRRAt10:    ReciprocalRankAt(ranked, relevant, 10),
		NDCGAt10:   GradedNDCGAt(ranked, gains, 10),
	}
	if deep {
		m.RecallAt100 = RecallAt(ranked, relevant, DeepK)
	}
	return m
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
		m.RecallAt100 += p.RecallAt100
	}
	n := float64(len(per))
	m.RecallAt1 /= n
	m.RecallAt5 /= n
	m.RecallAt10 /= n
	m.MRRAt10 /= n
	m.NDCGAt10 /= n
	m.RecallAt100 /= n
	return m
}
