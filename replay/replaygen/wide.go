package replaygen

import (
	"encoding/json"
	"fmt"
	"strings"
)

// BeyondLimitsPolicy asks for more than every cost limit the HTTP service
// applies by default (top_n 200, rerank_depth 200, limit 400, prf_docs 50,
// prf_terms 50; docs/spec.md, section 5, "limits"), with values SPEC
// section 9 allows: a replay must run it.
func BeyondLimitsPolicy() map[string]any {
	return map[string]any{"top_n": 100000, "rerank_depth": 100000, "limit": 100000}
}

// Wide returns a script of docs one-chunk documents of tenant "wide", each
// holding the query's first word "hold" (and so in the lexical ranking) and
// none identical, then retrieves whose policies ask for more than the
// service's cost limits:
//
//  1. [BeyondLimitsPolicy]: every chunk is returned, the lexical ranking
//     reported to its last rank, docs;
//  2. top_n docs, rerank_depth and limit 2 x docs: nothing to cut either
//     way, so the same output as step 1;
//  3. step 1 with query expansion over up to 1000 feedback chunks and 1000
//     added terms;
//  4. step 1 with rerank off.
//
// With docs above 400 every retrieve returns more chunks than any
// service-limited one may.
func Wide(docs int) []byte {
	steps := make([]any, 0, docs+4)
	filler := []string{"payment", "wire", "release", "approval", "sanctions", "screening", "refund"}
	for i := range docs {
		var b strings.Builder
		b.WriteString(strings.Repeat("hold ", 1+i%5))
		for j := range 1 + i%7 {
			b.WriteString(filler[(i+j)%len(filler)] + " ")
		}
		fmt.Fprintf(&b, "ref%d", i)
		steps = append(steps, map[string]any{"op": "put", "document": map[string]any{
			"tenant": "wide", "doc_id": fmt.Sprintf("w-%04d", i), "text": b.String(),
			"classification": "internal", "as_of_tick": i}})
	}
	retrieve := func(pol map[string]any) map[string]any {
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "wide", "clearance": "internal"},
			"query": "hold payment wire", "now_tick": docs, "policy": pol}
	}
	with := func(extra map[string]any) map[string]any {
		p := BeyondLimitsPolicy()
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	steps = append(steps,
		retrieve(BeyondLimitsPolicy()),
		retrieve(map[string]any{"top_n": docs, "rerank_depth": 2 * docs, "limit": 2 * docs}),
		retrieve(with(map[string]any{"prf_docs": 1000, "prf_terms": 1000})),
		retrieve(with(map[string]any{"enable_rerank": false})),
	)
	b, err := json.Marshal(map[string]any{"steps": steps})
	if err != nil {
		panic(err) // only plain maps and slices: cannot fail
	}
	return b
}
