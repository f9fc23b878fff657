package eval

import (
	"fmt"
	"io"
	"strings"
)

// Meta describes where an evaluation's inputs came from, for its printed
// header.
type Meta struct {
	Corpus      string `json:"corpus"`
	Fingerprint string `json:"fingerprint"`
	Queries     string `json:"queries"`
	QueriesSHA  string `json:"queries_sha256"`
	// Kinds and Split are the query selection (empty: all).
	Kinds []string `json:"kinds,omitempty"`
	Split string   `json:"split,omitempty"`
	// Qrels and QrelsSHA name a BEIR dataset's judgments (Queries is then
	// its queries file); Title is how its titles were indexed, Text
	// "markdown" when its texts kept their Markdown structure, Unjudged
	// the queries of the file left out for want of a judgment.
	Qrels    string `json:"qrels,omitempty"`
	QrelsSHA string `json:"qrels_sha256,omitempty"`
	Title    string `json:"title,omitempty"`
	Text     string `json:"text,omitempty"`
	Unjudged int    `json:"unjudged,omitempty"`
}

// textName is how a BEIR dataset's texts were read: prose or markdown.
func (m Meta) textName() string {
	if m.Text == "" {
		return "prose"
	}
	return m.Text
}

// selection describes a query selection for headers.
func (m Meta) selection() string {
	var parts []string
	if len(m.Kinds) > 0 {
		parts = append(parts, "kind "+strings.Join(m.Kinds, ", "))
	}
	if m.Split != "" {
		parts = append(parts, "split "+m.Split)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// pipelineLabel is a pipeline's name for people.
var pipelineLabel = map[Pipeline]string{
	BM25Only:     "BM25 only",
	DenseOnly:    "dense only",
	HybridRRF:    "hybrid RRF",
	HybridRerank: "hybrid RRF + rerank",
	Seed:         "seed profile",
}

// Label returns the pipeline's name for people ("hybrid RRF + rerank").
func (p Pipeline) Label() string {
	if l, ok := pipelineLabel[p]; ok {
		return l
	}
	return string(p)
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

// metricLabel is an interval metric's column name.
var metricLabel = map[string]string{
	"recall_at_10":      "R@10",
	"mrr_at_10":         "MRR@10",
	"ndcg_at_10":        "nDCG@10",
	"recall_at_100":     "R@100",
	"doc_recall_at_10":  "doc R@10",
	"doc_mrr_at_10":     "doc MRR@10",
	"doc_ndcg_at_10":    "doc nDCG@10",
	"doc_recall_at_100": "doc R@100",
}

// intervalHeader is the metric labels of one row of intervals.
func intervalHeader(row []Interval) []string {
	out := make([]string, len(row))
	for i, iv := range row {
		out[i] = metricLabel[iv.Metric]
		if out[i] == "" {
			out[i] = iv.Metric
		}
	}
	return out
}

// qrelsLine describes a BEIR dataset's judgments and titles, "" for a
// query file.
func (m Meta) qrelsLine() string {
	if m.Qrels == "" {
		return ""
	}
	return fmt.Sprintf("judgments %s (sha256:%s); titles: %s; text: %s; %d queries without a judgment left out", m.Qrels, m.QrelsSHA, m.Title, m.textName(), m.Unjudged)
}

// Setup describes the run's chunking and held-out sections in one line.
func (rep Report) Setup() string {
	s := fmt.Sprintf("%s chunking, %d words / %d overlap", rep.Strategy, rep.MaxWords, rep.OverlapWords)
	if len(rep.DropSections) > 0 {
		s += "; held out: " + strings.Join(rep.DropSections, ", ")
	}
	return s
}

func policyLine(rep Report) string {
	p := rep.Policy
	s := fmt.Sprintf("limit %d, top_n %d, rerank_depth %d, rrf_k %d, min_score %g; document-level relevance",
		p.Limit, p.TopN, p.RerankDepth, p.RRFK, p.MinScore)
	if rep.BM25K1 != 0 || rep.BM25B != 0 {
		s += fmt.Sprintf("; BM25 k1 %g, b %g, statistics %s", rep.BM25K1, rep.BM25B, rep.Statistics)
	}
	return s
}

// profileLines describe the pipelines whose policy is not the service
// profile's: the seed profile and each --profile.
func profileLines(rep Report) []string {
	var out []string
	for _, p := range rep.Pipelines {
		if p.Mode != Hybrid || p.Name == HybridRRF || p.Name == HybridRerank {
			continue
		}
		q := p.Policy
		floor := fmt.Sprintf("min_score %g", q.MinScore)
		if q.RerankMinScore != nil {
			floor = fmt.Sprintf("rerank_min_score %g, budget %d ms", *q.RerankMinScore, q.RerankBudgetMS)
		}
		weights := fmt.Sprintf("bm25 %g cosine %g", q.RRFWeights.BM25, q.RRFWeights.Cosine)
		if q.RRFWeights.Doc > 0 {
			weights += fmt.Sprintf(" doc %g", q.RRFWeights.Doc)
		}
		out = append(out, fmt.Sprintf("%s: rerank %v (%s, blend %g, proximity %g, doc %g, %s, depth %d), rrf_k %d, weights %s, top_n %d",
			p.Name, q.EnableRerank, q.Rerank, q.RerankBlend, q.RerankProximity, q.RerankDoc, floor, q.RerankDepth, q.RRFK, weights, q.TopN))
	}
	return out
}

// shedLines name the pipelines whose model rerank was shed for some
// queries: their numbers mix the model's order with the fused one.
func shedLines(rep Report) []string {
	var out []string
	for _, r := range rep.Results {
		if r.ModelShed > 0 {
			out = append(out, fmt.Sprintf("%s: the model reranker was shed for %d of %d queries (a timeout, an error or an open breaker), which got the fused order",
				r.Pipeline.Label(), r.ModelShed, rep.Queries))
		}
	}
	return out
}

func ci(iv Interval) string {
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", iv.Diff, iv.Lo, iv.Hi)
}

// intervalRows groups a report's intervals per compared pipeline, in the
// order of intervalMetrics.
func intervalRows(ivs []Interval) (names []Pipeline, rows map[Pipeline][]Interval) {
	rows = make(map[Pipeline][]Interval)
	for _, iv := range ivs {
		if _, ok := rows[iv.A]; !ok {
			names = append(names, iv.A)
		}
		rows[iv.A] = append(rows[iv.A], iv)
	}
	return names, rows
}

// WriteText writes a report (and an optional bake-off) as aligned tables for
// people.
func WriteText(w io.Writer, m Meta, rep Report, bake []VariantReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "corpus   %s: %d documents, %d chunks (%s)\n", m.Corpus, rep.Documents, rep.Chunks, rep.Setup())
	fmt.Fprintf(&b, "         %s\n", m.Fingerprint)
	fmt.Fprintf(&b, "queries  %s: %d queries (%d with several relevant documents%s)\n", m.Queries, rep.Queries, rep.MultiRel, m.selection())
	if l := m.qrelsLine(); l != "" {
		fmt.Fprintf(&b, "         %s\n", l)
	}
	fmt.Fprintf(&b, "policy   %s\n", policyLine(rep))
	if len(rep.Refused) > 0 {
		fmt.Fprintf(&b, "refused  %d documents had no text left once sections were held out\n", len(rep.Refused))
	}
	b.WriteString("\n")
	for _, l := range profileLines(rep) {
		fmt.Fprintf(&b, "profile  %s\n", l)
	}
	b.WriteString("\n")
	writeTextResults(&b, rep.Results, rep.deep())
	for _, l := range shedLines(rep) {
		fmt.Fprintf(&b, "shed     %s\n", l)
	}
	for _, k := range rep.Kinds {
		fmt.Fprintf(&b, "\nqueries of kind %q (%d)\n", k.Kind, k.Queries)
		writeTextResults(&b, k.Results, rep.deep())
	}
	if len(rep.Intervals) > 0 {
		names, rows := intervalRows(rep.Intervals)
		fmt.Fprintf(&b, "\npaired bootstrap 95%% CI of A - %s: diff [lo, hi]\n", rows[names[0]][0].B.Label())
		fmt.Fprintf(&b, "%-20s", "pipeline A")
		for _, h := range intervalHeader(rows[names[0]]) {
			fmt.Fprintf(&b, " %27s", h)
		}
		b.WriteString("\n")
		for _, n := range names {
			fmt.Fprintf(&b, "%-20s", n.Label())
			for _, iv := range rows[n] {
				fmt.Fprintf(&b, " %27s", ci(iv))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nper query (A vs B)                          RR@10 better/same/worse   R@10 better/same/worse\n")
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "  %-42s %6d %5d %5d        %6d %5d %5d\n", c.A.Label()+" vs "+c.B.Label(),
			c.RRBetter, c.RRSame, c.RRWorse, c.RecallBetter, c.RecallSame, c.RecallWorse)
	}
	if len(bake) > 0 {
		b.WriteString("\nchunking bake-off: recall@10 / MRR@10 per pipeline\n")
		fmt.Fprintf(&b, "%-16s %7s", "chunking", "chunks")
		for _, r := range rep.Results {
			fmt.Fprintf(&b, " %20s", r.Pipeline.Label())
		}
		b.WriteString("\n")
		for _, v := range bake {
			fmt.Fprintf(&b, "%-16s %7d", v.Variant.Name, v.Report.Chunks)
			for _, p := range rep.Results {
				r := v.Report.Result(p.Pipeline)
				fmt.Fprintf(&b, " %20s", f3(r.RecallAt10)+" / "+f3(r.MRRAt10))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the same tables as Markdown, as docs/quality.md shows
// them.
func WriteMarkdown(w io.Writer, m Meta, rep Report, bake []VariantReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Corpus `%s`: %d documents, %d chunks (%s), `%s`.\n", m.Corpus, rep.Documents, rep.Chunks, rep.Setup(), m.Fingerprint)
	fmt.Fprintf(&b, "Queries `%s`: %d (%d with several relevant documents%s), `sha256:%s`.\n", m.Queries, rep.Queries, rep.MultiRel, m.selection(), m.QueriesSHA)
	if m.Qrels != "" {
		fmt.Fprintf(&b, "Judgments `%s`, `sha256:%s`; titles: %s; text: %s; %d queries without a judgment left out.\n", m.Qrels, m.QrelsSHA, m.Title, m.textName(), m.Unjudged)
	}
	if rep.Removed > 0 {
		fmt.Fprintf(&b, "Held-out passages cut from %d documents before indexing.\n", rep.Removed)
	}
	fmt.Fprintf(&b, "Policy: %s.\n", policyLine(rep))
	if len(rep.Refused) > 0 {
		fmt.Fprintf(&b, "%d documents had no text left once sections were held out and were not indexed.\n", len(rep.Refused))
	}
	for _, l := range profileLines(rep) {
		fmt.Fprintf(&b, "Profile %s.\n", l)
	}
	b.WriteString("\n")
	writeMarkdownResults(&b, rep.Results, rep.deep())
	for _, l := range shedLines(rep) {
		fmt.Fprintf(&b, "\nShed: %s.\n", l)
	}
	for _, k := range rep.Kinds {
		fmt.Fprintf(&b, "\nQueries of kind `%s` (%d):\n\n", k.Kind, k.Queries)
		writeMarkdownResults(&b, k.Results, rep.deep())
	}
	if len(rep.Intervals) > 0 {
		names, rows := intervalRows(rep.Intervals)
		head := intervalHeader(rows[names[0]])
		fmt.Fprintf(&b, "\n| A - %s, paired bootstrap 95%% CI | %s |\n|---|%s\n", rows[names[0]][0].B.Label(),
			strings.Join(head, " | "), strings.Repeat("--:|", len(head)))
		for _, n := range names {
			fmt.Fprintf(&b, "| %s |", n.Label())
			for _, iv := range rows[n] {
				fmt.Fprintf(&b, " %s |", ci(iv))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n| per query, A vs B | RR@10 better | same | worse | R@10 better | same | worse |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "| %s vs %s | %d | %d | %d | %d | %d | %d |\n", c.A.Label(), c.B.Label(),
			c.RRBetter, c.RRSame, c.RRWorse, c.RecallBetter, c.RecallSame, c.RecallWorse)
	}
	if len(bake) > 0 {
		b.WriteString("\nChunking bake-off, recall@10 / MRR@10:\n\n| chunking | chunks |")
		for _, r := range rep.Results {
			fmt.Fprintf(&b, " %s |", r.Pipeline.Label())
		}
		b.WriteString("\n|---|--:|")
		for range rep.Results {
			b.WriteString("--:|")
		}
		b.WriteString("\n")
		for _, v := range bake {
			fmt.Fprintf(&b, "| %s | %d |", v.Variant.Name, v.Report.Chunks)
			for _, p := range rep.Results {
				r := v.Report.Result(p.Pipeline)
				fmt.Fprintf(&b, " %s / %s |", f3(r.RecallAt10), f3(r.MRRAt10))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// deep reports whether the report's document rankings reach [DeepK].
func (rep Report) deep() bool { return rep.Depth >= DeepK }

func writeTextResults(b *strings.Builder, rs []PipelineResult, deep bool) {
	fmt.Fprintf(b, "%-20s %6s %6s %6s %7s %8s %9s %10s", "pipeline", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10",
		"docR@10", "docMRR@10")
	if deep {
		fmt.Fprintf(b, " %11s %9s", "docnDCG@10", "docR@100")
	}
	fmt.Fprintf(b, " %11s %6s\n", "docs/query", "empty")
	for _, r := range rs {
		fmt.Fprintf(b, "%-20s %6s %6s %6s %7s %8s %9s %10s", r.Pipeline.Label(), f3(r.RecallAt1), f3(r.RecallAt5),
			f3(r.RecallAt10), f3(r.MRRAt10), f3(r.NDCGAt10), f3(r.Doc.RecallAt10), f3(r.Doc.MRRAt10))
		if deep {
			fmt.Fprintf(b, " %11s %9s", f3(r.Doc.NDCGAt10), f3(r.Doc.RecallAt100))
		}
		fmt.Fprintf(b, " %11.2f %6d\n", r.MeanDocs, r.Empty)
	}
}

func writeMarkdownResults(b *strings.Builder, rs []PipelineResult, deep bool) {
	b.WriteString("| pipeline | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 | doc R@10 | doc MRR@10 |")
	if deep {
		b.WriteString(" doc nDCG@10 | doc R@100 |")
	}
	b.WriteString(" docs/query | empty |\n|---|--:|--:|--:|--:|--:|--:|--:|")
	if deep {
		b.WriteString("--:|--:|")
	}
	b.WriteString("--:|--:|\n")
	for _, r := range rs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |", r.Pipeline.Label(), f3(r.RecallAt1), f3(r.RecallAt5),
			f3(r.RecallAt10), f3(r.MRRAt10), f3(r.NDCGAt10), f3(r.Doc.RecallAt10), f3(r.Doc.MRRAt10))
		if deep {
			fmt.Fprintf(b, " %s | %s |", f3(r.Doc.NDCGAt10), f3(r.Doc.RecallAt100))
		}
		fmt.Fprintf(b, " %.2f | %d |\n", r.MeanDocs, r.Empty)
	}
}

// WriteScores writes 'cordon-lab eval score' results: one row per run, then
// each run's paired bootstrap interval against the first. When some run is
// deep ([RunScore.Deep]) an R@100 column is added, "-" for the runs cut at
// K.
func WriteScores(w io.Writer, markdown bool, queries int, scores []RunScore, ivs []Interval) error {
	deep := false
	for _, s := range scores {
		deep = deep || s.Deep()
	}
	r100 := func(s RunScore) string {
		if s.Deep() {
			return f3(s.RecallAt100)
		}
		return "-"
	}
	var b strings.Builder
	if markdown {
		fmt.Fprintf(&b, "| run (%d queries, document level) | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 |", queries)
		if deep {
			b.WriteString(" R@100 |")
		}
		b.WriteString(" missing |\n|---|--:|--:|--:|--:|--:|")
		if deep {
			b.WriteString("--:|")
		}
		b.WriteString("--:|\n")
		for _, s := range scores {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", s.Name, f3(s.RecallAt1), f3(s.RecallAt5), f3(s.RecallAt10),
				f3(s.MRRAt10), f3(s.NDCGAt10))
			if deep {
				fmt.Fprintf(&b, " %s |", r100(s))
			}
			fmt.Fprintf(&b, " %d |\n", s.Missing)
		}
	} else {
		fmt.Fprintf(&b, "%d queries, document level\n%-28s %6s %6s %6s %7s %8s", queries, "run", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10")
		if deep {
			fmt.Fprintf(&b, " %6s", "R@100")
		}
		fmt.Fprintf(&b, " %8s\n", "missing")
		for _, s := range scores {
			fmt.Fprintf(&b, "%-28s %6s %6s %6s %7s %8s", s.Name, f3(s.RecallAt1), f3(s.RecallAt5), f3(s.RecallAt10),
				f3(s.MRRAt10), f3(s.NDCGAt10))
			if deep {
				fmt.Fprintf(&b, " %6s", r100(s))
			}
			fmt.Fprintf(&b, " %8d\n", s.Missing)
		}
	}
	if len(ivs) > 0 {
		names, rows := intervalRows(ivs)
		head := intervalHeader(rows[names[0]])
		if markdown {
			fmt.Fprintf(&b, "\n| A - %s, paired bootstrap 95%% CI | %s |\n|---|%s\n", rows[names[0]][0].B,
				strings.Join(head, " | "), strings.Repeat("--:|", len(head)))
		} else {
			fmt.Fprintf(&b, "\npaired bootstrap 95%% CI of A - %s: diff [lo, hi]\n%-28s", rows[names[0]][0].B, "run A")
			for _, h := range head {
				fmt.Fprintf(&b, " %27s", h)
			}
			b.WriteString("\n")
		}
		for _, n := range names {
			if markdown {
				fmt.Fprintf(&b, "| %s |", n)
			} else {
				fmt.Fprintf(&b, "%-28s", n)
			}
			for _, iv := range rows[n] {
				if markdown {
					fmt.Fprintf(&b, " %s |", ci(iv))
				} else {
					fmt.Fprintf(&b, " %27s", ci(iv))
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
