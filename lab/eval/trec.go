package eval

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A TREC run holds, per query id, documents in rank order. Each line is
// "qid Q0 docid rank score tag", fields separated by white space. As
// trec_eval does, documents are ordered by score, highest first; equal
// scores by rank, then by docid. A document listed twice for a query counts
// at its better place.
type TRECRun map[string][]string

// ReadRun reads a TREC run. A line without six fields, a rank that is not
// an integer or a score that is not a finite number is an error wrapping
// [ErrRun] that names the line; blank lines are skipped.
func ReadRun(r io.Reader) (TRECRun, error) {
	type row struct {
		doc   string
		rank  int
		score float64
	}
	rows := make(map[string][]row)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 6 {
			return nil, fmt.Errorf("%w: line %d: got %d fields, want 6 (qid Q0 docid rank score tag)", ErrRun, line, len(f))
		}
		rank, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: rank %q is not an integer", ErrRun, line, f[3])
		}
		score, err := strconv.ParseFloat(f[4], 64)
		if err != nil || score != score || score > 1e308 || score < -1e308 {
			return nil, fmt.Errorf("%w: line %d: score %q is not a finite number", ErrRun, line, f[4])
		}
		rows[f[0]] = append(rows[f[0]], row{f[2], rank, score})
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no lines", ErrRun)
	}
	run := make(TRECRun, len(rows))
	for q, rs := range rows {
		slices.SortStableFunc(rs, func(a, b row) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			if c := cmp.Compare(a.rank, b.rank); c != 0 {
				return c
			}
			return strings.Compare(a.doc, b.doc)
		})
		docs := make([]string, len(rs))
		for i, r := range rs {
			docs[i] = r.doc
		}
		run[q] = DocRanking(docs)
	}
	return run, nil
}

// WriteRun writes one query's document ranking as TREC run lines: rank
// 1..n, score n..1, so rank order and score order agree.
func WriteRun(w io.Writer, qid string, docs []string, tag string) error {
	var b strings.Builder
	for i, d := range docs {
		fmt.Fprintf(&b, "%s Q0 %s %d %d %s\n", qid, d, i+1, len(docs)-i, tag)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RunScore is a run's document-level metrics over a query set.
type RunScore struct {
	Name string `json:"name"`
	// Metrics are averaged over every query; a query absent from the run
	// scores 0. R@100 is measured when the run is deep.
	Metrics
	Missing int `json:"missing"` // queries the run has no line for
	// Depth is the most documents the run lists for one query: a run no
	// deeper than [K] was cut at K, and its R@100 is not measured.
	Depth    int       `json:"depth"`
	PerQuery []Metrics `json:"-"`
}

// Deep reports whether the run lists more than [K] documents for some
// query, so that R@100 means what it says.
func (s RunScore) Deep() bool { return s.Depth > K }

// ScoreRun scores a run over queries: each query's documents (by
// [Query.Key]) against its relevant documents (graded by [Query.Gains]),
// with the same metrics as [Run]'s document level, R@100 included when the
// run is deep ([RunScore.Deep]).
func ScoreRun(name string, run TRECRun, queries []Query) RunScore {
	s := RunScore{Name: name, PerQuery: make([]Metrics, len(queries))}
	for _, docs := range run {
		s.Depth = max(s.Depth, len(docs))
	}
	for i, q := range queries {
		docs, ok := run[q.Key()]
		if !ok {
			s.Missing++
		}
		s.PerQuery[i] = q.Score(docs, s.Deep())
	}
	s.Metrics = Mean(s.PerQuery)
	return s
}

// runMetrics are the per-query metrics [CompareRuns] compares: R@10 and
// MRR@10 always, nDCG@10 and R@100 when both runs are deep.
var runMetrics = []struct {
	name string
	deep bool
	get  func(Metrics) float64
}{
	{"recall_at_10", false, func(m Metrics) float64 { return m.RecallAt10 }},
	{"mrr_at_10", false, func(m Metrics) float64 { return m.MRRAt10 }},
	{"ndcg_at_10", true, func(m Metrics) float64 { return m.NDCGAt10 }},
	{"recall_at_100", true, func(m Metrics) float64 { return m.RecallAt100 }},
}

// CompareRuns gives the paired bootstrap intervals of R@10 and MRR@10 of
// each run against base, with n resamples, and of nDCG@10 and R@100 when
// every run is deep ([RunScore.Deep]).
func CompareRuns(base RunScore, runs []RunScore, n int) []Interval {
	deep := base.Deep()
	for _, r := range runs {
		deep = deep && r.Deep()
	}
	var out []Interval
	for _, r := range runs {
		if r.Name == base.Name {
			continue
		}
		for _, m := range runMetrics {
			if m.deep && !deep {
				continue
			}
			a, b := make([]float64, len(r.PerQuery)), make([]float64, len(base.PerQuery))
			for i := range r.PerQuery {
				a[i] = m.get(r.PerQuery[i])
			}
			for i := range base.PerQuery {
				b[i] = m.get(base.PerQuery[i])
			}
			d, lo, hi := PairedBootstrap(a, b, n, BootstrapSeed)
			out = append(out, Interval{A: Pipeline(r.Name), B: Pipeline(base.Name), Metric: m.name, Diff: d, Lo: lo, Hi: hi})
		}
	}
	return out
}
