package assemble

import (
	"fmt"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
)

const separator = "\n\n"

// Request is what to assemble. Retrieved is in rank order, best first.
type Request struct {
	Question     string
	Retrieved    []cordontype.Chunk
	BudgetTokens int
	Instructions string
	ToolSchema   string
	Policy       string
}

// Result is the assembled context.
type Result struct {
	Text     string
	Included []string // chunk ids, rank order
	Dropped  []string // chunk ids, best first
	// TotalTokens estimates Text; StablePrefixTokens the stable blocks and the
	// separator after them; CacheableFraction is their ratio.
	TotalTokens        int
	StablePrefixTokens int
	CacheableFraction  float64
}

// Context assembles req. Included and Dropped partition req.Retrieved.
func Context(req Request) (Result, error) {
	if req.BudgetTokens < 1 {
		return Result{}, fmt.Errorf("%w: budget_tokens %d must be >= 1", ErrInvalidBudget, req.BudgetTokens)
	}
	stable := make([]string, 0, 3)
	for _, b := range [...]struct{ name, value string }{
		{"instructions", req.Instructions},
		{"tool_schema", req.ToolSchema},
		{"policy", req.Policy},
	} {
		if b.value != "" {
			stable = append(stable, block(b.name, b.value))
		}
	}
	stablePrefix := ""
	if len(stable) > 0 {
		stablePrefix = strings.Join(stable, separator) + separator
	}
	question := block("question", req.Question)

	n := len(req.Retrieved)
	var text string
	for {
		text = render(stablePrefix, req.Retrieved[:n], question)
		if analysis.EstimateTokens(text) <= req.BudgetTokens {
			break
		}
		if n == 0 {
			return Result{}, fmt.Errorf("%w: the instructions, tool schema, policy and question alone need %d tokens, over the budget of %d; raise budget_tokens or shorten them (the question is never truncated)",
				ErrBudget, analysis.EstimateTokens(text), req.BudgetTokens)
		}
		n--
	}
	res := Result{
		Text:               text,
		Included:           make([]string, 0, n),
		Dropped:            make([]string, 0, len(req.Retrieved)-n),
		TotalTokens:        analysis.EstimateTokens(text),
		StablePrefixTokens: analysis.EstimateTokens(stablePrefix),
	}
	for i, c := range req.Retrieved {
		if i < n {
			res.Included = append(res.Included, c.ChunkID)
		} else {
			res.Dropped = append(res.Dropped, c.ChunkID)
		}
	}
	res.CacheableFraction = float64(res.StablePrefixTokens) / float64(res.TotalTokens)
	return res, nil
}

// SourceName is a chunk block's name: its citation.
func SourceName(c cordontype.Chunk) string {
	return fmt.Sprintf("source %s | %s | %s | %d-%d", c.ChunkID, c.DocID, c.Section, c.StartChar, c.EndChar)
}

func block(name, value string) string { return "[" + name + "]\n" + value }

func render(stablePrefix string, chunks []cordontype.Chunk, question string) string {
	var b strings.Builder
	b.WriteString(stablePrefix)
	for _, c := range chunks {
		b.WriteString(block(SourceName(c), c.Text))
		b.WriteString(separator)
	}
	b.WriteString(question)
	return b.String()
}
