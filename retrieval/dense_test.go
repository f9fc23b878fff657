package retrieval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
)

func TestQueryVectorRefusesOtherModels(t *testing.T) {
	hash := embed.Spec{Model: embed.Hash, Dims: 8}
	toy := embed.Spec{Model: "toy", Dims: 4}
	cases := []struct {
		name  string
		spec  embed.Spec
		dense *retrieval.DenseQuery
		ok    bool
	}{
		{"hash tenant, hash query", hash, nil, true},
		{"hash tenant, model query", hash, &retrieval.DenseQuery{Spec: toy, Vector: make([]int32, 4)}, false},
		{"model tenant, hash query", toy, nil, false},
		{"model tenant, same model", toy, &retrieval.DenseQuery{Spec: toy, Vector: []int32{1, 2, 3, 4}}, true},
		{"model tenant, other dims", toy, &retrieval.DenseQuery{Spec: embed.Spec{Model: "toy", Dims: 5}, Vector: make([]int32, 5)}, false},
		{"model tenant, other model", toy, &retrieval.DenseQuery{Spec: embed.Spec{Model: "other", Dims: 4}, Vector: make([]int32, 4)}, false},
		{"model tenant, short vector", toy, &retrieval.DenseQuery{Spec: toy, Vector: []int32{1}}, false},
	}
	for _, c := range cases {
		req := retrieval.RankRequest{Tokens: []string{"a", "b"}, Dense: c.dense}
		v, err := req.QueryVector(c.spec)
		var mm *retrieval.ModelMismatchError
		switch {
		case c.ok && (err != nil || len(v) != c.spec.Dims):
			t.Errorf("%s: %v, %v", c.name, v, err)
		case !c.ok && (!errors.As(err, &mm) || mm.Want != c.spec):
			t.Errorf("%s: err %v, want a mismatch naming %s", c.name, err, c.spec)
		}
	}
}

// A tenant on a model: the retriever without providers says which model
// it needs; with them, the query is embedded once per query, with the
// tenant's model learned from the store's refusal the first time.
func TestRetrieverEmbedsQueriesWithTheTenantModel(t *testing.T) {
	ctx := context.Background()
	toy := &embedtest.Toy{Dims: 16}
	reg := embedtest.Registry("toy-16", toy)
	s := index.DefaultSettings()
	s.Model, s.Dims = "toy-16", 16
	st, err := memory.NewWithModels(s, reg)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"the quick brown fox jumps", "a slow green turtle walks", "brown bread and butter"} {
		doc := cordontype.Document{Tenant: "w", DocID: string(rune('a' + i)), Text: text}
		if _, err := st.Put(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "w"}, Text: "brown fox", Policy: retrieval.DefaultPolicy()}
	if _, err := retrieval.New(st).Retrieve(ctx, q); !errors.Is(err, embed.ErrUnknownModel) {
		t.Fatalf("without providers: %v, want ErrUnknownModel", err)
	}
	models := retrieval.NewQueryModels(reg)
	before := toy.Texts.Load()
	res, err := retrieval.New(st).WithModels(models).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) == 0 || res.Chunks[0].Cosine == nil {
		t.Fatalf("no dense hit: %+v", res)
	}
	if got := toy.Texts.Load() - before; got != 1 {
		t.Fatalf("first query embedded %d texts, want 1", got)
	}
	before = toy.Texts.Load()
	if _, err := retrieval.New(st).WithModels(models).Retrieve(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got := toy.Texts.Load() - before; got != 1 {
		t.Fatalf("second query embedded %d texts, want 1 (the model is remembered)", got)
	}
	toy.Fail.Store(true)
	if _, err := retrieval.New(st).WithModels(models).Retrieve(ctx, q); !errors.Is(err, embed.ErrProvider) {
		t.Fatalf("failing provider: %v, want ErrProvider", err)
	}
}
