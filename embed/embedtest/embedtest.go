// Package embedtest has a deterministic embedding model for tests: vectors
// that depend on a text's words (so related texts are near) and are the same
// bits on every architecture, with no provider to run.
package embedtest

import (
	"context"
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/crypto/blake2b"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/embed"
)

// Toy embeds a text as the sum of one fixed pseudo-random float vector per
// token (seeded by the token's BLAKE2b digest), in float64 with every
// operation explicit, converted to float32 at the end. A text without tokens
// embeds as a small constant vector (never the zero vector, which real
// models do not return either).
type Toy struct {
	Dims int
	// Calls counts Embed calls; Texts counts the texts embedded.
	Calls, Texts atomic.Int64
	// Fail, when set, makes Embed fail.
	Fail atomic.Bool
}

// Embed implements embed.Embedder.
func (t *Toy) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.Fail.Load() {
		return nil, embed.ErrProvider
	}
	t.Calls.Add(1)
	t.Texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i, text := range texts {
		acc := make([]float64, t.Dims)
		toks := analysis.Tokenize(text)
		for _, tok := range toks {
			addToken(acc, tok)
		}
		v := make([]float32, t.Dims)
		for j, x := range acc {
			if len(toks) == 0 {
				x = float64(0.001) * float64(j%3+1)
			}
			v[j] = float32(x)
		}
		out[i] = v
	}
	return out, nil
}

// addToken adds tok's vector: components in [-1, 1) from its digest,
// stretched over the dimensions.
func addToken(acc []float64, tok string) {
	h, _ := blake2b.New512(nil)
	h.Write([]byte(tok))
	d := h.Sum(nil)
	for j := range acc {
		k := (j * 2) % (len(d) - 1)
		u := binary.BigEndian.Uint16(d[k:]) ^ uint16(j*40503)
		acc[j] += float64(int32(u)-32768) / float64(32768)
	}
}

// Registry returns a registry serving t as model name.
func Registry(name string, t *Toy) *embed.Registry {
	var r embed.Registry
	if err := r.Register(name, t); err != nil {
		panic(err)
	}
	return &r
}
