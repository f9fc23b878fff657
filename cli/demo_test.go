package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/fusion"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/retrieval"
)

// runDemoCLI runs 'cordon demo' through Main and returns its stdout.
func runDemoCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdout: &out, Stderr: &errb}, append([]string{"demo"}, args...))
	return out.String(), errb.String(), code
}

// demoOutput runs the demo and fails unless it exits 0.
func demoOutput(t *testing.T) string {
	t.Helper()
	out, stderr, code := runDemoCLI(t)
	if code != ExitOK {
		t.Fatalf("cordon demo: got exit code %d, want %d; stderr: %s", code, ExitOK, stderr)
	}
	return out
}

var demoHeadingRE = regexp.MustCompile(`(?m)^(\d+)\. .*\n=+$`)

// demoSections splits the output at its numbered, underlined headings:
// sections[n] is the text of section n (heading excluded).
func demoSections(t *testing.T, out string) map[int]string {
	t.Helper()
	locs := demoHeadingRE.FindAllStringSubmatchIndex(out, -1)
	secs := make(map[int]string, len(locs))
	for i, loc := range locs {
		n, err := strconv.Atoi(out[loc[2]:loc[3]])
		if err != nil {
			t.Fatalf("heading number %q: %v", out[loc[2]:loc[3]], err)
		}
		if n != i+1 {
			t.Fatalf("heading %d is numbered %d, want %d", i+1, n, i+1)
		}
		end := len(out)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		secs[n] = out[loc[1]:end]
	}
	return secs
}

// demoRetrievalBlocks returns the printed retrievals of a section, in order.
func demoRetrievalBlocks(sec string) []string {
	parts := strings.Split(sec, "\n  > principal ")
	return parts[1:]
}

var demoResultLineRE = regexp.MustCompile(`(?m)^    \d+\. (\S+) `)

