package embed_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
)

func TestCacheRemembersAndPersists(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "toy-8.vec")
	toy := &embedtest.Toy{Dims: 8}
	c, err := embed.NewCache(toy, 8, path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Embed(ctx, []string{"alpha beta", "gamma"}, embed.Document)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Embed(ctx, []string{"gamma", "alpha beta", "delta"}, embed.Document)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again[0], first[1]) || !slices.Equal(again[1], first[0]) {
		t.Fatal("cached vectors differ from the first answers")
	}
	if toy.Texts.Load() != 3 || c.Hits != 2 || c.Misses != 3 {
		t.Fatalf("embedded %d texts, hits %d misses %d; want 3, 2, 3", toy.Texts.Load(), c.Hits, c.Misses)
	}
	// The query kind is cached apart.
	if _, err := c.Embed(ctx, []string{"gamma"}, embed.Query); err != nil || toy.Texts.Load() != 4 {
		t.Fatalf("query kind: %v, %d texts", err, toy.Texts.Load())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A record cut off (a crash mid-write) is dropped on load.
	fi, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0, 1, 2})
	f.Close()
	toy2 := &embedtest.Toy{Dims: 8}
	c2, err := embed.NewCache(toy2, 8, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if fi2, _ := os.Stat(path); fi2.Size() != fi.Size() {
		t.Fatalf("torn record kept: %d bytes, want %d", fi2.Size(), fi.Size())
	}
	got, err := c2.Embed(ctx, []string{"alpha beta", "delta"}, embed.Document)
	if err != nil || toy2.Texts.Load() != 0 || !slices.Equal(got[0], first[0]) {
		t.Fatalf("reloaded cache: %v, embedded %d texts", err, toy2.Texts.Load())
	}
	// A file of other dimensions is refused.
	if _, err := embed.NewCache(toy2, 7, path); err == nil {
		t.Fatal("a 7-dimension cache opened an 8-dimension file")
	}
}

// A server answering other dimensions than configured is ErrDims (and
// ErrProvider): a configuration error, not a transient one.
func TestHTTPWrongDimsIsErrDims(t *testing.T) {
	srv := httptest.NewServer(embedtest.Handler("toy", &embedtest.Toy{Dims: 8}, 0))
	defer srv.Close()
	h, err := embed.NewHTTP(embed.HTTPConfig{API: embed.APIOpenAI, URL: srv.URL, Model: "toy", Dims: 4, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Embed(context.Background(), []string{"a b"}, embed.Query)
	if !errors.Is(err, embed.ErrDims) || !errors.Is(err, embed.ErrProvider) || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("wrong dims: %v, want ErrDims without retries", err)
	}
}
