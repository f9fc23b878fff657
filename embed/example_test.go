package embed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/cordon-rag/cordon/embed"
)

// An Ollama server (here a stand-in) serves a model; the registry embeds
// and quantizes with it.
func ExampleNewHTTP() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"model":"use-lite","embeddings":[[0.5,-0.25,0.1],[0.25,0.5,-1]]}`)
	}))
	defer srv.Close()

	p, err := embed.NewHTTP(embed.HTTPConfig{API: embed.APIOllama, URL: srv.URL, Model: "use-lite", Dims: 3, Retries: embed.DefaultRetries})
	if err != nil {
		panic(err)
	}
	var reg embed.Registry
	if err := reg.Register("use-lite", p); err != nil {
		panic(err)
	}
	vs, err := reg.Vectors(context.Background(), p.Spec(), []string{"first text", "second text"}, embed.Document)
	if err != nil {
		panic(err)
	}
	fmt.Println(vs)
	// Output: [[127 -64 25] [32 64 -127]]
}
