package embed

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// The fuzz targets check that the strict decoders never panic, that what
// they accept is exactly n non-empty finite vectors, and that those are the
// numbers encoding/json reads from the same text (which parses float32
// components the same way, but is lenient where these are strict).

func checkDecoded(t *testing.T, got [][]float32, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("accepted %d vectors for %d texts", len(got), n)
	}
	for i, v := range got {
		if len(v) == 0 {
			t.Fatalf("vector %d is empty", i)
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("vector %d component %d is %v", i, j, x)
			}
		}
	}
}

func FuzzDecodeOpenAI(f *testing.F) {
	f.Add([]byte(`{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5,-1]},{"index":0,"embedding":[1e-3,2]}],"model":"m","usage":{"prompt_tokens":2}}`), uint8(2))
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1,null]}]}`), uint8(1))
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1e39]}],"data":[]}`), uint8(1))
	f.Add([]byte(`{"Data":[{"INDEX":0,"embedding":"AAAA"}]}`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		got, err := decodeOpenAI(data, int(n))
		if err != nil {
			return
		}
		checkDecoded(t, got, int(n))
		var lenient struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &lenient); err != nil {
			t.Fatalf("strict decoding accepted what encoding/json refuses: %v", err)
		}
		for _, d := range lenient.Data {
			if !reflect.DeepEqual(got[d.Index], d.Embedding) {
				t.Fatalf("index %d: strict %v, encoding/json %v", d.Index, got[d.Index], d.Embedding)
			}
		}
	})
}

func FuzzDecodeOllama(f *testing.F) {
	f.Add([]byte(`{"model":"m","embeddings":[[0.25,-1e-3],[3.4028234e38,-0]],"total_duration":5}`), uint8(2))
	f.Add([]byte(`{"embeddings":[[1,2],[]]}`), uint8(2))
	f.Add([]byte(`{"embeddings":[[1,2]]} {}`), uint8(1))
	f.Add([]byte(`{"embeddings":[[ 1 , 2 ]],"Embeddings":null}`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		got, err := decodeOllama(data, int(n))
		if err != nil {
			return
		}
		checkDecoded(t, got, int(n))
		var lenient struct {
			Embeddings [][]float32 `json:"embeddings"`
		}
		if err := json.Unmarshal(data, &lenient); err != nil {
			t.Fatalf("strict decoding accepted what encoding/json refuses: %v", err)
		}
		if len(got) > 0 && !reflect.DeepEqual(got, lenient.Embeddings) {
			t.Fatalf("strict %v, encoding/json %v", got, lenient.Embeddings)
		}
	})
}

func FuzzDecodeTEI(f *testing.F) {
	f.Add([]byte("[[1.5,2],\n[3,4]]"), uint8(2))
	f.Add([]byte(`[[1,true]]`), uint8(1))
	f.Add([]byte(`null`), uint8(0))
	f.Add([]byte(`[[1E+2,-0.0e-0]]`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		got, err := decodeTEI(data, int(n))
		if err != nil {
			return
		}
		checkDecoded(t, got, int(n))
		var lenient [][]float32
		if err := json.Unmarshal(data, &lenient); err != nil {
			t.Fatalf("strict decoding accepted what encoding/json refuses: %v", err)
		}
		if len(got) > 0 && !reflect.DeepEqual(got, lenient) {
			t.Fatalf("strict %v, encoding/json %v", got, lenient)
		}
	})
}
