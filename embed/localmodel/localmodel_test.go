package localmodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/embed/localmodel"
	"github.com/cordon-rag/cordon/embed/localmodel/localmodeltest"
)

// manNames are man-page NAME lines; du is a near miss for disk-space queries.
var manNames = []string{
	"ls - list directory contents",
	"cp - copy files and directories",
	"kill - send a signal to a process",
	"grep - print lines that match patterns",
	"df - report file system space usage",
	"ps - report a snapshot of the current processes",
	"chage - change user password expiry information",
	"du - estimate file space usage",
	"mountpoint - see if a directory or file is a mountpoint",
}

const dfIndex = 4

// post sends body (marshalled unless it is already []byte) as JSON and
// returns the status and the response body.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatalf("marshal request: %v", err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s response: %v", url, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST %s: Content-Type %q, want application/json", url, ct)
	}
	return resp.StatusCode, out
}

// decodeStrict decodes raw into v, failing on fields v does not have.
func decodeStrict(t testing.TB, raw []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", clip(raw), err)
	}
}

func clip(raw []byte) string {
	if len(raw) > 300 {
		return string(raw[:300]) + "..."
	}
	return string(raw)
}

type openaiResponse struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embedOpenAI embeds texts through /v1/embeddings and checks the response
// shape.
func embedOpenAI(t testing.TB, srv *localmodel.Server, texts ...string) [][]float32 {
	t.Helper()
	status, raw := post(t, srv.URL()+"/v1/embeddings", map[string]any{"model": srv.ModelName(), "input": texts})
	if status != http.StatusOK {
		t.Fatalf("/v1/embeddings: status %d, want 200: %s", status, clip(raw))
	}
	var r openaiResponse
	decodeStrict(t, raw, &r)
	if r.Object != "list" || r.Model != srv.ModelName() || len(r.Data) != len(texts) {
		t.Fatalf("/v1/embeddings: object %q, model %q, %d vectors; want list, %q, %d", r.Object, r.Model, len(r.Data), srv.ModelName(), len(texts))
	}
	if r.Usage.PromptTokens < len(texts) || r.Usage.TotalTokens != r.Usage.PromptTokens {
		t.Errorf("/v1/embeddings: usage %+v, want prompt_tokens >= %d and total_tokens equal to it", r.Usage, len(texts))
	}
	out := make([][]float32, len(texts))
	for i, d := range r.Data {
		if d.Object != "embedding" || d.Index != i {
			t.Fatalf("/v1/embeddings: data[%d] object %q index %d, want embedding %d", i, d.Object, d.Index, i)
		}
		checkVector(t, d.Embedding)
		out[i] = d.Embedding
	}
	return out
}

// checkVector checks a raw model vector: 512 finite floats of about unit
// length (USE lite's output is close to, not exactly, L2-normalized).
func checkVector(t testing.TB, v []float32) {
	t.Helper()
	if len(v) != localmodel.Dims {
		t.Fatalf("vector has %d dims, want %d", len(v), localmodel.Dims)
	}
	var sum float64
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("vector[%d] = %v", i, x)
		}
		sum += float64(x) * float64(x)
	}
	if n := math.Sqrt(sum); math.Abs(n-1) > 1e-3 {
		t.Errorf("vector norm %v, want about 1", n)
	}
}

