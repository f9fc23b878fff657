package embedtest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/cordon-rag/cordon/embed"
)

// Handler serves e as model over the OpenAI-compatible embeddings API
// (POST /v1/embeddings), each request delayed by delay: a provider for
// processes that configure one with --embed-url.
func Handler(model string, e embed.Embedder, delay time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		if req.Model != model {
			http.Error(w, `{"error":{"message":"model not found"}}`, http.StatusNotFound)
			return
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		vs, err := e.Embed(r.Context(), req.Input, embed.Document)
		if err != nil {
			http.Error(w, `{"error":{"message":"embedding failed"}}`, http.StatusInternalServerError)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Data  []item `json:"data"`
			Model string `json:"model"`
		}{Model: model}
		for i, v := range vs {
			out.Data = append(out.Data, item{Index: i, Embedding: v})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}
