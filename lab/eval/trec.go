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
	// scores 0.
	Metrics
	Missing  int       `json:"missing"` // queries the run has no line for
	PerQuery []Metrics `json:"-"`
}

// ScoreRun scores a run over queries: each query's documents (by
// [Query.Key]) against its relevant documents, with the same metrics as
// [Run]'s document level.
func ScoreRun(name string, run TRECRun, queries []Query) RunScore {
	s := RunScore{Name: name, PerQuery: make([]Metrics, len(queries))}
	for i, q := range queries {
		docs, ok := run[q.Key()]
		if !ok {
			s.Missing++
		}
		s.PerQuery[i] = Score(docs, q.Relevant)
	}
	s.Metrics = Mean(s.PerQuery)
	return s
}

// CompareRuns gives the paired bootstrap intervals of R@10 and MRR@10 of
// each run against base, with n resamples.
func CompareRuns(base RunScore, runs []RunScore, n int) []Interval {
	var out []Interval
	pick := map[string]func(Metrics) float64{
		"recall_at_10": func(m Metrics) float64 { return m.RecallAt10 },
		"mrr_at_10":    func(m Metrics) float64 { return m.MRRAt10 },
	}
	for _, r := range runs {
		if r.Name == base.Name {
			continue
		}
		for _, name := range []string{"recall_at_10", "mrr_at_10"} {
			a, b := make([]float64, len(r.PerQuery)), make([]float64, len(base.PerQuery))
			for i := range r.PerQuery {
				a[i] = pick[name](r.PerQuery[i])
			}
			for i := range base.PerQuery {
				b[i] = pick[name](base.PerQuery[i])
			}
			d, lo, hi := PairedBootstrap(a, b, n, BootstrapSeed)
			out = append(out, Interval{A: Pipeline(r.Name), B: Pipeline(base.Name), Metric: name, Diff: d, Lo: lo, Hi: hi})
		}
	}
	return out
}
