package assemble

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/cordontype"
)

func ck(id, doc, section string, start, end int, text string) cordontype.Chunk {
	return cordontype.Chunk{ChunkID: id, DocID: doc, Section: section, StartChar: start, EndChar: end, Text: text}
}

// estimate is SPEC section 7's ceil(code points / 4), written out.
func estimate(s string) int {
	n := utf8.RuneCountInString(s)
	return n/4 + min(n%4, 1)
}

func TestContextRender(t *testing.T) {
	retrieved := []cordontype.Chunk{
		ck("pay-001::0", "pay-001", "Holds", 0, 24, "PMT-771 is on hold."),
		ck("pay-001::1", "pay-001", "Release", 30, 61, "Release needs two approvals."),
	}
	tests := []struct {
		name       string
		req        Request
		wantText   string
		wantStable string // the rendered stable blocks with the separator after them
	}{
		{
			"all blocks",
			Request{Question: "Why is PMT-771 held?", Retrieved: retrieved, BudgetTokens: 1000, Instructions: "Answer from sources.", ToolSchema: "{}", Policy: "Cite spans."},
			"[instructions]\nAnswer from sources.\n\n[tool_schema]\n{}\n\n[policy]\nCite spans.\n\n" +
				"[source pay-001::0 | pay-001 | Holds | 0-24]\nPMT-771 is on hold.\n\n" +
				"[source pay-001::1 | pay-001 | Release | 30-61]\nRelease needs two approvals.\n\n" +
				"[question]\nWhy is PMT-771 held?",
			"[instructions]\nAnswer from sources.\n\n[tool_schema]\n{}\n\n[policy]\nCite spans.\n\n",
		},
		{
			"empty blocks left out",
			Request{Question: "Q", Retrieved: retrieved[:1], BudgetTokens: 1000, Policy: "P"},
			"[policy]\nP\n\n[source pay-001::0 | pay-001 | Holds | 0-24]\nPMT-771 is on hold.\n\n[question]\nQ",
			"[policy]\nP\n\n",
		},
		{
			"no stable blocks",
			Request{Question: "Q", Retrieved: retrieved[:1], BudgetTokens: 1000},
			"[source pay-001::0 | pay-001 | Holds | 0-24]\nPMT-771 is on hold.\n\n[question]\nQ",
			"",
		},
		{
			"question always rendered, even empty",
			Request{Question: "", BudgetTokens: 1000, Instructions: "I"},
			"[instructions]\nI\n\n[question]\n",
			"[instructions]\nI\n\n",
		},
		{
			"nothing retrieved",
			Request{Question: "Q", BudgetTokens: 1000, ToolSchema: "T"},
			"[tool_schema]\nT\n\n[question]\nQ",
			"[tool_schema]\nT\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Context(tt.req)
			if err != nil {
				t.Fatalf("Context: %v", err)
			}
			if res.Text != tt.wantText {
				t.Errorf("text = %q, want %q", res.Text, tt.wantText)
			}
			if want := estimate(tt.wantText); res.TotalTokens != want {
				t.Errorf("total_tokens = %d, want %d", res.TotalTokens, want)
			}
			if want := estimate(tt.wantStable); res.StablePrefixTokens != want {
				t.Errorf("stable_prefix_tokens = %d, want %d", res.StablePrefixTokens, want)
			}
			num, den := float64(res.StablePrefixTokens), float64(res.TotalTokens)
			if res.CacheableFraction != num/den {
				t.Errorf("cacheable_fraction = %v, want %v", res.CacheableFraction, num/den)
			}
			if len(res.Dropped) != 0 || len(res.Included) != len(tt.req.Retrieved) {
				t.Errorf("included %q dropped %q, want all included", res.Included, res.Dropped)
			}
		})
	}
}

// TestStablePrefixTokens pins the computation with hand-counted examples.
func TestStablePrefixTokens(t *testing.T) {
	tests := []struct {
		name                    string
		instructions, tool, pol string
		want                    int
	}{
		{"none", "", "", "", 0},
		// "[instructions]\nabc\n\n" is 15 + 3 + 2 = 20 code points: 5 tokens.
		{"instructions abc", "abc", "", "", 5},
		// "[instructions]\nabcd\n\n" is 21 code points: 6 tokens.
		{"one more code point rounds up", "abcd", "", "", 6},
		// "[policy]\nP\n\n" is 9 + 1 + 2 = 12: 3 tokens.
		{"policy only", "", "", "P", 3},
		// 15+1+2 + 14+1+2 + 9+1+2 = 47 code points: 12 tokens.
		{"all three, one char each", "I", "T", "P", 12},
		// Code points, not bytes: "éééé" is 4 code points, 8 bytes.
		{"non-ASCII counted in code points", "éééé", "", "", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Context(Request{Question: "Q", BudgetTokens: 1000, Instructions: tt.instructions, ToolSchema: tt.tool, Policy: tt.pol})
			if err != nil {
				t.Fatalf("Context: %v", err)
			}
			if res.StablePrefixTokens != tt.want {
				t.Errorf("stable_prefix_tokens = %d, want %d", res.StablePrefixTokens, tt.want)
			}
		})
	}
}

func manyChunks(n int) []cordontype.Chunk {
	out := make([]cordontype.Chunk, n)
	for i := range out {
		text := strings.Repeat(fmt.Sprintf("word%d ", i), 1+i%5)
		out[i] = ck(fmt.Sprintf("doc-%d::%d", i/3, i%3), fmt.Sprintf("doc-%d", i/3), "body", i*10, i*10+len(text), strings.TrimSpace(text))
	}
	return out
}

