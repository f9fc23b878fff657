package server

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

func TestCheckDigests(t *testing.T) {
	a := cordontype.Chunk{ChunkID: "a::0", DocID: "a", Text: "alpha"}
	b := cordontype.Chunk{ChunkID: "b::0", DocID: "b", Text: "beta"}
	ids := []string{"a::0", "b::0"}
	tests := []struct {
		name    string
		digests []string
		errPart string // "" means accepted
	}{
		{"absent", nil, ""},
		{"one per id", []string{a.Digest(), b.Digest()}, ""},
		{"stale but well-formed", []string{b.Digest(), a.Digest()}, ""},
		{"too few", []string{a.Digest()}, "1 digests for 2 chunk_ids"},
		{"empty list", []string{}, "0 digests for 2 chunk_ids"},
		{"too many", []string{a.Digest(), b.Digest(), a.Digest()}, "3 digests for 2 chunk_ids"},
		{"malformed", []string{a.Digest(), "sha256:00"}, "digests[1]"},
		{"empty string", []string{"", b.Digest()}, "digests[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDigests(ids, tt.digests)
			if tt.errPart == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			ae, ok := err.(*apiError)
			if !ok || ae.Status != http.StatusBadRequest || ae.Code != "bad_request" || !strings.Contains(ae.Message, tt.errPart) {
				t.Fatalf("got %v, want a 400 bad_request mentioning %q", err, tt.errPart)
			}
		})
	}
}

func TestChangedChunks(t *testing.T) {
	v1 := []cordontype.Chunk{
		{ChunkID: "d::0", DocID: "d", Section: "S", Text: "one two", StartChar: 0, EndChar: 7},
		{ChunkID: "d::1", DocID: "d", Section: "S", Text: "three four", StartChar: 8, EndChar: 18},
		{ChunkID: "e::0", DocID: "e", Section: "", Text: "five", StartChar: 0, EndChar: 4},
	}
	digests := make([]string, len(v1))
	for i := range v1 {
		digests[i] = v1[i].Digest()
	}
	edit := func(f func(cs []cordontype.Chunk)) []cordontype.Chunk {
		cs := slices.Clone(v1)
		f(cs)
		return cs
	}
	tests := []struct {
		name    string
		chunks  []cordontype.Chunk
		digests []string
		want    []string
	}{
		{"no digests", edit(func(cs []cordontype.Chunk) { cs[0].Text = "changed" }), nil, nil},
		{"unchanged", v1, digests, nil},
		{"text changed", edit(func(cs []cordontype.Chunk) { cs[1].Text = "three five" }), digests, []string{"d::1"}},
		{"span moved", edit(func(cs []cordontype.Chunk) { cs[1].StartChar, cs[1].EndChar = 9, 19 }), digests, []string{"d::1"}},
		{"two changed, in order", edit(func(cs []cordontype.Chunk) { cs[2].Text, cs[0].Section = "six", "T" }), digests, []string{"d::0", "e::0"}},
		{"reclassified only", edit(func(cs []cordontype.Chunk) { cs[0].Classification = cordontype.Restricted }), digests, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changedChunks(tt.chunks, tt.digests); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestErrChunkChangedBody checks the 409's wire form, and that the other
// error bodies (not found above all) keep their exact bytes.
func TestErrChunkChangedBody(t *testing.T) {
	e := errChunkChanged([]string{"d::1", "e::0"})
	if e.Status != http.StatusConflict || e.Code != "chunk_changed" || !strings.Contains(e.Message, "d::1, e::0") {
		t.Fatalf("got %+v", e)
	}
	data, _ := json.Marshal(e)
	if want := `"chunk_ids":["d::1","e::0"]`; !strings.Contains(string(data), want) {
		t.Fatalf("body %s lacks %s", data, want)
	}
	data, _ = json.Marshal(errNotFound)
	if want := `{"code":"not_found","message":"not found"}`; string(data) != want {
		t.Fatalf("not found body %s, want %s", data, want)
	}
}

// TestBatchEmptyBody: a documents:batch body with no document (empty, or
// only blank lines) is a 400, not an empty success.
func TestBatchEmptyBody(t *testing.T) {
	srv := newTestServer(t)
	writer := testToken(t, RoleWriter)
	for _, tt := range []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"blank lines", "\n  \n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/tenants/wholesale/documents:batch", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+writer)
			req.Header.Set("Content-Type", "application/x-ndjson")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"bad_request"`) {
				t.Fatalf("got %d %s, want 400 bad_request", rec.Code, rec.Body.String())
			}
		})
	}
}

// writeJSON sends the whole encoded body with its Content-Length (no
// chunked framing), the same bytes encoding/json's Encoder writes; a value
// that cannot be encoded answers 500 with an error body, never a 200 with
// half a body. Buffers reused between responses leave nothing behind.
func TestWriteJSON(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		v          any
		wantStatus int
		wantBody   string
	}{
		{"object", http.StatusOK, map[string]any{"a": "<b>", "n": 1.5}, http.StatusOK, `{"a":"\u003cb\u003e","n":1.5}` + "\n"},
		{"large", http.StatusCreated, map[string]string{"text": strings.Repeat("x", 70000)}, http.StatusCreated, `{"text":"` + strings.Repeat("x", 70000) + `"}` + "\n"},
		{"small after large", http.StatusOK, []int{1}, http.StatusOK, "[1]\n"},
		{"cannot encode", http.StatusOK, map[string]float64{"score": math.NaN()}, http.StatusInternalServerError,
			`{"error":{"code":"internal","message":"internal error"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, tt.status, tt.v)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Fatalf("body %.200q, want %.200q", got, tt.wantBody)
			}
			if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(tt.wantBody)); got != want {
				t.Errorf("Content-Length %q, want %q", got, want)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
		})
	}
}
