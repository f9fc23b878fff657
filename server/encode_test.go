package server

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
)

// encodeStd is the body encoding/json writes for v.
func encodeStd(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := json.NewEncoder(&buf).Encode(v)
	return buf.Bytes(), err
}

// checkSameJSON fails unless r's appendJSON writes exactly encoding/json's
// bytes, or both refuse it.
func checkSameJSON(t *testing.T, r *RetrieveResponse) {
	t.Helper()
	want, wantErr := encodeStd(r)
	got, err := r.appendJSON(nil)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("appendJSON error %v, encoding/json error %v", err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("appendJSON wrote\n%s\nencoding/json\n%s", got, want)
	}
}

// Strings that exercise every escape: HTML characters, control bytes, the
// JSONP separators, invalid UTF-8, multi-byte runes.
var trickyStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"line\u2028para\u2029end", "bad \xff utf8 \xc3", "truncated \xe2\x82", "émoji 😀 ∑", "\U0010FFFF", "\ufffd",
}

var trickyFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, -1e21, 123456789.125,
	math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1 + 0.2, 1.0 / 3, 2.5e-300,
}

func TestRetrieveResponseJSON(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	v64 := int64(7)
	tests := []struct {
		name string
		r    RetrieveResponse
	}{
		{name: "nil slices", r: RetrieveResponse{}},
		{name: "empty slices", r: RetrieveResponse{Results: []ResultJSON{}, Degraded: []string{}, Expansion: []string{}}},
		{name: "auditor fields", r: RetrieveResponse{Results: []ResultJSON{}, Degraded: []string{"rerank", "dense"}, NowTick: -5,
			Considered: i(3), ExcludedByEntitlement: i(0), ExcludedByFreshness: i(-1), IndexVersion: &v64, Expansion: []string{"a", "<b>"}}},
		{name: "a result with every field", r: RetrieveResponse{Results: []ResultJSON{{ChunkID: "c1", Digest: "d", DocID: "doc", Section: "s",
			Text: "t", StartChar: 1, EndChar: 9, BM25: f(1.5), BM25Rank: i(1), Cosine: f(-0.25), CosineRank: i(2), Fused: 0.032, Rerank: f(1e-9)}}}},
		{name: "a result without text or scores", r: RetrieveResponse{Results: []ResultJSON{{ChunkID: "c1"}, {DocID: "d"}}, Degraded: []string{}}},
		{name: "NaN", r: RetrieveResponse{Results: []ResultJSON{{BM25: f(math.NaN())}}}},
		{name: "infinity", r: RetrieveResponse{Results: []ResultJSON{{Fused: math.Inf(-1)}}}},
	}
	for _, s := range trickyStrings {
		tests = append(tests, struct {
			name string
			r    RetrieveResponse
		}{name: "string " + s, r: RetrieveResponse{Results: []ResultJSON{{ChunkID: s, Digest: s, DocID: s, Section: s, Text: s}}, Degraded: []string{s}, Expansion: []string{s}}})
	}
	for _, x := range trickyFloats {
		for _, x := range []float64{x, -x} {
			tests = append(tests, struct {
				name string
				r    RetrieveResponse
			}{name: "float", r: RetrieveResponse{Results: []ResultJSON{{BM25: f(x), Cosine: f(x), Fused: x, Rerank: f(x)}}}})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkSameJSON(t, &tt.r) })
	}
}

// Random responses, seeded: strings of random bytes and runes, floats of
// random bits, optional fields present or not.
func TestRetrieveResponseJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 24))
	str := func() string {
		var b []byte
		for range rng.IntN(12) {
			switch rng.IntN(4) {
			case 0:
				b = append(b, byte(rng.IntN(256)))
			case 1:
				b = append(b, trickyStrings[rng.IntN(len(trickyStrings))]...)
			default:
				b = append(b, string(rune(rng.IntN(0x3000)))...)
			}
		}
		return string(b)
	}
	float := func() float64 {
		if rng.IntN(3) == 0 {
			return trickyFloats[rng.IntN(len(trickyFloats))]
		}
		return math.Float64frombits(rng.Uint64())
	}
	fptr := func() *float64 {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := float()
		return &v
	}
	iptr := func() *int {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := rng.IntN(1<<20) - 1<<19
		return &v
	}
	strs := func() []string {
		if rng.IntN(4) == 0 {
			return nil
		}
		s := make([]string, rng.IntN(3))
		for i := range s {
			s[i] = str()
		}
		return s
	}
	for n := 0; n < 3000; n++ {
		r := RetrieveResponse{NowTick: rng.Int64() - 1<<62, Degraded: strs(), Expansion: strs(),
			Considered: iptr(), ExcludedByEntitlement: iptr(), ExcludedByFreshness: iptr()}
		if rng.IntN(2) == 0 {
			v := rng.Int64()
			r.IndexVersion = &v
		}
		if rng.IntN(8) > 0 {
			r.Results = make([]ResultJSON, rng.IntN(4))
		}
		for i := range r.Results {
			r.Results[i] = ResultJSON{ChunkID: str(), Digest: str(), DocID: str(), Section: str(), Text: str(),
				StartChar: rng.IntN(1 << 20), EndChar: rng.IntN(1 << 20), BM25: fptr(), BM25Rank: iptr(),
				Cosine: fptr(), CosineRank: iptr(), Fused: float(), Rerank: fptr()}
		}
		checkSameJSON(t, &r)
	}
}

func FuzzRetrieveResponseJSON(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s, s, 0.5, int64(1))
	}
	f.Add("a", "b", 1e-7, int64(-3))
	f.Fuzz(func(t *testing.T, text, section string, score float64, tick int64) {
		r := RetrieveResponse{Results: []ResultJSON{{ChunkID: section, Text: text, Section: section, Fused: score, BM25: &score}},
			Degraded: []string{text}, NowTick: tick, Expansion: []string{section}}
		checkSameJSON(t, &r)
	})
}

// A response that cannot be encoded answers 500 with the internal error,
// whichever encoder refused it.
func TestWriteJSONUnsupportedFloat(t *testing.T) {
	for _, v := range []any{&RetrieveResponse{Results: []ResultJSON{{Fused: math.NaN()}}}, map[string]float64{"x": math.Inf(1)}} {
		w := httptest.NewRecorder()
		writeJSON(w, 200, v)
		if w.Code != errInternal.Status {
			t.Errorf("%T: status %d, want %d", v, w.Code, errInternal.Status)
		}
		want, _ := encodeStd(errorBody{errInternal})
		if !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("%T: body %s, want %s", v, w.Body.Bytes(), want)
		}
	}
}