// TestBudgetProperty is invariant 10 and 11 over many budgets: the context is
// never over budget, included and dropped partition the input (included a
// prefix, dropped the rest best-first), the included prefix is the longest
// that fits, and an impossible budget is refused with ErrBudget.
func TestBudgetProperty(t *testing.T) {
	retrieved := manyChunks(12)
	ids := make([]string, len(retrieved))
	for i, c := range retrieved {
		ids[i] = c.ChunkID
	}
	base := Request{Question: "Why is the payment on hold?", Retrieved: retrieved, Instructions: "Answer only from the sources.", Policy: "Cite every claim."}
	fixed := estimate("[instructions]\nAnswer only from the sources.\n\n[policy]\nCite every claim.\n\n[question]\nWhy is the payment on hold?")
	sawDrop, sawAll, sawRefuse := false, false, false
	for budget := 1; budget <= 400; budget++ {
		req := base
		req.BudgetTokens = budget
		res, err := Context(req)
		if budget < fixed {
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("budget %d below the fixed %d: got %v, want ErrBudget", budget, fixed, err)
			}
			if !strings.Contains(err.Error(), " "+strconv.Itoa(fixed)+" tokens") {
				t.Fatalf("budget %d: error %q does not say the fixed blocks need %d tokens", budget, err, fixed)
			}
			sawRefuse = true
			continue
		}
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		if res.TotalTokens > budget {
			t.Fatalf("budget %d: total_tokens %d, want <= budget", budget, res.TotalTokens)
		}
		if got := estimate(res.Text); got != res.TotalTokens {
			t.Fatalf("budget %d: total_tokens %d, want estimate(text) = %d", budget, res.TotalTokens, got)
		}
		n := len(res.Included)
		if !slices.Equal(res.Included, ids[:n]) || !slices.Equal(res.Dropped, ids[n:]) {
			t.Fatalf("budget %d: included %q dropped %q, want a prefix and the rest of %q", budget, res.Included, res.Dropped, ids)
		}
		if n < len(retrieved) {
			sawDrop = true
			// One more chunk would not have fitted.
			more := req
			more.Retrieved = retrieved[:n+1]
			if r2, err := Context(more); err != nil || len(r2.Dropped) != 1 {
				t.Fatalf("budget %d: %d chunks included, but %d also fit (dropped %q, err %v)", budget, n, n+1, r2.Dropped, err)
			}
		} else {
			sawAll = true
		}
		if !strings.HasSuffix(res.Text, "[question]\nWhy is the payment on hold?") {
			t.Fatalf("budget %d: text does not end with the whole question block: %q", budget, res.Text)
		}
	}
	if !sawDrop || !sawAll || !sawRefuse {
		t.Errorf("budgets 1..400 covered drop %v, all %v, refuse %v; want all three", sawDrop, sawAll, sawRefuse)
	}
}

func TestDroppedBestFirst(t *testing.T) {
	retrieved := []cordontype.Chunk{
		ck("r1", "d", "s", 0, 4, "aaaa"),
		ck("r2", "d", "s", 0, 4, strings.Repeat("b", 400)),
		ck("r3", "d", "s", 0, 4, "cccc"),
		ck("r4", "d", "s", 0, 4, "dddd"),
	}
	// Fixed: "[question]\nQ" = 12 code points. r1's block is
	// "[source r1 | d | s | 0-4]\naaaa\n\n" = 25 + 1 + 4 + 2 = 32 code points.
	res, err := Context(Request{Question: "Q", Retrieved: retrieved, BudgetTokens: 11})
	if err != nil {
		t.Fatalf("Context: %v", err)
	}
	if !slices.Equal(res.Included, []string{"r1"}) || !slices.Equal(res.Dropped, []string{"r2", "r3", "r4"}) {
		t.Errorf("included %q dropped %q, want [r1] and [r2 r3 r4]: dropping stops at the first fit, lowest rank first", res.Included, res.Dropped)
	}
	if res.TotalTokens != 11 {
		t.Errorf("total_tokens = %d, want 11 (44 code points)", res.TotalTokens)
	}
}

func TestContextErrors(t *testing.T) {
	tests := []struct {
		name    string
		req     Request
		wantErr error
		wantMsg string
	}{
		{"budget 0", Request{Question: "Q", BudgetTokens: 0}, ErrInvalidBudget, ""},
		{"negative budget", Request{Question: "Q", BudgetTokens: -5}, ErrInvalidBudget, ""},
		// "[question]\n" + 30 code points = 41: 11 tokens; 15 + 100 + 2 + 12 = 129: 33.
		{"question alone too long", Request{Question: strings.Repeat("q", 30), BudgetTokens: 10}, ErrBudget, "need 11 tokens"},
		{"fixed blocks too long, chunks irrelevant", Request{Question: "Q", Instructions: strings.Repeat("i", 100), BudgetTokens: 20, Retrieved: manyChunks(3)}, ErrBudget, "need 33 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Context(tt.req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q, want it to say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestSourceName(t *testing.T) {
	c := ck("a/b.c::12", "a/b.c", "Section with | bar", 5, 99, "x")
	if got, want := SourceName(c), "source a/b.c::12 | a/b.c | Section with | bar | 5-99"; got != want {
		t.Errorf("SourceName = %q, want %q", got, want)
	}
}
