package eval

import (
	"context"
	"fmt"

	"github.com/cordon-rag/cordon/chunk"
)

// Variant is one chunking of the bake-off.
type Variant struct {
	Name     string        `json:"name"`
	Strategy Strategy      `json:"strategy"`
	Chunking chunk.Options `json:"-"`
}

// BakeOffSizes are the window sizes of the default bake-off, in words: a
// quarter, half and all of SPEC's default 200.
var BakeOffSizes = []int{50, 100, 200}

// DefaultVariants returns, for each size in [BakeOffSizes]: fixed windows
// ignoring structure without overlap, structure-aware windows without
// overlap, and structure-aware windows overlapping by a fifth of the window
// (SPEC's default ratio, 40 of 200).
func DefaultVariants() []Variant {
	var out []Variant
	for _, n := range BakeOffSizes {
		ov := n / 5
		out = append(out,
			Variant{Name: fmt.Sprintf("fixed %d/0", n), Strategy: Flat, Chunking: chunk.Options{MaxWords: n}},
			Variant{Name: fmt.Sprintf("structure %d/0", n), Strategy: Structured, Chunking: chunk.Options{MaxWords: n}},
			Variant{Name: fmt.Sprintf("structure %d/%d", n, ov), Strategy: Structured, Chunking: chunk.Options{MaxWords: n, OverlapWords: ov}},
		)
	}
	return out
}

// VariantReport is one variant's evaluation.
type VariantReport struct {
	Variant Variant `json:"variant"`
	Report  Report  `json:"report"`
}

// BakeOff evaluates the same documents and queries under each variant's
// chunking; everything else comes from base (settings other than chunking,
// held-out sections, policy, workers). progress, when set, is told which
// variant is running.
func BakeOff(ctx context.Context, docs []Document, queries []Query, variants []Variant, base Options, progress func(i int, v Variant)) ([]VariantReport, error) {
	out := make([]VariantReport, 0, len(variants))
	for i, v := range variants {
		if err := v.Chunking.Validate(); err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		if progress != nil {
			progress(i, v)
		}
		opts := base
		opts.Strategy = v.Strategy
		opts.Settings.Chunking = v.Chunking
		opts.PerQuery = false
		rep, err := Run(ctx, docs, queries, opts)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		out = append(out, VariantReport{Variant: v, Report: rep})
	}
	return out, nil
}
