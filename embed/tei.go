package embed

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
)

// teiAPI is text-embeddings-inference's own API, POST /embed. The server
// truncates texts longer than the model's context instead of refusing them.
var teiAPI = wireAPI{
	name: APITEI,
	path: "/embed",
	request: func(h *HTTP, texts []string) any {
		return teiRequest{Inputs: texts, Truncate: true}
	},
	decode: decodeTEI,
}

type teiRequest struct {
	Inputs   []string `json:"inputs"`
	Truncate bool     `json:"truncate"`
}

// decodeTEI decodes [[...], ...], one vector per text in input order. An
// answer with no objects has no keys to check; encoding/json checks the
// syntax, the trailing data and (up to 10,000 levels, without recursion)
// the depth.
func decodeTEI(data []byte, n int) ([][]float32, error) {
	if !jsonstrict.ValidUTF8(data) {
		return nil, errors.New("the answer is not valid UTF-8")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, jsonstrict.CleanError(err, data, false)
	}
	if raws == nil {
		return nil, errors.New("the answer is null, not a list of embeddings")
	}
	return parseVectors(raws, n, func(i int) string { return fmt.Sprintf("[%d]", i) })
}
