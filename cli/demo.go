package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/fusion"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

func demoCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "demo",
		Summary: "a worked, annotated session on the in-memory store (start here)",
		Usage: `Usage: cordon demo

Runs a worked session on the in-memory store (no database needed) and prints it
to stdout as plain text, to be read top to bottom. It loads a small bank corpus
into three tenants (wholesale, retail, compliance) and shows, with numbers
computed by the real code:

   1. structure-aware chunks and their citation spans [start_char, end_char)
   2. tenant isolation
   3. clearance (excluded_by_entitlement)
   4. information barriers
   5. freshness (excluded_by_freshness)
   6. BM25's clamped IDF and term-frequency saturation
   7. reciprocal rank fusion
   8. the rerank floor: a query matching nothing returns nothing
   9. rerank shed, reported as degraded
  10. a grounding report with an unsupported claim
  11. context assembly under a token budget, and an impossible budget

The output is deterministic: two runs print the same bytes.

Example:
  cordon demo | less
`,
		Run: runDemo,
	}
}

func runDemo(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: demo takes no arguments, got %q", cmdline.ErrUsage, fs.Args())
	}
	return writeDemo(ctx, env.Stdout)
}

// The demo's clock: every retrieval runs at this tick, and documents carry
// as_of_tick values a little before it (or, for the stale one, long before).
const demoNowTick = 1000

// demoMaxStale is the freshness contract of sections 5, 10 and 11: a document
// more than a "year" of ticks old is not served.
const demoMaxStale int64 = 365

// demoSettings are the index defaults with small windows, so that a section
// longer than 30 words visibly splits into overlapping chunks.
func demoSettings() index.Settings {
	s := index.DefaultSettings()
	s.Chunking = chunk.Options{MaxWords: 30, OverlapWords: 6}
	return s
}

// demoCorpus is the bank corpus: eight Markdown documents in three tenants.
func demoCorpus() []cordontype.Document {
	return []cordontype.Document{
		{
			Tenant: "wholesale", DocID: "wh-pay-hold", Classification: cordontype.Confidential, AsOfTick: 990,
			Text: `# Payment holds

Operations desk procedure for wholesale payments stopped by screening.

## Hold reasons

Payment PMT-771 is on hold because the beneficiary name matched a sanctions screening alert. Payments are also held when the amount exceeds the counterparty limit, or when the settlement instructions changed within the last five business days.

## Release rules

A hold is released only after a second reviewer clears the alert. Releases above 10 million require the desk head's approval and are logged for audit.
`,
		},
		{
			Tenant: "wholesale", DocID: "wh-fx-limits", Classification: cordontype.Internal, AsOfTick: 985,
			Text: `# FX limits

## Intraday limits

Each trader has an intraday FX limit set by market risk. A breach is escalated to the desk head within the hour.
`,
		},
		{
			Tenant: "wholesale", DocID: "wh-falcon-memo", Classification: cordontype.Confidential, AsOfTick: 995,
			Barriers: []string{"deal-team:project-falcon"},
			Text: `# Project Falcon

## Target

Project Falcon is the proposed acquisition of a regional payments processor. Valuation work stays inside the deal team.
`,
		},
		{
			Tenant: "wholesale", DocID: "wh-pay-hold-2019", Classification: cordontype.Internal, AsOfTick: 100,
			Text: `# Payment holds (2019 procedure)

## Release rules

Superseded. Any operations analyst could release a hold without a second review.
`,
		},
		{
			Tenant: "retail", DocID: "rt-overdraft", Classification: cordontype.Public, AsOfTick: 990,
			Text: `Retail fee schedule, effective this quarter.

# Overdraft fees

An arranged overdraft costs €5 a month. An unarranged overdraft costs €25 per occurrence.

## Refunds

Customers may ask for an overdraft fee refund once a year, in branch or in the app.
`,
		},
		{
			Tenant: "retail", DocID: "rt-mortgage", Classification: cordontype.Internal, AsOfTick: 980,
			Text: `# Mortgage rate lock

## Lock period

A mortgage rate is locked for 90 days from the offer. Extending the lock costs 0.25% of the loan.
`,
		},
		{
			Tenant: "compliance", DocID: "co-sar-filing", Classification: cordontype.Restricted, AsOfTick: 990,
			Text: `# Suspicious activity reports

## Filing

A suspicious activity report must be filed within 30 days of detection. Tipping off the customer is a criminal offence.
`,
		},
		{
			Tenant: "compliance", DocID: "co-training", Classification: cordontype.Internal, AsOfTick: 970,
			Text: `# Annual compliance training

## Deadlines

All staff complete anti-money-laundering training by the end of March.
`,
		},
	}
}