// cosine is the formula server.mjs uses: sums in float64, in index order.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestHealth(t *testing.T) {
	srv := localmodeltest.Require(t)
	resp, err := http.Get(srv.URL() + "/health")
	if err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Model  string `json:"model"`
		Dims   int    `json:"dims"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("decode /health: %v", err)
	}
	if resp.StatusCode != http.StatusOK || h.Status != "ok" || h.Model != localmodel.DefaultModelName || h.Dims != localmodel.Dims {
		t.Errorf("/health: status %d %+v, want 200 ok %s %d", resp.StatusCode, h, localmodel.DefaultModelName, localmodel.Dims)
	}
}

// TestEndpointsAgree embeds the same texts through every embedding endpoint:
// OpenAI, Ollama and TEI (normalize false) return the same float32 bits, and
// TEI's default normalize:true returns exactly v / |v| rounded to float32.
func TestEndpointsAgree(t *testing.T) {
	srv := localmodeltest.Require(t)
	texts := []string{"show free disk space", "kill - send a signal to a process"}
	want := embedOpenAI(t, srv, texts...)

	single := embedOpenAI(t, srv, texts[0]) // "input" as one string
	if !sameBits(single[0], want[0]) {
		t.Errorf("/v1/embeddings with a string input differs from the same text in a list")
	}

	status, raw := post(t, srv.URL()+"/api/embed", map[string]any{"model": srv.ModelName(), "input": texts})
	if status != http.StatusOK {
		t.Fatalf("/api/embed: status %d: %s", status, clip(raw))
	}
	var ollama struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		TotalDuration   int64       `json:"total_duration"`
		LoadDuration    int64       `json:"load_duration"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}
	decodeStrict(t, raw, &ollama)
	if ollama.Model != srv.ModelName() || len(ollama.Embeddings) != len(texts) || ollama.PromptEvalCount < len(texts) {
		t.Fatalf("/api/embed: model %q, %d vectors, prompt_eval_count %d", ollama.Model, len(ollama.Embeddings), ollama.PromptEvalCount)
	}

	status, raw = post(t, srv.URL()+"/embed", map[string]any{"inputs": texts, "normalize": false})
	if status != http.StatusOK {
		t.Fatalf("/embed: status %d: %s", status, clip(raw))
	}
	var tei [][]float32
	decodeStrict(t, raw, &tei)

	status, raw = post(t, srv.URL()+"/embed", map[string]any{"inputs": texts[1]})
	if status != http.StatusOK {
		t.Fatalf("/embed (normalize default): status %d: %s", status, clip(raw))
	}
	var teiNorm [][]float32
	decodeStrict(t, raw, &teiNorm)

	if len(tei) != len(texts) || len(teiNorm) != 1 {
		t.Fatalf("/embed: %d and %d vectors, want %d and 1", len(tei), len(teiNorm), len(texts))
	}
	for i := range texts {
		checkVector(t, ollama.Embeddings[i])
		checkVector(t, tei[i])
		if !sameBits(ollama.Embeddings[i], want[i]) {
			t.Errorf("text %d: /api/embed vector differs from /v1/embeddings", i)
		}
		if !sameBits(tei[i], want[i]) {
			t.Errorf("text %d: /embed normalize:false vector differs from /v1/embeddings", i)
		}
	}
	var sum float64
	for _, x := range want[1] {
		sum += float64(x) * float64(x)
	}
	norm := math.Sqrt(sum)
	for i, x := range want[1] {
		if got, w := teiNorm[0][i], float32(float64(x)/norm); math.Float32bits(got) != math.Float32bits(w) {
			t.Fatalf("/embed normalize:true [%d] = %v, want %v (v/|v|)", i, got, w)
		}
	}
}

// TestNearestNameLine checks that the model knows what texts mean: each query
// is nearest to the man-page NAME line that answers it.
func TestNearestNameLine(t *testing.T) {
	srv := localmodeltest.Require(t)
	tests := []struct {
		name  string
		query string
		want  int
	}{
		{name: "df", query: "show free disk space", want: dfIndex},
		{name: "grep", query: "search text for a pattern", want: 3},
	}
	docs := embedOpenAI(t, srv, manNames...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := embedOpenAI(t, srv, tt.query)[0]
			best, bestScore := -1, math.Inf(-1)
			for i, d := range docs {
				if s := cosine(q, d); s > bestScore {
					best, bestScore = i, s
				}
			}
			if best != tt.want {
				t.Errorf("nearest to %q: %q (%.4f), want %q (%.4f)", tt.query, manNames[best], bestScore, manNames[tt.want], cosine(q, docs[tt.want]))
			}
		})
	}
}