// demoPrintedIDs returns the chunk ids of a printed retrieval's result lines.
func demoPrintedIDs(block string) []string {
	var ids []string
	for _, m := range demoResultLineRE.FindAllStringSubmatch(block, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func demoResultIDs(res retrieval.Result) []string {
	ids := make([]string, len(res.Chunks))
	for i, s := range res.Chunks {
		ids[i] = s.Chunk.ChunkID
	}
	return ids
}

// demoFlat collapses runs of whitespace, so wrapped paragraphs can be searched.
func demoFlat(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestDemoDeterministic(t *testing.T) {
	first, second := demoOutput(t), demoOutput(t)
	if first != second {
		t.Fatalf("two runs differ:\n--- first\n%s\n--- second\n%s", first, second)
	}
	secs := demoSections(t, first)
	if got, want := len(secs), 11; got != want {
		t.Fatalf("got %d numbered sections, want %d", got, want)
	}
	if n := strings.Count(first, "\n"); n < 150 || n > 250 {
		t.Errorf("got %d lines of output, want 150-250 (a readable session)", n)
	}
}

func TestDemoUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{name: "help flag", args: []string{"--help"}, wantCode: ExitOK, wantOut: "cordon demo | less"},
		{name: "stray argument", args: []string{"extra"}, wantCode: ExitUsage},
		{name: "unknown flag", args: []string{"--store", "postgres"}, wantCode: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, code := runDemoCLI(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("got exit code %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("got stdout %q, want it to contain %q", out, tt.wantOut)
			}
		})
	}
}

// TestDemoCorpus checks the corpus the demo promises and section 1's spans.
func TestDemoCorpus(t *testing.T) {
	ctx := context.Background()
	_, chunks, err := demoStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	corpus := demoCorpus()
	if n := len(corpus); n < 6 || n > 10 {
		t.Errorf("got %d documents, want 6-10", n)
	}
	tenants := map[string]bool{}
	classes := map[cordontype.Classification]bool{}
	var barrier, stale bool
	for _, d := range corpus {
		tenants[d.Tenant] = true
		classes[d.Classification] = true
		barrier = barrier || slices.Contains(d.Barriers, "deal-team:project-falcon")
		stale = stale || demoNowTick-d.AsOfTick > demoMaxStale
		if !strings.Contains(d.Text, "\n#") && !strings.HasPrefix(d.Text, "#") {
			t.Errorf("document %s has no Markdown heading", d.DocID)
		}
	}
	for _, tn := range []string{"wholesale", "retail", "compliance"} {
		if !tenants[tn] {
			t.Errorf("no document in tenant %s", tn)
		}
	}
	if len(classes) < 3 {
		t.Errorf("got %d distinct classifications, want at least 3", len(classes))
	}
	if !barrier || !stale {
		t.Errorf("got barrier document %t, stale document %t; want both", barrier, stale)
	}
	if _, _, ok := demoFirstOverlap(chunks); !ok {
		t.Errorf("no section splits into overlapping windows; the size-level split is not visible")
	}

	sec := demoSections(t, demoOutput(t))[1]
	lines := strings.Split(sec, "\n")
	for i, d := range corpus {
		runes := []rune(d.Text)
		for _, c := range chunks[i] {
			if got := string(runes[c.StartChar:c.EndChar]); got != c.Text {
				t.Errorf("%s: []rune(text)[%d:%d] = %q, want the chunk text %q", c.ChunkID, c.StartChar, c.EndChar, got, c.Text)
			}
			want := fmt.Sprintf("[%s] [%3d,%3d)", c.Section, c.StartChar, c.EndChar)
			found := false
			for _, l := range lines {
				if strings.HasPrefix(l, "    "+c.ChunkID+" ") && strings.Contains(demoFlat(l), demoFlat(want)) {
					found = true
				}
			}
			if !found {
				t.Errorf("section 1 has no line for %s with %q", c.ChunkID, want)
			}
		}
	}
	if !strings.Contains(sec, "equals the chunk text: true") {
		t.Errorf("section 1 does not show the citation check holding")
	}
}

// TestDemoRetrievals re-runs each retrieval the demo prints and checks the
// printed counters and chunk ids against it, plus the fact the step shows.
func TestDemoRetrievals(t *testing.T) {
	ctx := context.Background()
	st, _, err := demoStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := retrieval.New(st)
	secs := demoSections(t, demoOutput(t))
	noRerank := demoPolicy(false)
	noRerank.EnableRerank = false

	hasDoc := func(res retrieval.Result, docID string) bool {
		return slices.ContainsFunc(res.Chunks, func(s retrieval.Scored) bool { return s.Chunk.DocID == docID })
	}
	tests := []struct {
		name      string
		section   int
		block     int
		principal cordontype.Principal
		query     string
		policy    retrieval.Policy
		check     func(t *testing.T, res retrieval.Result)
	}{
		{
			name: "wholesale asks a retail question", section: 2, block: 0,
			principal: demoWholesaleDesk, query: demoRetailQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				for _, s := range res.Chunks {
					if s.Chunk.Tenant != "wholesale" {
						t.Errorf("got %s from tenant %s", s.Chunk.ChunkID, s.Chunk.Tenant)
					}
				}
			},
		},
		{
			name: "retail asks the retail question", section: 2, block: 1,
			principal: demoRetailAgent, query: demoRetailQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if len(res.Chunks) == 0 || res.Chunks[0].Chunk.Tenant != "retail" {
					t.Errorf("got %v, want retail chunks", demoResultIDs(res))
				}
			},
		},
		{
			name: "clearance too low", section: 3, block: 0,
			principal: demoComplianceAnalyst, query: demoSARQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if res.ExcludedByEntitlement == 0 || hasDoc(res, "co-sar-filing") {
					t.Errorf("got excluded_by_entitlement=%d, ids %v; want > 0 and no co-sar-filing", res.ExcludedByEntitlement, demoResultIDs(res))
				}
			},
		},
		{
			name: "clearance enough", section: 3, block: 1,
			principal: demoComplianceOfficer, query: demoSARQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if !hasDoc(res, "co-sar-filing") {
					t.Errorf("got %v, want co-sar-filing", demoResultIDs(res))
				}
			},
		},
		{
			name: "barrier label missing", section: 4, block: 0,
			principal: demoWholesaleDesk, query: demoFalconQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if res.ExcludedByEntitlement == 0 || hasDoc(res, "wh-falcon-memo") {
					t.Errorf("got excluded_by_entitlement=%d, ids %v; want > 0 and no wh-falcon-memo", res.ExcludedByEntitlement, demoResultIDs(res))
				}
			},
		},
		{
			name: "barrier label held", section: 4, block: 1,
			principal: demoFalconBanker, query: demoFalconQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if !hasDoc(res, "wh-falcon-memo") {
					t.Errorf("got %v, want wh-falcon-memo", demoResultIDs(res))
				}
			},
		},
		{
			name: "no freshness contract", section: 5, block: 0,
			principal: demoWholesaleDesk, query: demoHoldQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				if !hasDoc(res, "wh-pay-hold-2019") {
					t.Errorf("got %v, want the stale wh-pay-hold-2019 to compete", demoResultIDs(res))
				}
			},
		},
		{
			name: "stale document excluded", section: 5, block: 1,
			principal: demoWholesaleDesk, query: demoHoldQuery, policy: demoPolicy(true),
			check: func(t *testing.T, res retrieval.Result) {
				if res.ExcludedByFreshness == 0 || hasDoc(res, "wh-pay-hold-2019") {
					t.Errorf("got excluded_by_freshness=%d, ids %v; want > 0 and no wh-pay-hold-2019", res.ExcludedByFreshness, demoResultIDs(res))
				}
			},
		},
		{
			name: "nothing matches", section: 8, block: 0,
			principal: demoWholesaleDesk, query: demoNothingQuery, policy: demoPolicy(false),
			check: func(t *testing.T, res retrieval.Result) {
				// considered > 0 makes the point: dense collisions existed and
				// the rerank floor removed them.
				if res.Considered == 0 || len(res.Chunks) != 0 {
					t.Errorf("got considered=%d, ids %v; want > 0 and none", res.Considered, demoResultIDs(res))
				}
			},
		},
		{
			name: "rerank shed", section: 9, block: 0,
			principal: demoWholesaleDesk, query: demoNothingQuery, policy: noRerank,
			check: func(t *testing.T, res retrieval.Result) {
				if !slices.Equal(res.Degraded, []string{"rerank"}) || len(res.Chunks) == 0 {
					t.Errorf("got degraded=%v, ids %v; want [rerank] and the collisions returned", res.Degraded, demoResultIDs(res))
				}
			},
		},
		{
			name: "traced retrieval", section: 10, block: 0,
			principal: demoWholesaleDesk, query: demoTraceQuery, policy: demoPolicy(true),
			check: func(t *testing.T, res retrieval.Result) {
				if len(res.Chunks) < 2 {
					t.Errorf("got %v, want at least 2 chunks to ground on and to drop one of", demoResultIDs(res))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Retrieve(ctx, retrieval.Query{Principal: tt.principal, Text: tt.query, NowTick: demoNowTick, Policy: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, res)
			blocks := demoRetrievalBlocks(secs[tt.section])
			if tt.block >= len(blocks) {
				t.Fatalf("section %d prints %d retrievals, want block %d", tt.section, len(blocks), tt.block)
			}
			block := blocks[tt.block]
			if want := fmt.Sprintf("query %q", tt.query); !strings.Contains(block, want) {
				t.Errorf("block does not show %s:\n%s", want, block)
			}
			counters := fmt.Sprintf("considered=%d  excluded_by_entitlement=%d  excluded_by_freshness=%d  degraded=[%s]",
				res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness, strings.Join(res.Degraded, ","))
			if !strings.Contains(block, counters) {
				t.Errorf("got block\n%s\nwant counters %q", block, counters)
			}
			if got, want := demoPrintedIDs(block), demoResultIDs(res); !slices.Equal(got, want) {
				t.Errorf("got printed ids %v, want %v", got, want)
			}
			if len(res.Chunks) == 0 && !strings.Contains(block, "results: none") {
				t.Errorf("empty result not printed as none:\n%s", block)
			}
		})
	}
}

