package embed

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// benchAnswer is an Ollama answer of 32 vectors of 512 components, as a
// sentence encoder's batch.
func benchAnswer(b *testing.B) []byte {
	r := rand.New(rand.NewPCG(5, 6))
	vs := make([][]float32, 32)
	for i := range vs {
		vs[i] = make([]float32, 512)
		for j := range vs[i] {
			vs[i][j] = float32(r.NormFloat64() * 0.05)
		}
	}
	data, err := json.Marshal(map[string]any{"model": "use-lite", "embeddings": vs})
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkDecodeOllama(b *testing.B) {
	data := benchAnswer(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeOllama(data, 32); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeOllamaLenient is encoding/json alone on the same answer,
// for comparison.
func BenchmarkDecodeOllamaLenient(b *testing.B) {
	data := benchAnswer(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var r struct {
			Embeddings [][]float32 `json:"embeddings"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			b.Fatal(err)
		}
	}
}