// TestRerank checks both rerank endpoints: sorted by score, the df line
// first, scores equal to the cosine of the embeddings, top_n and the
// returned texts.
func TestRerank(t *testing.T) {
	srv := localmodeltest.Require(t)
	const query = "show free disk space"
	vecs := embedOpenAI(t, srv, append([]string{query}, manNames...)...)
	wantScore := func(i int) float64 { return cosine(vecs[0], vecs[1+i]) }

	t.Run("tei", func(t *testing.T) {
		status, raw := post(t, srv.URL()+"/rerank", map[string]any{"query": query, "texts": manNames, "return_text": true, "raw_scores": true})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, clip(raw))
		}
		var got []struct {
			Index int     `json:"index"`
			Text  string  `json:"text"`
			Score float64 `json:"score"`
		}
		decodeStrict(t, raw, &got)
		if len(got) != len(manNames) {
			t.Fatalf("%d results, want %d", len(got), len(manNames))
		}
		if got[0].Index != dfIndex {
			t.Errorf("first result %q, want %q", manNames[got[0].Index], manNames[dfIndex])
		}
		seen := map[int]bool{}
		for i, r := range got {
			if r.Index < 0 || r.Index >= len(manNames) || seen[r.Index] {
				t.Fatalf("result %d: index %d out of range or repeated", i, r.Index)
			}
			seen[r.Index] = true
			if r.Text != manNames[r.Index] {
				t.Errorf("result %d: text %q, want %q", i, r.Text, manNames[r.Index])
			}
			if math.Abs(r.Score-wantScore(r.Index)) > 1e-12 {
				t.Errorf("result %d: score %v, want cosine %v", i, r.Score, wantScore(r.Index))
			}
			if i > 0 && r.Score > got[i-1].Score {
				t.Errorf("results not sorted: %v after %v", r.Score, got[i-1].Score)
			}
		}
	})

	t.Run("cohere", func(t *testing.T) {
		status, raw := post(t, srv.URL()+"/v2/rerank", map[string]any{"model": srv.ModelName(), "query": query, "documents": manNames, "top_n": 3, "return_documents": true})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, clip(raw))
		}
		var got struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Results []struct {
				Index          int     `json:"index"`
				RelevanceScore float64 `json:"relevance_score"`
				Document       struct {
					Text string `json:"text"`
				} `json:"document"`
			} `json:"results"`
			Usage struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
			Meta struct {
				APIVersion struct {
					Version string `json:"version"`
				} `json:"api_version"`
				BilledUnits struct {
					SearchUnits int `json:"search_units"`
				} `json:"billed_units"`
			} `json:"meta"`
		}
		decodeStrict(t, raw, &got)
		if got.ID == "" || got.Model != srv.ModelName() || got.Usage.TotalTokens <= len(manNames) || got.Meta.APIVersion.Version != "2" || got.Meta.BilledUnits.SearchUnits != 1 {
			t.Errorf("envelope: %s", clip(raw))
		}
		// top_n 3: the three best of all scores, in order.
		order := make([]int, len(manNames))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return wantScore(order[a]) > wantScore(order[b]) })
		if len(got.Results) != 3 {
			t.Fatalf("%d results, want top_n 3", len(got.Results))
		}
		for i, r := range got.Results {
			if r.Index != order[i] {
				t.Errorf("result %d: %q, want %q", i, manNames[r.Index], manNames[order[i]])
			}
			if math.Abs(r.RelevanceScore-wantScore(r.Index)) > 1e-12 {
				t.Errorf("result %d: relevance_score %v, want cosine %v", i, r.RelevanceScore, wantScore(r.Index))
			}
			if r.Document.Text != manNames[r.Index] {
				t.Errorf("result %d: document %q, want %q", i, r.Document.Text, manNames[r.Index])
			}
		}
		if got.Results[0].Index != dfIndex {
			t.Errorf("first result %q, want %q", manNames[got.Results[0].Index], manNames[dfIndex])
		}
	})
}

