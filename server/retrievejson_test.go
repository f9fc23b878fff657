package server

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// encodingJSON is the body encoding/json writes for v, as writeJSON wrote
// every body before retrieves were encoded by hand.
func encodingJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileStrings are texts that exercise every escaping rule of
// encoding/json: quotes and backslashes, every control byte, HTML-special
// bytes, DEL, U+2028/U+2029, invalid and truncated UTF-8, surrogate halves
// encoded in UTF-8, the replacement character itself, and non-ASCII text.
var hostileStrings = func() []string {
	out := []string{"", `"`, `\`, `\"`, "<script>alert(1)</script>", "a&b", "x\u007fy", "\u2028", "\u2029", "a\u2028b\u2029c",
		"\xff", "\xc3", "ab\xe2\x82", "\xed\xa0\x80", "\xef\xbf\xbd", "\U0001F600 émoji ß 日本", "tx4096 PMT-771",
		"line\nbreak\r\ttab\b\f", "\x00nul", strings.Repeat("long text ", 200)}
	var all strings.Builder
	for b := range 0x80 {
		all.WriteByte(byte(b))
	}
	return append(out, all.String())
}()

// randomString mixes hostile pieces, random bytes and random runes.
func randomString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(8) {
		switch r.IntN(4) {
		case 0:
			b.WriteString(hostileStrings[r.IntN(len(hostileStrings))])
		case 1:
			b.WriteByte(byte(r.IntN(256)))
		case 2:
			b.WriteRune(rune(r.IntN(0x110000)))
		default:
			b.WriteString("netting exposure ")
		}
	}
	return b.String()
}

func randomFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return r.Float64() * 1e-7 // the 'e' format, small
	case 3:
		return (r.Float64() + 1) * 1e21 // the 'e' format, large
	case 4:
		return -r.Float64() * 100
	case 5:
		return math.Float64frombits(r.Uint64()) // anything finite or not
	case 6:
		return float64(r.IntN(1000))
	default:
		return r.Float64()
	}
}

func randomResponse(r *rand.Rand) RetrieveResponse {
	floatPtr := func() *float64 {
		if r.IntN(3) == 0 {
			return nil
		}
		f := randomFloat(r)
		return &f
	}
	intPtr := func() *int {
		if r.IntN(3) == 0 {
			return nil
		}
		n := r.IntN(2000) - 1000
		return &n
	}
	strs := func() []string {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		s := make([]string, 1+r.IntN(3))
		for i := range s {
			s[i] = randomString(r)
		}
		return s
	}
	var out RetrieveResponse
	if r.IntN(10) > 0 {
		out.Results = make([]ResultJSON, r.IntN(12))
	}
	for i := range out.Results {
		c := &out.Results[i]
		c.ChunkID, c.DocID, c.Section = randomString(r), randomString(r), randomString(r)
		if r.IntN(2) == 0 {
			c.Digest, c.Text = randomString(r), randomString(r)
		}
		c.StartChar, c.EndChar = r.IntN(1<<20)-5, r.Int()
		c.BM25, c.BM25Rank, c.Cosine, c.CosineRank = floatPtr(), intPtr(), floatPtr(), intPtr()
		c.Fused, c.Rerank, c.DocRank = randomFloat(r), floatPtr(), intPtr()
	}
	out.Degraded, out.Expansion = strs(), strs()
	out.NowTick = r.Int64() - r.Int64()
	out.Considered, out.ExcludedByEntitlement, out.ExcludedByFreshness = intPtr(), intPtr(), intPtr()
	if r.IntN(2) == 0 {
		v := r.Int64()
		out.IndexVersion = &v
	}
	return out
}

// checkRetrieveJSON holds the hand encoder to encoding/json for out: the
// same bytes, or, for a value encoding/json refuses, no bytes (writeJSON
// then answers 500 through encoding/json, as before).
func checkRetrieveJSON(t *testing.T, out RetrieveResponse) {
	t.Helper()
	var want bytes.Buffer
	werr := json.NewEncoder(&want).Encode(out)
	got, ok := out.appendJSON(nil)
	switch {
	case werr != nil && ok:
		t.Fatalf("encoding/json refuses %+v (%v), the hand encoder wrote %s", out, werr, got)
	case werr == nil && !ok:
		t.Fatalf("the hand encoder refused what encoding/json writes as %s", want.Bytes())
	case werr == nil && !bytes.Equal(got, want.Bytes()):
		t.Fatalf("hand encoder:\n%s\nencoding/json:\n%s", got, want.Bytes())
	}
}

