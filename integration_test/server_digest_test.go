package integration_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// digestsOf retrieves query and returns the chunk ids and digests of doc's
// results, checking that each digest is the documented one of the result.
func digestsOf(t *testing.T, a *apiServer, token, query, doc string) (ids, digests []string) {
	t.Helper()
	m := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/retrieve", token, map[string]any{
		"query": query, "policy": map[string]any{"enable_rerank": false, "limit": 20, "max_chunks_per_doc": 0}}), http.StatusOK).json(t)
	for _, r := range m["results"].([]any) {
		r := r.(map[string]any)
		c := cordontype.Chunk{ChunkID: r["chunk_id"].(string), DocID: r["doc_id"].(string), Section: r["section"].(string),
			Text: r["text"].(string), StartChar: int(r["start_char"].(float64)), EndChar: int(r["end_char"].(float64))}
		d, _ := r["digest"].(string)
		if d != c.Digest() {
			t.Fatalf("result %s has digest %q, want %q", c.ChunkID, d, c.Digest())
		}
		if c.DocID == doc {
			ids, digests = append(ids, c.ChunkID), append(digests, d)
		}
	}
	return ids, digests
}

// TestServerChunkDigests: retrieve returns a digest per chunk; after the
// document is replaced, ground and assemble with the old digests answer 409
// chunk_changed naming exactly the chunks that changed, with fresh digests
// 200, without digests 200 as before; a digest never turns a hidden or
// deleted chunk's 404 into anything else.
func TestServerChunkDigests(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cache int64
	}{{"sql", 0}, {"memindex", 256 << 20}} {
		t.Run(tt.name, func(t *testing.T) { serverChunkDigests(t, tt.cache) })
	}
}

