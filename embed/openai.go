package embed

import (
	"encoding/json"
	"fmt"
)

// openAIAPI is the OpenAI embeddings API, POST /v1/embeddings, as served
// by OpenAI, Ollama, text-embeddings-inference and vLLM.
var openAIAPI = wireAPI{
	name: APIOpenAI,
	path: "/v1/embeddings",
	request: func(h *HTTP, texts []string) any {
		r := openAIRequest{Model: h.model, Input: texts, EncodingFormat: "float"}
		if h.requestDims {
			r.Dimensions = h.dims
		}
		return r
	},
	decode: decodeOpenAI,
}

type openAIRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
	// EncodingFormat "float" asks for lists of numbers (not base64).
	EncodingFormat string `json:"encoding_format"`
	Dimensions     int    `json:"dimensions,omitempty"`
}

type openAIResponse struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// decodeOpenAI decodes {"data": [{"index": i, "embedding": [...]}, ...]}
// and orders the vectors by index: every index of 0..n-1 exactly once.
func decodeOpenAI(data []byte, n int) ([][]float32, error) {
	var r openAIResponse
	if err := decodeObject(data, &r, "data", "index", "embedding"); err != nil {
		return nil, err
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("%d embeddings for %d texts", len(r.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range r.Data {
		switch {
		case d.Index == nil:
			return nil, fmt.Errorf("data[%d] has no index", i)
		case *d.Index < 0 || *d.Index >= n:
			return nil, fmt.Errorf("data[%d] has index %d, outside 0..%d", i, *d.Index, n-1)
		case out[*d.Index] != nil:
			return nil, fmt.Errorf("data[%d] repeats index %d", i, *d.Index)
		}
		v, err := parseVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("data[%d].embedding: %w", i, err)
		}
		out[*d.Index] = v
	}
	return out, nil
}
