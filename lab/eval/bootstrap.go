package eval

import (
	"math"
	"math/rand/v2"
	"slices"
)

// BootstrapSeed seeds every bootstrap: the same inputs give the same
// intervals.
const BootstrapSeed = 20261201

// Interval is a paired bootstrap 95% confidence interval of the difference
// A - B of a per-query metric's mean.
type Interval struct {
	A      Pipeline `json:"a"`
	B      Pipeline `json:"b"`
	Metric string   `json:"metric"`
	Diff   float64  `json:"diff"`
	Lo     float64  `json:"lo"`
	Hi     float64  `json:"hi"`
}

// PairedBootstrap returns the mean of a[i] - b[i] and the 2.5th and 97.5th
// percentiles of that mean over n resamples of the queries with
// replacement (the same resampled queries for both sides: paired). The
// resamples come from a PCG generator seeded with seed, so equal inputs give
// equal intervals. a and b must have the same length; with no queries or
// n < 1 everything is 0.
func PairedBootstrap(a, b []float64, n int, seed uint64) (diff, lo, hi float64) {
	m := len(a)
	if m == 0 || m != len(b) || n < 1 {
		return 0, 0, 0
	}
	d := make([]float64, m)
	for i := range a {
		d[i] = a[i] - b[i]
		diff += d[i]
	}
	diff /= float64(m)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	means := make([]float64, n)
	for r := range means {
		var s float64
		for range m {
			s += d[rng.IntN(m)]
		}
		means[r] = s / float64(m)
	}
	slices.Sort(means)
	return diff, percentile(means, 0.025), percentile(means, 0.975)
}

// percentile is the p-th quantile of sorted values (nearest rank).
func percentile(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// metricPick names a per-query metric and reads it.
type metricPick struct {
	name string
	get  func(QueryResult, Pipeline) float64
}

// intervalMetrics are the differences a report's intervals cover;
// deepIntervalMetrics are added for rankings [DeepK] documents deep.
var (
	intervalMetrics = []metricPick{
		{"recall_at_10", func(q QueryResult, p Pipeline) float64 { return q.Metrics[p].RecallAt10 }},
		{"mrr_at_10", func(q QueryResult, p Pipeline) float64 { return q.Metrics[p].MRRAt10 }},
		{"doc_recall_at_10", func(q QueryResult, p Pipeline) float64 { return q.Doc[p].RecallAt10 }},
	}
	deepIntervalMetrics = []metricPick{
		{"doc_ndcg_at_10", func(q QueryResult, p Pipeline) float64 { return q.Doc[p].NDCGAt10 }},
		{"doc_mrr_at_10", func(q QueryResult, p Pipeline) float64 { return q.Doc[p].MRRAt10 }},
		{"doc_recall_at_100", func(q QueryResult, p Pipeline) float64 { return q.Doc[p].RecallAt100 }},
	}
)

// intervals compares every pipeline but the baseline with it; deep adds
// the document-level nDCG@10, MRR@10 and R@100.
func intervals(names []Pipeline, baseline Pipeline, per []QueryResult, n int, deep bool) []Interval {
	picks := intervalMetrics
	if deep {
		picks = append(slices.Clip(picks), deepIntervalMetrics...)
	}
	var out []Interval
	for _, p := range names {
		if p == baseline {
			continue
		}
		for _, m := range picks {
			a, b := make([]float64, len(per)), make([]float64, len(per))
			for i, q := range per {
				a[i], b[i] = m.get(q, p), m.get(q, baseline)
			}
			d, lo, hi := PairedBootstrap(a, b, n, BootstrapSeed)
			out = append(out, Interval{A: p, B: baseline, Metric: m.name, Diff: d, Lo: lo, Hi: hi})
		}
	}
	return out
}