// TestDeterministic embeds texts alone, twice, and inside batches of shorter
// and longer neighbours in different orders: every vector must be the same
// bits each time.
func TestDeterministic(t *testing.T) {
	srv := localmodeltest.Require(t)
	texts := []string{
		"show free disk space",
		"df - report file system space usage",
		"a much longer text about file systems, mount points, block devices and the space each of them has left, which pads a short neighbour",
		"ls",
	}
	alone := make([][]float32, len(texts))
	for i, s := range texts {
		alone[i] = embedOpenAI(t, srv, s)[0]
		if again := embedOpenAI(t, srv, s)[0]; !sameBits(again, alone[i]) {
			t.Errorf("%q embedded twice alone gives different vectors", s)
		}
	}
	batches := [][]int{
		{0, 1, 2, 3},
		{3, 2, 1, 0},
		{2, 0, 2, 0, 1},
		{1, 3},
	}
	for _, b := range batches {
		in := make([]string, len(b))
		for j, i := range b {
			in[j] = texts[i]
		}
		got := embedOpenAI(t, srv, in...)
		for j, i := range b {
			if !sameBits(got[j], alone[i]) {
				t.Errorf("batch %v: %q differs from the same text embedded alone", b, texts[i])
			}
		}
	}
}

// TestLongInput: a text over the token limit is refused unless the request
// asks for truncation (Ollama truncates by default).
func TestLongInput(t *testing.T) {
	srv := localmodeltest.Require(t)
	long := strings.Repeat("disk ", localmodel.DefaultMaxTokens+50)

	if status, raw := post(t, srv.URL()+"/v1/embeddings", map[string]any{"model": srv.ModelName(), "input": long}); status != http.StatusBadRequest {
		t.Errorf("/v1/embeddings long input: status %d, want 400: %s", status, clip(raw))
	}
	if status, raw := post(t, srv.URL()+"/embed", map[string]any{"inputs": long}); status != http.StatusBadRequest {
		t.Errorf("/embed long input: status %d, want 400: %s", status, clip(raw))
	}
	status, raw := post(t, srv.URL()+"/embed", map[string]any{"inputs": long, "truncate": true})
	if status != http.StatusOK {
		t.Fatalf("/embed truncate:true: status %d, want 200: %s", status, clip(raw))
	}
	status, raw = post(t, srv.URL()+"/api/embed", map[string]any{"model": srv.ModelName(), "input": long})
	if status != http.StatusOK {
		t.Fatalf("/api/embed long input: status %d, want 200 (truncated): %s", status, clip(raw))
	}
	var ollama struct {
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	if err := json.Unmarshal(raw, &ollama); err != nil {
		t.Fatal(err)
	}
	if ollama.PromptEvalCount != localmodel.DefaultMaxTokens {
		t.Errorf("/api/embed truncated prompt_eval_count %d, want %d", ollama.PromptEvalCount, localmodel.DefaultMaxTokens)
	}
}

// errorMessage pulls the message out of each provider's error shape.
var errorMessage = map[string]func(raw []byte) (string, error){
	"openai": func(raw []byte) (string, error) {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		err := json.Unmarshal(raw, &e)
		if err == nil && e.Error.Type == "" {
			err = errors.New("no error.type")
		}
		return e.Error.Message, err
	},
	"plain": func(raw []byte) (string, error) {
		var e struct {
			Error string `json:"error"`
		}
		err := json.Unmarshal(raw, &e)
		return e.Error, err
	},
	"tei": func(raw []byte) (string, error) {
		var e struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
		}
		err := json.Unmarshal(raw, &e)
		if err == nil && e.ErrorType == "" {
			err = errors.New("no error_type")
		}
		return e.Error, err
	},
	"cohere": func(raw []byte) (string, error) {
		var e struct {
			Message string `json:"message"`
		}
		err := json.Unmarshal(raw, &e)
		return e.Message, err
	},
}

