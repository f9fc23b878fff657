package integration_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/localmodel/localmodeltest"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/rerank"
)

// The local sentence encoder served over each provider API Cordon speaks:
// the three embedding APIs give the same quantized vectors, and the two
// rerank APIs score like the cosine of those vectors.
func TestLocalModelProviders(t *testing.T) {
	srv := localmodeltest.Require(t)
	ctx := context.Background()
	texts := []string{"report file system disk space usage", "compress or expand files", "show free disk space", "terminate a running process"}
	var first [][]int32
	for _, api := range []string{embed.APIOpenAI, embed.APIOllama, embed.APITEI} {
		h, err := embed.NewHTTP(embed.HTTPConfig{API: api, URL: srv.URL(), Model: srv.ModelName(), Dims: 512, Batch: 3})
		if err != nil {
			t.Fatal(err)
		}
		var reg embed.Registry
		if err := reg.Register(srv.ModelName(), h); err != nil {
			t.Fatal(err)
		}
		vs, err := reg.Vectors(ctx, embed.Spec{Model: srv.ModelName(), Dims: 512}, texts, embed.Document)
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if first == nil {
			first = vs
			continue
		}
		for i := range vs {
			if !slices.Equal(vs[i], first[i]) {
				t.Fatalf("%s: text %d quantizes differently from the openai API's", api, i)
			}
		}
	}
	cos := func(a, b []int32) float64 {
		return hashembed.Cosine(hashembed.Dot(a, b), hashembed.NormSq(a), hashembed.NormSq(b))
	}
	// The query about free disk space is nearer df's line than gzip's.
	if cos(first[2], first[0]) <= cos(first[2], first[1]) {
		t.Fatalf("cosine(query, df) %v <= cosine(query, gzip) %v", cos(first[2], first[0]), cos(first[2], first[1]))
	}
	for _, api := range []rerank.API{rerank.TEI, rerank.Cohere} {
		c, err := rerank.New(rerank.Config{URL: srv.URL(), API: api, Model: srv.ModelName()})
		if err != nil {
			t.Fatal(err)
		}
		scores, err := c.Score(ctx, texts[2], []string{texts[0], texts[1], texts[3]})
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if len(scores) != 3 || !(scores[0] > scores[1]) || !(scores[0] > scores[2]) {
			t.Fatalf("%s: scores %v, want df's line first", api, scores)
		}
		for i, j := range []int{0, 1, 3} {
			// The stand-in scores the float cosine; the quantized one is
			// within quantization error of it.
			if d := math.Abs(scores[i] - cos(first[2], first[j])); d > 0.01 {
				t.Fatalf("%s: score %d = %v, quantized cosine %v", api, i, scores[i], cos(first[2], first[j]))
			}
		}
	}
}

// TestDifferentialLocalModelScripts is the differential test with the real
// local sentence encoder: randomized replay scripts whose tenants embed
// with it give the same bytes on the reference store and on Postgres.
func TestDifferentialLocalModelScripts(t *testing.T) {
	srv := localmodeltest.Require(t)
	h, err := embed.NewHTTP(embed.HTTPConfig{API: embed.APIOpenAI, URL: srv.URL(), Model: srv.ModelName(), Dims: 512, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	c, err := embed.NewCache(h, 512, "")
	if err != nil {
		t.Fatal(err)
	}
	var reg embed.Registry
	if err := reg.Register(srv.ModelName(), c); err != nil {
		t.Fatal(err)
	}
	runModelScripts(t, &reg, srv.ModelName(), 512, 6)
	if c.Misses == 0 {
		t.Fatal("the model embedded nothing")
	}
}