func TestDemoBM25(t *testing.T) {
	sec := demoSections(t, demoOutput(t))[6]
	const n = 12
	tests := []struct {
		name     string
		df       int64
		min, max float64
	}{
		{name: "rare term", df: 1, min: 2.159, max: 2.160},
		{name: "common term", df: 10, min: 0.213, max: 0.214},
		{name: "term in every chunk", df: n, min: 1e-9, max: 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idf := bm25.IDF(n, tt.df)
			if idf < tt.min || idf > tt.max {
				t.Errorf("idf(N=%d, df=%d) = %v, want in [%v, %v]", n, tt.df, idf, tt.min, tt.max)
			}
			if want := fmt.Sprintf("df=%-2d", tt.df); !strings.Contains(sec, want) {
				t.Errorf("section 6 has no %q row", want)
			}
			if want := fmt.Sprintf("idf=%.6f", idf); !strings.Contains(sec, want) {
				t.Errorf("section 6 does not show %s", want)
			}
		})
	}
	idf := bm25.IDF(n, 1)
	p := bm25.Params{K1: bm25.DefaultK1, B: 0}
	score := func(tf int64) float64 { return bm25.Term(idf, tf, 10, 10, p) }
	inc1, inc9 := score(2)-score(1), score(10)-score(9)
	if !(inc9 > 0 && inc9 < inc1) {
		t.Errorf("got increments tf 1->2 %v, 9->10 %v; want 0 < second < first", inc1, inc9)
	}
	for _, want := range []string{fmt.Sprintf("increment %+.6f", inc1), fmt.Sprintf("increment %+.6f", inc9)} {
		if !strings.Contains(sec, want) {
			t.Errorf("section 6 does not show %q", want)
		}
	}
}