func TestBadRequests(t *testing.T) {
	srv := localmodeltest.Require(t)
	model := srv.ModelName()
	tooMany := make([]string, localmodel.DefaultMaxBatch+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("text %d", i)
	}
	tests := []struct {
		name   string
		path   string
		body   any
		status int
		family string
		want   string // a substring of the message
	}{
		{"openai not json", "/v1/embeddings", []byte(`{"model":`), 400, "openai", "not valid JSON"},
		{"openai bad utf-8", "/v1/embeddings", []byte("{\"model\":\"use-lite\",\"input\":\"\xff\"}"), 400, "openai", "UTF-8"},
		{"openai array body", "/v1/embeddings", []byte(`[1]`), 400, "openai", "JSON object"},
		{"openai missing input", "/v1/embeddings", map[string]any{"model": model}, 400, "openai", `"input"`},
		{"openai number input", "/v1/embeddings", map[string]any{"model": model, "input": 3}, 400, "openai", "string"},
		{"openai token input", "/v1/embeddings", map[string]any{"model": model, "input": []any{1, 2}}, 400, "openai", `"input"[0]`},
		{"openai empty list", "/v1/embeddings", map[string]any{"model": model, "input": []string{}}, 400, "openai", "empty"},
		{"openai empty text", "/v1/embeddings", map[string]any{"model": model, "input": []string{"a", ""}}, 400, "openai", `"input"[1]`},
		{"openai base64", "/v1/embeddings", map[string]any{"model": model, "input": "a", "encoding_format": "base64"}, 400, "openai", "encoding_format"},
		{"openai unknown field", "/v1/embeddings", map[string]any{"model": model, "input": "a", "dimensions": 256}, 400, "openai", "dimensions"},
		{"openai missing model", "/v1/embeddings", map[string]any{"input": "a"}, 400, "openai", `"model"`},
		{"openai unknown model", "/v1/embeddings", map[string]any{"model": "text-embedding-3-small", "input": "a"}, 404, "openai", "text-embedding-3-small"},
		{"openai batch too large", "/v1/embeddings", map[string]any{"model": model, "input": tooMany}, 413, "openai", "at most"},
		{"ollama unknown model", "/api/embed", map[string]any{"model": "nomic-embed-text", "input": "a"}, 404, "plain", "not found"},
		{"ollama truncate not bool", "/api/embed", map[string]any{"model": model, "input": "a", "truncate": "yes"}, 400, "plain", "truncate"},
		{"ollama batch too large", "/api/embed", map[string]any{"model": model, "input": tooMany}, 413, "plain", "at most"},
		{"tei missing inputs", "/embed", map[string]any{"input": "a"}, 400, "tei", "input"},
		{"tei normalize not bool", "/embed", map[string]any{"inputs": "a", "normalize": 1}, 400, "tei", "normalize"},
		{"tei bad direction", "/embed", map[string]any{"inputs": "a", "truncation_direction": "up"}, 400, "tei", "truncation_direction"},
		{"tei batch too large", "/embed", map[string]any{"inputs": tooMany}, 413, "tei", "at most"},
		{"tei rerank texts string", "/rerank", map[string]any{"query": "q", "texts": "a"}, 400, "tei", "array of strings"},
		{"tei rerank empty query", "/rerank", map[string]any{"query": "", "texts": []string{"a"}}, 400, "tei", "query"},
		{"cohere unknown model", "/v2/rerank", map[string]any{"model": "rerank-v3.5", "query": "q", "documents": []string{"a"}}, 404, "cohere", "rerank-v3.5"},
		{"cohere top_n zero", "/v2/rerank", map[string]any{"model": model, "query": "q", "documents": []string{"a"}, "top_n": 0}, 400, "cohere", "top_n"},
		{"cohere top_n fraction", "/v2/rerank", map[string]any{"model": model, "query": "q", "documents": []string{"a"}, "top_n": 1.5}, 400, "cohere", "top_n"},
		{"cohere document objects", "/v2/rerank", map[string]any{"model": model, "query": "q", "documents": []any{map[string]string{"text": "a"}}}, 400, "cohere", `"documents"[0]`},
		{"cohere too many documents", "/v2/rerank", map[string]any{"model": model, "query": "q", "documents": tooMany}, 413, "cohere", "at most"},
		{"unknown path", "/v1/embedding", map[string]any{}, 404, "plain", "/v1/embeddings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := post(t, srv.URL()+tt.path, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, clip(raw))
			}
			msg, err := errorMessage[tt.family](raw)
			if err != nil || msg == "" {
				t.Fatalf("error body %s is not a %s error (%v)", clip(raw), tt.family, err)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not mention %q", msg, tt.want)
			}
		})
	}
}

