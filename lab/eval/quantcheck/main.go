// Command quantcheck measures what int8 quantization (embed.Quantize) does
// to a model's dense rankings: for every query it ranks every chunk by the
// float cosine of the model's vectors and by Cordon's exact cosine of the
// quantized ones, and reports how far the two agree.
//
//	cordon-lab eval export --corpus /tmp/cordon-man --queries testdata/eval/man-every4-queries.jsonl --chunks /tmp/chunks.jsonl
//	go run ./lab/eval/quantcheck --chunks /tmp/chunks.jsonl --queries testdata/eval/man-every4-queries.jsonl \
//	    --embed-api tei --embed-url http://127.0.0.1:18081 --embed-model use-lite --embed-dims 512 --embed-cache /tmp/embcache/use-lite-512.vec
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
)

func main() {
	chunksPath := flag.String("chunks", "", "chunks JSON Lines from 'cordon-lab eval export' (required)")
	queriesPath := flag.String("queries", "", "query file, JSON Lines (required)")
	api := flag.String("embed-api", embed.APIOpenAI, "openai, ollama or tei")
	url := flag.String("embed-url", "", "embedding server (required)")
	model := flag.String("embed-model", "", "model name (required)")
	dims := flag.Int("embed-dims", 0, "vector length (required)")
	cachePath := flag.String("embed-cache", "", "embedding cache file (embed.Cache), shared with cordon-lab eval --embed-cache")
	k := flag.Int("k", 10, "top-k lists compared")
	flag.Parse()
	if *chunksPath == "" || *queriesPath == "" || *url == "" || *model == "" || *dims < 1 {
		fmt.Fprintln(os.Stderr, "quantcheck: --chunks, --queries, --embed-url, --embed-model and --embed-dims are required")
		os.Exit(2)
	}
	if err := run(*chunksPath, *queriesPath, *api, *url, *model, *dims, *cachePath, *k); err != nil {
		fmt.Fprintln(os.Stderr, "quantcheck:", err)
		os.Exit(1)
	}
}

func readTexts(path, field string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if s, ok := m[field].(string); ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func run(chunksPath, queriesPath, api, url, model string, dims int, cachePath string, k int) error {
	ctx := context.Background()
	chunks, err := readTexts(chunksPath, "text")
	if err != nil {
		return err
	}
	queries, err := readTexts(queriesPath, "query")
	if err != nil {
		return err
	}
	h, err := embed.NewHTTP(embed.HTTPConfig{API: api, URL: url, Model: model, Dims: dims, Batch: 64, Retries: embed.DefaultRetries})
	if err != nil {
		return err
	}
	var e embed.Embedder = h
	if cachePath != "" {
		c, err := embed.NewCache(h, dims, cachePath)
		if err != nil {
			return err
		}
		defer c.Close()
		e = c
	}
	cf, err := e.Embed(ctx, chunks, embed.Document)
	if err != nil {
		return err
	}
	qf, err := e.Embed(ctx, queries, embed.Query)
	if err != nil {
		return err
	}
	quant := func(vs [][]float32) ([][]int32, error) {
		out := make([][]int32, len(vs))
		for i, v := range vs {
			if out[i], err = embed.Quantize(v); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	cq, err := quant(cf)
	if err != nil {
		return err
	}
	qq, err := quant(qf)
	if err != nil {
		return err
	}
	cNorm := make([]float64, len(cf))
	cNormSq := make([]int64, len(cq))
	for i := range cf {
		cNorm[i] = norm(cf[i])
		cNormSq[i] = hashembed.NormSq(cq[i])
	}
	var maxDiff, sumDiff, sumOverlap float64
	identical, pairs := 0, 0
	for i := range qf {
		qn, qnsq := norm(qf[i]), hashembed.NormSq(qq[i])
		fs := make([]float64, len(cf))
		is := make([]float64, len(cf))
		for j := range cf {
			var dot float64
			for d := range qf[i] {
				dot += float64(qf[i][d]) * float64(cf[j][d])
			}
			fs[j] = dot / (qn * cNorm[j])
			is[j] = hashembed.Cosine(hashembed.Dot(qq[i], cq[j]), qnsq, cNormSq[j])
			d := math.Abs(fs[j] - is[j])
			maxDiff = max(maxDiff, d)
			sumDiff += d
			pairs++
		}
		a, b := top(fs, k), top(is, k)
		n := 0
		for _, x := range a {
			if slices.Contains(b, x) {
				n++
			}
		}
		sumOverlap += float64(n) / float64(k)
		if slices.Equal(a, b) {
			identical++
		}
	}
	fmt.Printf("model %s/%d: %d queries x %d chunks\n", model, dims, len(qf), len(cf))
	fmt.Printf("|cosine(int8) - cosine(float)|: mean %.5f, max %.5f\n", sumDiff/float64(pairs), maxDiff)
	fmt.Printf("top-%d lists: mean overlap %.4f, identical (same order) %d of %d (%.1f%%)\n", k, sumOverlap/float64(len(qf)), identical, len(qf), 100*float64(identical)/float64(len(qf)))
	return nil
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// top is the indexes of the k highest scores, ties by index.
func top(s []float64, k int) []int {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] > s[idx[b]] })
	return idx[:min(k, len(idx))]
}
