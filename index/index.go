package index

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
)

// ErrVectorBound is returned by [Prepare] when a chunk's count vector has a
// component beyond MaxCount. Stores keep counts in float32 (pgvector's
// element type), which represents every integer up to 2^24 exactly and no
// longer does beyond it.
var ErrVectorBound = errors.New("vector component beyond the exact float32 range")

// MaxCount is the largest count magnitude a vector component may hold: 2^24,
// the end of float32's exact integers.
const MaxCount = 1 << 24

// Settings are a tenant's index settings: they decide chunk boundaries and
// scores, so a store records them with the tenant and never mixes two.
type Settings struct {
	Dims     int
	BM25     bm25.Params
	Chunking chunk.Options
	// Statistics is the BM25 statistics scope. It changes scores, not what
	// is stored, so a tenant can switch it without re-indexing.
	Statistics bm25.Scope
}

// DefaultSettings returns dims 256, k1 1.5, b 0.75, 200-word windows with 40
// words of overlap, and the entitled statistics scope.
func DefaultSettings() Settings {
	return Settings{Dims: hashembed.DefaultDims, BM25: bm25.DefaultParams(), Chunking: chunk.DefaultOptions(), Statistics: bm25.DefaultScope}
}

// Validate checks every setting.
func (s Settings) Validate() error {
	if err := hashembed.ValidateDims(s.Dims); err != nil {
		return err
	}
	if err := s.BM25.Validate(); err != nil {
		return err
	}
	if _, err := bm25.ParseScope(string(s.Statistics)); err != nil {
		return err
	}
	return s.Chunking.Validate()
}

// PreparedChunk is one chunk ready to store.
type PreparedChunk struct {
	Chunk cordontype.Chunk
	// Terms are the chunk's distinct tokens in first-occurrence order, with
	// their frequencies in TF (same index).
	Terms  []string
	TF     []int32
	Vector []int32
	NormSq int64
}

// Prepare validates doc (normalising its barriers) and chunks, tokenizes and
// hashes it under s. Nothing is stored; an error means the document must be
// refused as a whole.
func Prepare(doc *cordontype.Document, s Settings) ([]PreparedChunk, error) {
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	pieces, err := chunk.Split(doc.Text, s.Chunking)
	if err != nil {
		return nil, err
	}
	out := make([]PreparedChunk, len(pieces))
	buckets := hashembed.NewCache(s.Dims)
	for i, p := range pieces {
		toks := analysis.Tokenize(p.Text)
		pc := PreparedChunk{
			Chunk: cordontype.Chunk{
				ChunkID:        doc.DocID + "::" + strconv.Itoa(i),
				DocID:          doc.DocID,
				Tenant:         doc.Tenant,
				Section:        p.Section,
				Text:           p.Text,
				StartChar:      p.StartChar,
				EndChar:        p.EndChar,
				Length:         p.Length,
				Classification: doc.Classification,
				Barriers:       doc.Barriers,
				AsOfTick:       doc.AsOfTick,
			},
		}
		pos := make(map[string]int, len(toks))
		for _, t := range toks {
			j, ok := pos[t]
			if !ok {
				j = len(pc.Terms)
				pos[t] = j
				pc.Terms = append(pc.Terms, t)
				pc.TF = append(pc.TF, 0)
			}
			pc.TF[j]++
		}
		// hashembed.Vector(toks, s.Dims), each distinct token hashed once
		// per document: integer sums do not depend on their order.
		pc.Vector = make([]int32, s.Dims)
		for j, t := range pc.Terms {
			d, sign := buckets.Bucket(t)
			pc.Vector[d] += sign * pc.TF[j]
		}
		for _, v := range pc.Vector {
			if v > MaxCount || v < -MaxCount {
				return nil, fmt.Errorf("document %q chunk %d: |%d| > 2^24: %w; use more dims or smaller chunks", doc.DocID, i, v, ErrVectorBound)
			}
		}
		pc.NormSq = hashembed.NormSq(pc.Vector)
		out[i] = pc
	}
	return out, nil
}

// Float32s converts a count vector to float32 for pgvector. Exact, because
// [Prepare] bounds every component by 2^24.
func Float32s(v []int32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
