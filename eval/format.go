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
}

// pipelineLabel is a pipeline's name for people.
var pipelineLabel = map[Pipeline]string{
	BM25Only:     "BM25 only",
	DenseOnly:    "dense only",
	HybridRRF:    "hybrid RRF",
	HybridRerank: "hybrid RRF + rerank",
}

// Label returns the pipeline's name for people ("hybrid RRF + rerank").
func (p Pipeline) Label() string {
	if l, ok := pipelineLabel[p]; ok {
		return l
	}
	return string(p)
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

func setup(rep Report) string {
	s := fmt.Sprintf("%s chunking, %d words / %d overlap", rep.Strategy, rep.MaxWords, rep.OverlapWords)
	if len(rep.DropSections) > 0 {
		s += "; held out: " + strings.Join(rep.DropSections, ", ")
	}
	return s
}

func policyLine(rep Report) string {
	p := rep.Policy
	return fmt.Sprintf("limit %d, top_n %d, rerank_depth %d, rrf_k %d, min_score %g; document-level relevance",
		p.Limit, p.TopN, p.RerankDepth, p.RRFK, p.MinScore)
}

// WriteText writes a report (and an optional bake-off) as aligned tables for
// people.
func WriteText(w io.Writer, m Meta, rep Report, bake []VariantReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "corpus   %s: %d documents, %d chunks (%s)\n", m.Corpus, rep.Documents, rep.Chunks, setup(rep))
	fmt.Fprintf(&b, "         %s\n", m.Fingerprint)
	fmt.Fprintf(&b, "queries  %s: %d queries (%d with several relevant documents)\n", m.Queries, rep.Queries, rep.MultiRel)
	fmt.Fprintf(&b, "policy   %s\n", policyLine(rep))
	if len(rep.Refused) > 0 {
		fmt.Fprintf(&b, "refused  %d documents had no text left once sections were held out\n", len(rep.Refused))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-20s %6s %6s %6s %7s %8s %11s %6s\n", "pipeline", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "docs/query", "empty")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "%-20s %6s %6s %6s %7s %8s %11.2f %6d\n", r.Pipeline.Label(), f3(r.RecallAt1), f3(r.RecallAt5),
			f3(r.RecallAt10), f3(r.MRRAt10), f3(r.NDCGAt10), r.MeanDocs, r.Empty)
	}
	b.WriteString("\nper query (A vs B)                          RR@10 better/same/worse   R@10 better/same/worse\n")
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "  %-42s %6d %5d %5d        %6d %5d %5d\n", c.A.Label()+" vs "+c.B.Label(),
			c.RRBetter, c.RRSame, c.RRWorse, c.RecallBetter, c.RecallSame, c.RecallWorse)
	}
	if len(bake) > 0 {
		b.WriteString("\nchunking bake-off: recall@10 / MRR@10 per pipeline\n")
		fmt.Fprintf(&b, "%-16s %7s", "chunking", "chunks")
		for _, p := range Pipelines {
			fmt.Fprintf(&b, " %20s", p.Label())
		}
		b.WriteString("\n")
		for _, v := range bake {
			fmt.Fprintf(&b, "%-16s %7d", v.Variant.Name, v.Report.Chunks)
			for _, p := range Pipelines {
				r := v.Report.Result(p)
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
	fmt.Fprintf(&b, "Corpus `%s`: %d documents, %d chunks (%s), `%s`.\n", m.Corpus, rep.Documents, rep.Chunks, setup(rep), m.Fingerprint)
	fmt.Fprintf(&b, "Queries `%s`: %d (%d with several relevant documents), `sha256:%s`.\n", m.Queries, rep.Queries, rep.MultiRel, m.QueriesSHA)
	fmt.Fprintf(&b, "Policy: %s.\n", policyLine(rep))
	if len(rep.Refused) > 0 {
		fmt.Fprintf(&b, "%d documents had no text left once sections were held out and were not indexed.\n", len(rep.Refused))
	}
	b.WriteString("\n| pipeline | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 | docs/query | empty |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.2f | %d |\n", r.Pipeline.Label(), f3(r.RecallAt1), f3(r.RecallAt5),
			f3(r.RecallAt10), f3(r.MRRAt10), f3(r.NDCGAt10), r.MeanDocs, r.Empty)
	}
	b.WriteString("\n| per query, A vs B | RR@10 better | same | worse | R@10 better | same | worse |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range rep.Comparisons {
		fmt.Fprintf(&b, "| %s vs %s | %d | %d | %d | %d | %d | %d |\n", c.A.Label(), c.B.Label(),
			c.RRBetter, c.RRSame, c.RRWorse, c.RecallBetter, c.RecallSame, c.RecallWorse)
	}
	if len(bake) > 0 {
		b.WriteString("\nChunking bake-off, recall@10 / MRR@10:\n\n| chunking | chunks |")
		for _, p := range Pipelines {
			fmt.Fprintf(&b, " %s |", p.Label())
		}
		b.WriteString("\n|---|--:|")
		for range Pipelines {
			b.WriteString("--:|")
		}
		b.WriteString("\n")
		for _, v := range bake {
			fmt.Fprintf(&b, "| %s | %d |", v.Variant.Name, v.Report.Chunks)
			for _, p := range Pipelines {
				r := v.Report.Result(p)
				fmt.Fprintf(&b, " %s / %s |", f3(r.RecallAt10), f3(r.MRRAt10))
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