func TestBadHTTP(t *testing.T) {
	srv := localmodeltest.Require(t)

	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(srv.URL() + "/v1/embeddings")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("GET /v1/embeddings: status %d Allow %q, want 405 POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})

	t.Run("wrong content type", func(t *testing.T) {
		resp, err := http.Post(srv.URL()+"/embed", "text/plain", strings.NewReader(`{"inputs":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("text/plain body: status %d, want 415", resp.StatusCode)
		}
	})

	big := bytes.Repeat([]byte("a"), localmodel.DefaultMaxBodyBytes+1)
	for _, tt := range []struct {
		name string
		body io.Reader
	}{
		{"body too large", bytes.NewReader(big)},                         // Content-Length says so
		{"chunked body too large", io.MultiReader(bytes.NewReader(big))}, // no Content-Length
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL()+"/embed", "application/json", tt.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			msg, err := errorMessage["tei"](raw)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || !strings.Contains(msg, "bytes") {
				t.Errorf("status %d body %s, want 413 with a TEI error naming the byte limit", resp.StatusCode, clip(raw))
			}
		})
	}
	// The server still answers afterwards.
	embedOpenAI(t, srv, "still there")
}

// TestStartOptions starts a second server with its own model name and a
// delay, and checks Close.
func TestStartOptions(t *testing.T) {
	localmodeltest.Require(t) // skips or fails like the other tests when the model is missing
	var stderr bytes.Buffer
	srv, err := localmodel.Start(context.Background(), localmodel.Options{
		ModelName: "use-lite-test",
		Delay:     1500 * time.Millisecond,
		MaxBatch:  2,
		Stderr:    &stderr, // read only after Close, which waits for the copy
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	// The delay outlasts a short client timeout.
	short := &http.Client{Timeout: 200 * time.Millisecond}
	_, err = short.Post(srv.URL()+"/embed", "application/json", strings.NewReader(`{"inputs":"a"}`))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("POST with a 200ms timeout against a 1500ms delay: err %v, want a timeout", err)
	}

	if srv.ModelName() != "use-lite-test" {
		t.Errorf("ModelName %q, want use-lite-test", srv.ModelName())
	}
	embedOpenAI(t, srv, "a", "b")
	if status, raw := post(t, srv.URL()+"/v1/embeddings", map[string]any{"model": localmodel.DefaultModelName, "input": "a"}); status != http.StatusNotFound {
		t.Errorf("default model name on a server renamed: status %d, want 404: %s", status, clip(raw))
	}
	if status, raw := post(t, srv.URL()+"/v1/embeddings", map[string]any{"model": "use-lite-test", "input": []string{"a", "b", "c"}}); status != http.StatusRequestEntityTooLarge {
		t.Errorf("3 texts with MaxBatch 2: status %d, want 413: %s", status, clip(raw))
	}

	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(srv.URL() + "/health"); err == nil {
		t.Errorf("GET /health after Close succeeded, want a connection error")
	}
	if !strings.Contains(stderr.String(), "loaded in") {
		t.Errorf("Options.Stderr got %q, want the server's load report", stderr.String())
	}
}

// fakeDir makes a directory that passes Available with the given server.mjs.
func fakeDir(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"server.mjs":                           script,
		"package.json":                         `{"dependencies": {"fake-model": "1.2.3"}}`,
		"node_modules/fake-model/package.json": `{"name": "fake-model", "version": "1.2.3"}`,
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(localmodel.EnvDir, dir)
	return dir
}

func requireNode(t *testing.T) {
	t.Helper()
	if err := localmodel.Available(); err != nil && strings.Contains(err.Error(), "not on PATH") {
		if localmodeltest.Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func TestAvailableExplains(t *testing.T) {
	requireNode(t)
	dir := fakeDir(t, "")
	if err := localmodel.Available(); err != nil {
		t.Fatalf("Available on a complete fake install: %v", err)
	}
	if got := localmodel.Dir(); got != dir {
		t.Errorf("Dir() = %q, want %s from %s", got, dir, localmodel.EnvDir)
	}

	if err := os.WriteFile(filepath.Join(dir, "node_modules/fake-model/package.json"), []byte(`{"version": "1.2.2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := localmodel.Available()
	if !errors.Is(err, localmodel.ErrNotInstalled) || !strings.Contains(err.Error(), `"1.2.2"`) || !strings.Contains(err.Error(), localmodel.InstallCommand) {
		t.Errorf("wrong version installed: err %v, want ErrNotInstalled naming 1.2.2 and %q", err, localmodel.InstallCommand)
	}

	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	err = localmodel.Available()
	if !errors.Is(err, localmodel.ErrNotInstalled) || !strings.Contains(err.Error(), "fake-model is missing") || !strings.Contains(err.Error(), localmodel.InstallCommand) {
		t.Errorf("nothing installed: err %v, want ErrNotInstalled naming fake-model and %q", err, localmodel.InstallCommand)
	}
	if _, err := localmodel.Start(context.Background(), localmodel.Options{}); !errors.Is(err, localmodel.ErrNotInstalled) {
		t.Errorf("Start without packages: err %v, want ErrNotInstalled", err)
	}

	t.Setenv(localmodel.EnvDir, t.TempDir())
	if err := localmodel.Available(); !errors.Is(err, localmodel.ErrNotInstalled) || !strings.Contains(err.Error(), "no server.mjs") {
		t.Errorf("empty directory: err %v, want ErrNotInstalled naming server.mjs", err)
	}
}

func TestDirFindsModuleRoot(t *testing.T) {
	t.Setenv(localmodel.EnvDir, "")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The test runs in embed/localmodel, two levels below go.mod.
	if got, want := localmodel.Dir(), wd; got != want {
		t.Errorf("Dir() = %q, want %q", got, want)
	}
}

func TestStartFailures(t *testing.T) {
	requireNode(t)
	t.Run("exits", func(t *testing.T) {
		fakeDir(t, `process.stderr.write("boom: the model is broken\n"); process.exit(3);`)
		_, err := localmodel.Start(context.Background(), localmodel.Options{})
		if !errors.Is(err, localmodel.ErrNotReady) || !strings.Contains(err.Error(), "boom: the model is broken") || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("err %v, want ErrNotReady with the stderr text and exit status 3", err)
		}
	})
	t.Run("never listens", func(t *testing.T) {
		dir := fakeDir(t, `
			import { writeFileSync } from 'node:fs';
			writeFileSync('pid', String(process.pid));
			console.log('loading forever');
			setInterval(() => {}, 1000);`)
		_, err := localmodel.Start(context.Background(), localmodel.Options{StartTimeout: 3 * time.Second})
		if !errors.Is(err, localmodel.ErrNotReady) || !strings.Contains(err.Error(), "within 3s") {
			t.Fatalf("err %v, want ErrNotReady after 3s", err)
		}
		assertGone(t, dir)
	})
	t.Run("context cancelled", func(t *testing.T) {
		dir := fakeDir(t, `
			import { writeFileSync } from 'node:fs';
			writeFileSync('pid', String(process.pid));
			setInterval(() => {}, 1000);`)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := localmodel.Start(ctx, localmodel.Options{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want context.DeadlineExceeded", err)
		}
		assertGone(t, dir)
	})
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []localmodel.Options{{Delay: -time.Second}, {MaxBatch: -1}, {ModelName: "two words"}, {MaxBodyBytes: 10}} {
			if _, err := localmodel.Start(context.Background(), o); !errors.Is(err, localmodel.ErrBadOptions) {
				t.Errorf("Start(%+v): err %v, want ErrBadOptions", o, err)
			}
		}
	})
}

// assertGone checks that the process whose pid the fake server wrote no
// longer exists (Start waits for it before returning).
func assertGone(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the fake server never ran: %v", err)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(raw))); err == nil {
		t.Errorf("process %s still exists after Start gave up", raw)
	}
}
