package embed

import (
	"encoding/json"
	"fmt"
)

// ollamaAPI is Ollama's own embeddings API, POST /api/embed.
var ollamaAPI = wireAPI{
	name: APIOllama,
	path: "/api/embed",
	request: func(h *HTTP, texts []string) any {
		return ollamaRequest{Model: h.model, Input: texts}
	},
	decode: decodeOllama,
}

type ollamaRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type ollamaResponse struct {
	Embeddings []json.RawMessage `json:"embeddings"`
}

// decodeOllama decodes {"embeddings": [[...], ...]}, one vector per text in
// input order.
func decodeOllama(data []byte, n int) ([][]float32, error) {
	var r ollamaResponse
	if err := decodeObject(data, &r, "embeddings"); err != nil {
		return nil, err
	}
	return parseVectors(r.Embeddings, n, func(i int) string { return fmt.Sprintf("embeddings[%d]", i) })
}