func TestDemoRRF(t *testing.T) {
	sec := demoSections(t, demoOutput(t))[7]
	lex, dense := demoRRF[0], demoRRF[1]
	if slices.Index(lex, "steady") != 2 || slices.Index(dense, "steady") != 2 ||
		slices.Index(lex, "spiky") != 0 || slices.Index(dense, "spiky") != 9 {
		t.Fatalf("demo rankings no longer put steady 3rd/3rd and spiky 1st/10th: %v", demoRRF)
	}
	fused := fusion.RRF(demoRRF, fusion.DefaultK)
	if fused[0].ChunkID != "steady" || fused[1].ChunkID != "spiky" {
		t.Fatalf("got fused order %v, want steady then spiky", fused[:2])
	}
	if got, want := fused[0].Score, fusion.Contribution(60, 3)+fusion.Contribution(60, 3); got != want {
		t.Errorf("steady: got %v, want %v", got, want)
	}
	if math.Abs(fused[0].Score-2.0/63) > 1e-15 || math.Abs(fused[1].Score-(1.0/61+1.0/70)) > 1e-15 {
		t.Errorf("got steady %v spiky %v, want 2/63 and 1/61+1/70", fused[0].Score, fused[1].Score)
	}
	for _, want := range []string{"1/63 + 1/63 = 0.031746", "1/61 + 1/70 = 0.030679", "1. steady 0.031746 2. spiky 0.030679"} {
		if !strings.Contains(sec, want) {
			t.Errorf("section 7 does not show %q", want)
		}
	}
}

// TestDemoGroundingAndAssembly redoes sections 10 and 11 from a fresh store.
func TestDemoGroundingAndAssembly(t *testing.T) {
	ctx := context.Background()
	st, _, err := demoStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: demoWholesaleDesk, Text: demoTraceQuery, NowTick: demoNowTick, Policy: demoPolicy(true)})
	if err != nil {
		t.Fatal(err)
	}
	secs := demoSections(t, demoOutput(t))

	t.Run("grounding", func(t *testing.T) {
		rep, err := grounding.Check(grounding.SplitClaims(demoAnswer), demoChunks(res), grounding.DefaultThreshold)
		if err != nil {
			t.Fatal(err)
		}
		var unsupported []string
		for _, cl := range rep.Claims {
			if !cl.Supported {
				unsupported = append(unsupported, cl.Claim)
			}
		}
		if len(unsupported) != 1 {
			t.Fatalf("got unsupported claims %q, want exactly one", unsupported)
		}
		sec := secs[10]
		lines := strings.Split(sec, "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, fmt.Sprintf(": %q", unsupported[0])) })
		if i < 0 || i+1 == len(lines) || !strings.HasSuffix(lines[i+1], "UNSUPPORTED") {
			t.Errorf("section 10 does not mark %q UNSUPPORTED", unsupported[0])
		}
		for _, cl := range rep.Claims {
			if cl.Supported && !strings.Contains(sec, fmt.Sprintf("supported by %s [%d,%d)", cl.Citation.ChunkID, cl.Citation.StartChar, cl.Citation.EndChar)) {
				t.Errorf("section 10 does not cite %s for %q", cl.Citation.ChunkID, cl.Claim)
			}
		}
		if want := fmt.Sprintf("coverage=%.4f  is_grounded=%t", rep.Coverage, rep.IsGrounded); !strings.Contains(sec, want) || rep.IsGrounded {
			t.Errorf("section 10 does not show %q (or the answer is grounded)", want)
		}
	})

	t.Run("assembly", func(t *testing.T) {
		req := assemble.Request{
			Question: demoTraceQuery, Retrieved: demoChunks(res), BudgetTokens: math.MaxInt32,
			Instructions: demoInstructions, ToolSchema: demoToolSchema, Policy: demoContextPolicy,
		}
		full, err := assemble.Context(req)
		if err != nil {
			t.Fatal(err)
		}
		req.BudgetTokens = full.TotalTokens - 1
		got, err := assemble.Context(req)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Dropped) != 1 || len(got.Included)+len(got.Dropped) != len(res.Chunks) || got.TotalTokens > req.BudgetTokens {
			t.Fatalf("got included %v dropped %v total %d for budget %d; want one drop within budget",
				got.Included, got.Dropped, got.TotalTokens, req.BudgetTokens)
		}
		sec := secs[11]
		for _, want := range []string{
			fmt.Sprintf("budget_tokens=%d", req.BudgetTokens),
			fmt.Sprintf("included=[%s]", strings.Join(got.Included, " ")),
			fmt.Sprintf("dropped=[%s]", strings.Join(got.Dropped, " ")),
			fmt.Sprintf("total_tokens=%d  stable_prefix_tokens=%d  cacheable_fraction=%.4f", got.TotalTokens, got.StablePrefixTokens, got.CacheableFraction),
		} {
			if !strings.Contains(sec, want) {
				t.Errorf("section 11 does not show %q", want)
			}
		}
		req.BudgetTokens = demoImpossible
		_, err = assemble.Context(req)
		if err == nil {
			t.Fatalf("budget %d: got no error, want one", demoImpossible)
		}
		if want := demoFlat("error: " + err.Error()); !strings.Contains(demoFlat(sec), want) {
			t.Errorf("section 11 does not show the refusal %q", want)
		}
	})
}