// TestRetrieveResponseJSONMatchesEncodingJSON: on randomized responses
// (hostile strings, every float format, nil and empty lists, optional
// fields) the hand encoder writes exactly encoding/json's bytes.
func TestRetrieveResponseJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 1))
	refused := 0
	for range 20000 {
		out := randomResponse(r)
		if _, ok := out.appendJSON(nil); !ok {
			refused++
		}
		checkRetrieveJSON(t, out)
	}
	// Each hostile string, alone, in every string field.
	for _, s := range hostileStrings {
		f := 0.5
		checkRetrieveJSON(t, RetrieveResponse{Results: []ResultJSON{{ChunkID: s, Digest: s, DocID: s, Section: s, Text: s, Fused: f, BM25: &f}},
			Degraded: []string{s}, Expansion: []string{s}})
	}
	// Every byte and every rune class on its own.
	for b := range 256 {
		checkRetrieveJSON(t, RetrieveResponse{Results: []ResultJSON{{Text: string([]byte{'a', byte(b), 'z'})}}})
	}
	for c := rune(0); c < 0x110000; c += 97 {
		checkRetrieveJSON(t, RetrieveResponse{Results: []ResultJSON{{Text: string(c)}}})
	}
	if refused == 0 {
		t.Fatal("no response with a NaN or infinite score was tried")
	}
}

// FuzzRetrieveResponseJSON: for any texts and scores, the hand encoder
// writes encoding/json's bytes.
func FuzzRetrieveResponseJSON(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s, s, 0.5, int64(3))
	}
	f.Fuzz(func(t *testing.T, text, section string, score float64, tick int64) {
		rank := int(tick % 100)
		checkRetrieveJSON(t, RetrieveResponse{Results: []ResultJSON{{ChunkID: section, DocID: text, Section: section, Text: text,
			BM25: &score, BM25Rank: &rank, Fused: score}}, Degraded: []string{text}, NowTick: tick, Expansion: []string{section}})
	})
}

// TestWriteJSONRetrieveBody: writeJSON sends a retrieve's hand-encoded body
// with the same headers and bytes as encoding/json's, and a response
// encoding/json refuses answers 500 as before.
func TestWriteJSONRetrieveBody(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		out := randomResponse(r)
		got := httptest.NewRecorder()
		writeJSON(got, http.StatusOK, &out)
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusOK, struct{ RetrieveResponse }{out}) // not a jsonAppender: encoding/json
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("got %d %s, want %d %s", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
		}
		for _, k := range []string{"Content-Type", "Content-Length", "X-Content-Type-Options", "Cache-Control"} {
			if got.Header().Get(k) != want.Header().Get(k) {
				t.Fatalf("%s: got %q, want %q", k, got.Header().Get(k), want.Header().Get(k))
			}
		}
	}
	nan := math.NaN()
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusOK, &RetrieveResponse{Results: []ResultJSON{{BM25: &nan}}})
	if w.Code != http.StatusInternalServerError || !bytes.Equal(w.Body.Bytes(), encodingJSON(t, errorBody{errInternal})) {
		t.Fatalf("a NaN score: got %d %s, want 500 internal", w.Code, w.Body.String())
	}
}

// BenchmarkRetrieveResponseJSON encodes a retrieve's answer of ten 1 KB
// chunks by hand and with encoding/json (what writeJSON did before):
//
//	go test ./server/ -run '^$' -bench RetrieveResponseJSON -benchmem
func BenchmarkRetrieveResponseJSON(b *testing.B) {
	out := RetrieveResponse{Results: make([]ResultJSON, 10), NowTick: 1000}
	for i := range out.Results {
		bm25, cos, rerank := 20-float64(i)/3, 0.2+float64(i)/100, 0.9/float64(i+1)
		rank := i + 1
		out.Results[i] = ResultJSON{ChunkID: "settlement/netting-" + strings.Repeat("x", i) + "::3", Digest: strings.Repeat("ab", 32),
			DocID: "settlement/netting", Section: "Settlement > Netting", Text: strings.Repeat("Netting exposure of tx4096 under the margin agreement. ", 19),
			StartChar: 100 * i, EndChar: 100*i + 1045, BM25: &bm25, BM25Rank: &rank, Cosine: &cos, CosineRank: &rank, Fused: 1 / float64(61+i), Rerank: &rerank}
	}
	var buf bytes.Buffer
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			p, _ := out.appendJSON(buf.AvailableBuffer())
			buf.Write(p)
		}
		b.SetBytes(int64(buf.Len()))
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			_ = json.NewEncoder(&buf).Encode(out)
		}
		b.SetBytes(int64(buf.Len()))
	})
}