// The principals of the demo. In the service they come from an authenticated
// credential, never from the request body.
var (
	demoWholesaleDesk = cordontype.Principal{Tenant: "wholesale", Clearance: cordontype.Confidential}
	demoFalconBanker  = cordontype.Principal{Tenant: "wholesale", Clearance: cordontype.Confidential,
		Barriers: []string{"deal-team:project-falcon"}}
	demoRetailAgent       = cordontype.Principal{Tenant: "retail", Clearance: cordontype.Internal}
	demoComplianceAnalyst = cordontype.Principal{Tenant: "compliance", Clearance: cordontype.Confidential}
	demoComplianceOfficer = cordontype.Principal{Tenant: "compliance", Clearance: cordontype.Restricted}
)

// The demo's queries and texts.
const (
	demoRetailQuery   = "mortgage rate lock"
	demoSARQuery      = "suspicious activity report filing"
	demoFalconQuery   = "project falcon acquisition"
	demoHoldQuery     = "payment hold release rules"
	demoNothingQuery  = "zebra origami telescope"
	demoTraceQuery    = "PMT-771 hold reason and release rules"
	demoAnswer        = "Payment PMT-771 is on hold because the beneficiary name matched a sanctions screening alert. The hold is released after a second reviewer clears the alert. The customer has been notified by email."
	demoInstructions  = "Answer only from the sources below and cite each claim as [chunk_id]. If the sources do not say, answer that you do not know."
	demoToolSchema    = `{"name": "cite", "parameters": {"chunk_id": "string"}}`
	demoContextPolicy = "Wholesale operations staff, clearance confidential. Never reveal content outside these sources."
	demoImpossible    = 20 // tokens: less than the instructions alone
)

// demoRRF are the two rankings of section 7: "steady" is 3rd in both, "spiky"
// is 1st lexically and 10th densely; the others appear in one ranking only.
var demoRRF = [][]string{
	{"spiky", "lex-2", "steady", "lex-4", "lex-5", "lex-6", "lex-7", "lex-8", "lex-9", "lex-10"},
	{"dense-1", "dense-2", "steady", "dense-4", "dense-5", "dense-6", "dense-7", "dense-8", "dense-9", "spiky"},
}

// demoPolicy returns the default policy with rerank on and optional freshness.
func demoPolicy(maxStale bool) retrieval.Policy {
	p := retrieval.DefaultPolicy()
	if maxStale {
		m := demoMaxStale
		p.MaxStaleTicks = &m
	}
	return p
}

// demoStore loads the corpus into a fresh in-memory store and returns the new
// chunks of each document, in corpus order.
func demoStore(ctx context.Context) (*memory.Store, [][]cordontype.Chunk, error) {
	st, err := memory.New(demoSettings())
	if err != nil {
		return nil, nil, err
	}
	var chunks [][]cordontype.Chunk
	for _, d := range demoCorpus() {
		cs, err := st.Put(ctx, d)
		if err != nil {
			return nil, nil, fmt.Errorf("put %s: %w", d.DocID, err)
		}
		chunks = append(chunks, cs)
	}
	return st, chunks, nil
}

