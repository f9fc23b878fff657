package retrieval

import (
	"fmt"

	"github.com/cordon-rag/cordon/fusion"
)

// Policy defaults from SPEC section 5.
const (
	DefaultMinScore    = 0.2 // rerank relevance floor: share of query terms a chunk must hold
	DefaultTopN        = 50  // per-ranking candidates kept after the pre-filter
	DefaultRerankDepth = 20  // fused chunks the reranker looks at; the rest are dropped
	DefaultLimit       = 5   // chunks returned
	DegradedRerank     = "rerank"
)

// Policy tunes one retrieval.
type Policy struct {
	// MaxStaleTicks, when set, removes visible chunks whose document is older
	// than now_tick - MaxStaleTicks.
	MaxStaleTicks *int64
	EnableRerank  bool
	MinScore      float64
	TopN          int
	RerankDepth   int
	RRFK          int64
	Limit         int
}

// DefaultPolicy returns SPEC section 5's defaults: rerank on, min_score 0.2,
// top_n 50, rerank_depth 20, rrf_k 60, limit 5, no freshness contract.
func DefaultPolicy() Policy {
	return Policy{
		EnableRerank: true,
		MinScore:     DefaultMinScore,
		TopN:         DefaultTopN,
		RerankDepth:  DefaultRerankDepth,
		RRFK:         fusion.DefaultK,
		Limit:        DefaultLimit,
	}
}

// Validate checks every field's range.
func (p Policy) Validate() error {
	switch {
	case p.Limit < 1:
		return fmt.Errorf("%w: limit %d must be >= 1", ErrInvalidPolicy, p.Limit)
	case p.TopN < 1:
		return fmt.Errorf("%w: top_n %d must be >= 1", ErrInvalidPolicy, p.TopN)
	case p.RerankDepth < 1:
		return fmt.Errorf("%w: rerank_depth %d must be >= 1", ErrInvalidPolicy, p.RerankDepth)
	case p.RRFK < 1:
		return fmt.Errorf("%w: rrf_k %d must be >= 1", ErrInvalidPolicy, p.RRFK)
	case !(p.MinScore >= 0 && p.MinScore <= 1):
		return fmt.Errorf("%w: min_score %v must be in [0, 1]", ErrInvalidPolicy, p.MinScore)
	case p.MaxStaleTicks != nil && *p.MaxStaleTicks < 0:
		return fmt.Errorf("%w: max_stale_ticks %d must be >= 0", ErrInvalidPolicy, *p.MaxStaleTicks)
	}
	return nil
}