func serverChunkDigests(t *testing.T, cacheBytes int64) {
	a := startAPIServer(t, serverOpts{cache: cacheBytes})
	a.seed(t)
	w := tok(t, "w", "tenant=wholesale", "writer")
	reader := tok(t, "c", "tenant=wholesale", "clearance=confidential", "reader")
	putWire := func(cutoff string) {
		t.Helper()
		a.want(t, a.call(t, "PUT", "/v1/tenants/wholesale/documents/wire", w, map[string]any{
			"text":           "# Cutoff\nPMT-900 wire cutoff is " + cutoff + " London time.\n# Swaps\nFX desk approves PMT-900 swaps over ten million.",
			"classification": "internal", "as_of_tick": 100,
		}), http.StatusOK)
	}
	putWire("17:00")
	const query = "PMT-900 wire cutoff FX desk swaps"
	ids, v1 := digestsOf(t, a, reader, query, "wire")
	if !slices.Equal(ids, []string{"wire::0", "wire::1"}) && !slices.Equal(ids, []string{"wire::1", "wire::0"}) {
		t.Fatalf("retrieve ids of wire = %v, want both chunks", ids)
	}
	claim := "PMT-900 wire cutoff is 18:00 London time."
	ground := func(digests []string) resp {
		body := map[string]any{"claims": []string{claim}, "chunk_ids": ids, "threshold": 1}
		if digests != nil {
			body["digests"] = digests
		}
		return a.call(t, "POST", "/v1/tenants/wholesale/ground", reader, body)
	}
	assemble := func(digests []string) resp {
		body := map[string]any{"question": "When is the PMT-900 cutoff?", "chunk_ids": ids, "budget_tokens": 500}
		if digests != nil {
			body["digests"] = digests
		}
		return a.call(t, "POST", "/v1/tenants/wholesale/assemble", reader, body)
	}
	if g := a.want(t, ground(v1), http.StatusOK).json(t); g["is_grounded"] != false {
		t.Fatalf("version 1 never said %q: %v", claim, g)
	}
	a.want(t, assemble(v1), http.StatusOK)

	// Replace the document: the cutoff chunk's text changes, the swaps
	// chunk's text and span do not (the replacement keeps its length).
	putWire("18:00")
	changed := "wire::0"
	for _, call := range []struct {
		name string
		do   func([]string) resp
	}{{"ground", ground}, {"assemble", assemble}} {
		r := a.want(t, call.do(v1), http.StatusConflict)
		if r.errCode(t) != "chunk_changed" {
			t.Fatalf("%s with old digests: %s", call.name, r.body)
		}
		e := r.json(t)["error"].(map[string]any)
		msg, _ := e["message"].(string)
		got := fmt.Sprint(e["chunk_ids"])
		if !strings.Contains(msg, changed) || strings.Contains(msg, "wire::1") || got != "["+changed+"]" {
			t.Fatalf("%s with old digests names %s (%q), want only %s", call.name, got, msg, changed)
		}
	}
	// Without digests: today's behaviour, the current version is used (and
	// supports a claim version 1 never made).
	if g := a.want(t, ground(nil), http.StatusOK).json(t); g["is_grounded"] != true {
		t.Fatalf("ground without digests = %v, want the current version used", g)
	}
	a.want(t, assemble(nil), http.StatusOK)
	// Fresh digests: 200.
	ids, v2 := digestsOf(t, a, reader, query, "wire")
	if g := a.want(t, ground(v2), http.StatusOK).json(t); g["is_grounded"] != true {
		t.Fatalf("ground with fresh digests = %v", g)
	}
	a.want(t, assemble(v2), http.StatusOK)
	// Malformed or miscounted digests are bad input.
	for _, bad := range [][]string{{v2[0]}, {v2[0], "sha256:00"}} {
		if r := a.want(t, ground(bad), http.StatusBadRequest); r.errCode(t) != "bad_request" {
			t.Fatalf("ground with digests %v: %s", bad, r.body)
		}
	}

	// A reader who may not see memo/secret gets today's 404 bytes whatever
	// digest it sends: the right one, a wrong one, or a stale one for a
	// visible chunk sent alongside.
	pub := tok(t, "p", "tenant=wholesale", "clearance=internal", "reader")
	restricted := tok(t, "r", "tenant=wholesale", "clearance=restricted", "reader")
	_, secret := digestsOf(t, a, restricted, "Project Falcon acquisition hold", "memo/secret")
	if len(secret) != 1 {
		t.Fatalf("restricted reader got %d memo/secret chunks", len(secret))
	}
	want := a.want(t, a.call(t, "POST", "/v1/tenants/wholesale/ground", pub, map[string]any{
		"claims": []string{"x"}, "chunk_ids": []string{"memo/secret::0"}}), http.StatusNotFound).body
	zero := "blake2b-256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name    string
		ids     []string
		digests []string
	}{
		{"right digest", []string{"memo/secret::0"}, secret},
		{"wrong digest", []string{"memo/secret::0"}, []string{zero}},
		{"stale visible chunk first", []string{"wire::0", "memo/secret::0"}, []string{v1[slices.Index(ids, "wire::0")], zero}},
		{"missing chunk", []string{"no-such::0"}, []string{zero}},
	} {
		for _, op := range []string{"ground", "assemble"} {
			body := map[string]any{"chunk_ids": tc.ids, "digests": tc.digests}
			if op == "ground" {
				body["claims"] = []string{"x"}
			} else {
				body["question"], body["budget_tokens"] = "q", 100
			}
			r := a.call(t, "POST", "/v1/tenants/wholesale/"+op, pub, body)
			if r.status != http.StatusNotFound || !bytes.Equal(r.body, want) {
				t.Fatalf("%s %s: %d %s, want today's 404 %s", op, tc.name, r.status, r.body, want)
			}
		}
	}

	// A deleted chunk stays a 404, digest or not.
	a.want(t, a.call(t, "DELETE", "/v1/tenants/wholesale/documents/wire", w, nil), http.StatusOK)
	if r := ground(v2); r.status != http.StatusNotFound || !bytes.Equal(r.body, want) {
		t.Fatalf("ground on a deleted chunk: %d %s", r.status, r.body)
	}
}