// demo writes the session. Writes go through a bufio.Writer whose Flush
// reports the first write error, so the steps need not check each Fprintf.
type demo struct {
	w      *bufio.Writer
	r      *retrieval.Retriever
	chunks [][]cordontype.Chunk // each corpus document's chunks, in corpus order
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.w, format, args...) }

// heading prints a numbered section heading, underlined.
func (d *demo) heading(n int, title string) {
	t := fmt.Sprintf("%d. %s", n, title)
	d.printf("\n%s\n%s\n", t, strings.Repeat("=", len([]rune(t))))
}

// say prints a paragraph wrapped at 80 columns with a two-space indent.
func (d *demo) say(text string) { d.wrap("  ", text) }

// wrap prints text wrapped at 80 columns, each line starting with indent.
func (d *demo) wrap(indent, text string) {
	width := 80 - len(indent)
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > width {
			d.printf("%s%s\n", indent, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		d.printf("%s%s\n", indent, line)
	}
}

func demoDescribe(p cordontype.Principal) string {
	b := "none"
	if len(p.Barriers) > 0 {
		b = strings.Join(p.Barriers, ",")
	}
	return fmt.Sprintf("tenant=%s clearance=%s barriers=%s", p.Tenant, p.Clearance, b)
}

// retrieve runs one retrieval and prints who asked what, the funnel counters
// and the results with how each earned its place.
func (d *demo) retrieve(ctx context.Context, p cordontype.Principal, query string, pol retrieval.Policy) (retrieval.Result, error) {
	res, err := d.r.Retrieve(ctx, retrieval.Query{Principal: p, Text: query, NowTick: demoNowTick, Policy: pol})
	if err != nil {
		return res, fmt.Errorf("retrieve %q: %w", query, err)
	}
	fresh := "no max_stale_ticks"
	if pol.MaxStaleTicks != nil {
		fresh = fmt.Sprintf("max_stale_ticks=%d", *pol.MaxStaleTicks)
	}
	rerank := "rerank on"
	if !pol.EnableRerank {
		rerank = "rerank OFF"
	}
	d.printf("\n  > principal %s\n", demoDescribe(p))
	d.printf("    query %q  now_tick=%d  %s  %s\n", query, demoNowTick, fresh, rerank)
	d.printf("    considered=%d  excluded_by_entitlement=%d  excluded_by_freshness=%d  degraded=[%s]\n",
		res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness, strings.Join(res.Degraded, ","))
	if len(res.Chunks) == 0 {
		d.printf("    results: none\n")
	}
	for i, s := range res.Chunks {
		d.printf("    %d. %-20s %-17s bm25=%s cos=%s rrf=%.6f rerank=%s\n", i+1, s.Chunk.ChunkID,
			"["+s.Chunk.Section+"]", demoScoreRank(s.BM25, s.BM25Rank), demoScoreRank(s.Cosine, s.CosineRank), s.Fused, demoOptScore(s.Rerank))
	}
	return res, nil
}

func demoScoreRank(score *float64, rank *int) string {
	if score == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f(#%d)", *score, *rank)
}

func demoOptScore(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func demoPreview(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// firstOverlap returns the first two consecutive chunks of a document that
// share text (two windows of one section).
func demoFirstOverlap(chunks [][]cordontype.Chunk) (a, b cordontype.Chunk, ok bool) {
	for _, cs := range chunks {
		for j := 1; j < len(cs); j++ {
			if cs[j-1].Section == cs[j].Section && cs[j].StartChar < cs[j-1].EndChar {
				return cs[j-1], cs[j], true
			}
		}
	}
	return a, b, false
}

func demoChunks(res retrieval.Result) []cordontype.Chunk {
	out := make([]cordontype.Chunk, len(res.Chunks))
	for i, s := range res.Chunks {
		out[i] = s.Chunk
	}
	return out
}

// writeDemo writes the whole worked session to w.
func writeDemo(ctx context.Context, w io.Writer) error {
	st, chunks, err := demoStore(ctx)
	if err != nil {
		return err
	}
	d := &demo{w: bufio.NewWriter(w), r: retrieval.New(st), chunks: chunks}
	d.printf("Cordon demo: a worked session on the in-memory store (no database).\n")
	d.say("Every number below is computed by the same code the service runs; run it twice and the output is byte-identical, because nothing in the pipeline reads a clock, a random source or Go map order.")
	steps := []func(context.Context) error{
		d.corpus, d.tenants, d.clearance, d.barrier, d.freshness, d.bm25, d.rrf,
		d.nothing, d.shed, d.grounding, d.assembly,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			d.w.Flush() // show how far the session got
			return err
		}
	}
	d.printf("\n")
	d.say("That is the whole pipeline. Next: 'cordon replay --help' runs the same steps from a JSON script, against the in-memory store or PostgreSQL.")
	return d.w.Flush()
}

// 1. The corpus and its chunks.
func (d *demo) corpus(context.Context) error {
	chunks := d.chunks
	d.heading(1, "A small bank corpus, chunked by structure first, size second")
	set := demoSettings()
	corpus := demoCorpus()
	d.say(fmt.Sprintf("The corpus: %d Markdown documents in three tenants. Each is split at its headings into sections, then each section into windows of at most %d words overlapping by %d. A chunk never straddles two sections, so its section name is an honest label and its span [start_char, end_char) points a reader at the exact passage.",
		len(corpus), set.Chunking.MaxWords, set.Chunking.OverlapWords))
	perTenant := map[string]int{}
	for i, doc := range corpus {
		b := "-"
		if len(doc.Barriers) > 0 {
			b = strings.Join(doc.Barriers, ",")
		}
		d.printf("\n  %s/%s: %s, barriers %s, as_of_tick %d\n", doc.Tenant, doc.DocID, doc.Classification, b, doc.AsOfTick)
		for _, c := range chunks[i] {
			d.printf("    %-20s %-17s [%3d,%3d) %q\n", c.ChunkID, "["+c.Section+"]", c.StartChar, c.EndChar, demoPreview(c.Text, 32))
		}
		perTenant[doc.Tenant] += len(chunks[i])
	}
	d.printf("\n  Chunks per tenant: wholesale=%d retail=%d compliance=%d\n", perTenant["wholesale"], perTenant["retail"], perTenant["compliance"])
	if a, b, ok := demoFirstOverlap(chunks); ok {
		d.say(fmt.Sprintf("%s and %s are two windows of one long section: they share the span [%d, %d), so a sentence cut by one window is whole in the other.",
			a.ChunkID, b.ChunkID, b.StartChar, a.EndChar))
	}

	// The citation check, on the retail fee schedule's "Refunds" chunk: its
	// document has text before the first heading and two multi-byte "€".
	var doc cordontype.Document
	var c cordontype.Chunk
	for i, dd := range corpus {
		for _, cc := range chunks[i] {
			if dd.DocID == "rt-overdraft" && cc.Section == "Refunds" {
				doc, c = dd, cc
			}
		}
	}
	if c.ChunkID == "" {
		return fmt.Errorf("demo corpus: no Refunds chunk in rt-overdraft")
	}
	d.printf("\n  The source of %s, for reference:\n", doc.DocID)
	for _, line := range strings.Split(strings.TrimRight(doc.Text, "\n"), "\n") {
		d.printf("    | %s\n", line)
	}
	runes := []rune(doc.Text)
	span := string(runes[c.StartChar:c.EndChar])
	d.printf("  Citation check for %s:\n", c.ChunkID)
	d.printf("    []rune(text)[%d:%d] = %q\n", c.StartChar, c.EndChar, span)
	d.printf("    equals the chunk text: %t\n", span == c.Text)
	before := string(runes[:c.StartChar])
	d.say(fmt.Sprintf("Offsets count Unicode code points, not bytes: the %d \"€\" before this span take 3 bytes each in UTF-8, so its byte offset is %d while its start_char is %d. The preamble before the first heading is kept as section \"body\" rather than dropped.",
		strings.Count(before, "€"), len(before), c.StartChar))
	return nil
}

// 2. Tenant isolation.
func (d *demo) tenants(ctx context.Context) error {
	d.heading(2, "Tenants are namespaces: the wholesale desk cannot reach retail")
	d.say("Only the principal's own tenant is searched. A retail chunk is never a candidate for a wholesale principal and is not even counted in `considered`, so neither the results nor the counters reveal that retail has a document on the subject.")
	if _, err := d.retrieve(ctx, demoWholesaleDesk, demoRetailQuery, demoPolicy(false)); err != nil {
		return err
	}
	_, err := d.retrieve(ctx, demoRetailAgent, demoRetailQuery, demoPolicy(false))
	return err
}

// 3. Clearance.
func (d *demo) clearance(ctx context.Context) error {
	d.heading(3, "Clearance: a restricted document stays hidden from a confidential analyst")
	d.say("co-sar-filing is restricted. Entitlements are applied to each ranking before fusion, so a hidden chunk cannot take a result slot or shift other chunks' ranks. excluded_by_entitlement counts removals, once per ranking, so one hidden chunk found by both BM25 and the dense side counts 2; it goes to metrics and the audit log, and to a caller only when its credential allows it.")
	if _, err := d.retrieve(ctx, demoComplianceAnalyst, demoSARQuery, demoPolicy(false)); err != nil {
		return err
	}
	_, err := d.retrieve(ctx, demoComplianceOfficer, demoSARQuery, demoPolicy(false))
	return err
}

// 4. Information barriers.
func (d *demo) barrier(ctx context.Context) error {
	d.heading(4, "Information barriers: the Falcon memo needs the deal-team label")
	d.say("wh-falcon-memo is confidential and carries the barrier label deal-team:project-falcon. Visibility is a conjunction: the right tenant and enough clearance are not enough, the principal must also hold every barrier label of the chunk.")
	if _, err := d.retrieve(ctx, demoWholesaleDesk, demoFalconQuery, demoPolicy(false)); err != nil {
		return err
	}
	_, err := d.retrieve(ctx, demoFalconBanker, demoFalconQuery, demoPolicy(false))
	return err
}

// 5. Freshness.
func (d *demo) freshness(ctx context.Context) error {
	d.heading(5, "Freshness: the superseded 2019 procedure is excluded")
	d.say(fmt.Sprintf("wh-pay-hold-2019 has as_of_tick=100; at now_tick=%d it is %d ticks old. Without a freshness contract it competes with the current procedure; with max_stale_ticks=%d it is removed before fusion and counted, once per ranking. A rising freshness count is an operational signal: an ingestion feed has stalled.",
		demoNowTick, demoNowTick-100, demoMaxStale))
	if _, err := d.retrieve(ctx, demoWholesaleDesk, demoHoldQuery, demoPolicy(false)); err != nil {
		return err
	}
	_, err := d.retrieve(ctx, demoWholesaleDesk, demoHoldQuery, demoPolicy(true))
	return err
}

// 6. BM25 arithmetic.
func (d *demo) bm25(context.Context) error {
	d.heading(6, "BM25: clamped IDF and term-frequency saturation")
	const n = 12
	d.say(fmt.Sprintf("idf = max(0, ln((N - df + 0.5) / (df + 0.5) + 1)), here for a hypothetical tenant of N = %d chunks. Rare terms weigh most; the \"+ 1\" keeps a term found in every chunk slightly positive, where the classic formula without it goes negative and would rank a chunk containing the user's word below one without it.", n))
	for _, row := range []struct {
		df   int64
		note string
	}{{1, "a rare term"}, {10, "a common term"}, {n, "a term in every chunk"}} {
		classic := math.Log((float64(n-row.df) + 0.5) / (float64(row.df) + 0.5))
		d.printf("    df=%-2d %-22s idf=%.6f   (without the +1: %+.6f)\n", row.df, row.note, bm25.IDF(n, row.df), classic)
	}
	idf := bm25.IDF(n, 1)
	p := bm25.Params{K1: bm25.DefaultK1, B: 0}
	d.say(fmt.Sprintf("Term frequency saturates: with k1 = %.1f and b = 0 (length normalisation off), a rare term's contribution (idf %.6f) as its count in a chunk grows:", p.K1, idf))
	score := func(tf int64) float64 { return bm25.Term(idf, tf, 10, 10, p) }
	for _, pair := range [][2]int64{{1, 2}, {9, 10}} {
		lo, hi := score(pair[0]), score(pair[1])
		d.printf("    tf %d -> %-2d  score %.6f -> %.6f   increment %+.6f\n", pair[0], pair[1], lo, hi, hi-lo)
	}
	inc1, inc9 := score(2)-score(1), score(10)-score(9)
	d.say(fmt.Sprintf("The second occurrence adds %.1f times what the tenth does, and no count can push the score past idf x (k1 + 1) = %.6f: repeating a keyword does not buy rank.",
		inc1/inc9, idf*(p.K1+1)))
	return nil
}

// 7. Reciprocal rank fusion.
func (d *demo) rrf(context.Context) error {
	d.heading(7, "RRF: steady agreement beats one spike")
	d.say(fmt.Sprintf("Reciprocal rank fusion adds 1 / (k + rank) over the rankings (k = %d) and never looks at the raw scores, which live on different scales (BM25 is unbounded, cosine is in [-1, 1]). Two rankings of ten chunks: \"steady\" is 3rd in both; \"spiky\" is 1st lexically but 10th densely.", fusion.DefaultK))
	d.printf("    lexical: %s\n    dense:   %s\n", strings.Join(demoRRF[0], " "), strings.Join(demoRRF[1], " "))
	fused := fusion.RRF(demoRRF, fusion.DefaultK)
	score := map[string]float64{}
	for _, f := range fused {
		score[f.ChunkID] = f.Score
	}
	d.printf("    steady: 1/63 + 1/63 = %.6f\n", score["steady"])
	d.printf("    spiky:  1/61 + 1/70 = %.6f\n", score["spiky"])
	d.printf("    fused order:")
	for i, f := range fused[:3] {
		d.printf(" %d. %s %.6f", i+1, f.ChunkID, f.Score)
	}
	d.printf(" ... (%d chunks)\n", len(fused))
	d.say("A chunk both retrievers like is more likely relevant than one only a single retriever loves.")
	return nil
}

// 8. Nothing matches.
func (d *demo) nothing(ctx context.Context) error {
	d.heading(8, "A query that matches nothing returns nothing")
	pol := demoPolicy(false)
	d.say(fmt.Sprintf("No wholesale chunk contains \"zebra\", \"origami\" or \"telescope\", so BM25 finds nothing. The dense side is signed feature hashing into %d buckets, and unrelated words can share a bucket, so a chunk can still get a positive cosine and be `considered`. The rerank floor keeps only chunks holding at least %.0f%% of the query's distinct terms (min_score %.1f), so hash collisions never come back as \"the least irrelevant\" answer.",
		demoSettings().Dims, 100*pol.MinScore, pol.MinScore))
	_, err := d.retrieve(ctx, demoWholesaleDesk, demoNothingQuery, pol)
	return err
}

// 9. Rerank shed.
func (d *demo) shed(ctx context.Context) error {
	d.heading(9, "Rerank shed: a degraded answer, and it says so")
	d.say("Under load the service may turn the reranker off (enable_rerank=false). Retrieval still answers in fused order, but `degraded` names the missing stage, because the relevance floor of section 8 went with it: the same nonsense query now returns pure hash collisions.")
	_, err := d.retrieve(ctx, demoWholesaleDesk, demoNothingQuery, func() retrieval.Policy {
		p := demoPolicy(false)
		p.EnableRerank = false
		return p
	}())
	return err
}

// 10. Grounding.
func (d *demo) grounding(ctx context.Context) error {
	d.heading(10, "Grounding: every claim needs a source")
	d.say("A traced retrieval, then a drafted answer split into claims at sentence ends. A claim is supported when one retrieved chunk holds at least 60% of its distinct tokens; it then cites that chunk's span. The invented third claim has no source.")
	res, err := d.retrieve(ctx, demoWholesaleDesk, demoTraceQuery, demoPolicy(true))
	if err != nil {
		return err
	}
	rep, err := grounding.Check(grounding.SplitClaims(demoAnswer), demoChunks(res), grounding.DefaultThreshold)
	if err != nil {
		return err
	}
	for i, cl := range rep.Claims {
		verdict := "UNSUPPORTED"
		if cl.Supported {
			verdict = fmt.Sprintf("supported by %s [%d,%d)", cl.Citation.ChunkID, cl.Citation.StartChar, cl.Citation.EndChar)
		}
		d.printf("    claim %d: %q\n      overlap=%.2f  %s\n", i+1, cl.Claim, cl.Overlap, verdict)
	}
	d.printf("    coverage=%.4f  is_grounded=%t\n", rep.Coverage, rep.IsGrounded)
	return nil
}

// 11. Context assembly.
func (d *demo) assembly(ctx context.Context) error {
	d.heading(11, "Context assembly under a token budget")
	res, err := d.r.Retrieve(ctx, retrieval.Query{Principal: demoWholesaleDesk, Text: demoTraceQuery, NowTick: demoNowTick, Policy: demoPolicy(true)})
	if err != nil {
		return err
	}
	req := assemble.Request{
		Question: demoTraceQuery, Retrieved: demoChunks(res),
		Instructions: demoInstructions, ToolSchema: demoToolSchema, Policy: demoContextPolicy,
	}
	// Measure what all of section 10's chunks need, then offer one token less,
	// which forces exactly one drop: the lowest-ranked chunk.
	req.BudgetTokens = math.MaxInt32
	full, err := assemble.Context(req)
	if err != nil {
		return err
	}
	req.BudgetTokens = full.TotalTokens - 1
	d.say(fmt.Sprintf("The prompt is the stable blocks (instructions, tool schema, policy), then one block per chunk headed by its citation, then the question. The %d chunks of section 10 need %d tokens (code points / 4, rounded up); with a budget of %d the lowest-ranked chunk is dropped, never the question.",
		len(res.Chunks), full.TotalTokens, req.BudgetTokens))
	out, err := assemble.Context(req)
	if err != nil {
		return err
	}
	d.printf("    budget_tokens=%d\n", req.BudgetTokens)
	d.printf("    included=[%s]\n    dropped=[%s]\n", strings.Join(out.Included, " "), strings.Join(out.Dropped, " "))
	d.printf("    total_tokens=%d  stable_prefix_tokens=%d  cacheable_fraction=%.4f\n",
		out.TotalTokens, out.StablePrefixTokens, out.CacheableFraction)
	d.printf("    block headers of the assembled text:\n")
	for _, line := range strings.Split(out.Text, "\n") {
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			d.printf("      %s\n", line)
		}
	}
	d.say(fmt.Sprintf("The stable prefix is identical across questions, so a provider can cache it: %.1f%% of this prompt. More retrieved text lowers that share, which is a cost to weigh when choosing retrieval depth.", 100*out.CacheableFraction))
	req.BudgetTokens = demoImpossible
	if _, err = assemble.Context(req); err == nil {
		return fmt.Errorf("assemble: a budget of %d tokens unexpectedly fit", demoImpossible)
	}
	d.printf("    budget_tokens=%d:\n", demoImpossible)
	d.wrap("      ", "error: "+err.Error())
	return nil
}
