// Package replaygen generates randomized replay scripts (SPEC section 9) from a
// seed. The differential tests run the same scripts against every store and
// compare the outputs byte for byte; a failing seed is a ready-made bug report:
// Generate(seed) reproduces the script exactly.
package replaygen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Small vocabularies make terms collide across chunks and tenants, which is
// what exercises df, ties and the funnel counters.
var (
	words = []string{
		"payment", "hold", "release", "PMT-771", "beneficiary", "sanctions", "screening",
		"account", "card", "dispute", "refund", "fraud", "limit", "wire", "SWIFT", "tx4096",
		"compliance", "officer", "approval", "deal", "falcon", "merger", "client", "retail",
		"Überweisung", "ČSOB", "番号", "٣٤", "naïve", "risk", "the", "a", "of", "and", "is",
		// Other forms of words above: the English analyzer's stem terms
		// join them.
		"payments", "holds", "holding", "released", "releases", "screened", "accounts",
		"disputed", "approvals", "approve", "officers", "merging",
	}
	headings   = []string{"Overview", "Release rules", "Escalation", "  Spaced  ", "", "Notes ##"}
	tenants    = []string{"wholesale", "retail", "compliance"}
	classes    = []string{"public", "internal", "confidential", "restricted"}
	barrierSet = []string{"deal-team:falcon", "wall:research", "Wall:Research"}
	docIDs     = []string{"pay-001", "pay-002", "card/7", "pol.v2", "memo:9", "x-1"}
)

// Generate returns a deterministic random script for seed with about steps
// steps.
func Generate(seed uint64, steps int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := gen{r: r}
	cfg := map[string]any{}
	if r.IntN(2) == 0 {
		cfg["dims"] = []int{4, 16, 64, 256}[r.IntN(4)]
	}
	if r.IntN(2) == 0 {
		mw := 3 + r.IntN(25)
		cfg["max_words"] = mw
		cfg["overlap_words"] = r.IntN(mw)
	}
	if r.IntN(3) == 0 {
		cfg["k1"] = []float64{0, 1.2, 1.5, 2.75}[r.IntN(4)]
		cfg["b"] = []float64{0, 0.5, 0.75, 1}[r.IntN(4)]
	}
	// Both statistics scopes, and the default (entitled) by omission.
	if x := r.IntN(3); x > 0 {
		cfg["bm25_statistics"] = []string{"entitled", "tenant"}[x-1]
	}
	// Both analyzers, and the default (english) by omission.
	if x := r.IntN(3); x > 0 {
		cfg["analyzer"] = []string{"english", "exact"}[x-1]
	}
	// With field terms and without, and the default (with) by omission.
	if x := r.IntN(3); x > 0 {
		cfg["fields"] = x == 1
	}
	// With field terms, now and then the older field rules a tenant of an
	// older release keeps (counted frequencies).
	if cfg["fields"] != false && r.IntN(4) == 0 {
		cfg["field_rules"] = []string{"fields-title-path-2", "fields-title-section-1"}[r.IntN(2)]
	}
	var out []any
	for i := 0; i < steps; i++ {
		switch x := r.IntN(100); {
		case x < 40:
			out = append(out, g.put())
		case x < 48:
			out = append(out, map[string]any{"op": "delete", "tenant": g.pick(tenants), "doc_id": g.pick(docIDs)})
		case x < 80:
			out = append(out, g.retrieve())
		case x < 88:
			out = append(out, g.ground())
		case x < 96:
			out = append(out, g.assemble())
		default:
			out = append(out, g.bad())
		}
	}
	b, err := json.Marshal(map[string]any{"config": cfg, "steps": out})
	if err != nil {
		panic(err) // only plain maps and slices: cannot fail
	}
	return b
}

type gen struct{ r *rand.Rand }

func (g gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g gen) sentence(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = g.pick(words)
	}
	seps := []string{" ", " ", " ", "  ", "\t", "\u00a0", " \n"}
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString(seps[g.r.IntN(len(seps))])
		}
		b.WriteString(w)
	}
	return b.String()
}

func (g gen) text() string {
	var b strings.Builder
	nl := "\n"
	if g.r.IntN(5) == 0 {
		nl = "\r\n"
	}
	if g.r.IntN(2) == 0 {
		b.WriteString(g.sentence(1+g.r.IntN(12)) + "." + nl)
	}
	for s := g.r.IntN(4); s > 0; s-- {
		b.WriteString(strings.Repeat("#", 1+g.r.IntN(3)) + " " + g.pick(headings) + nl)
		if g.r.IntN(6) == 0 {
			b.WriteString("```" + nl + "# not a heading " + g.pick(words) + nl + "```" + nl)
		}
		b.WriteString(g.sentence(1+g.r.IntN(40)) + "." + nl + nl)
	}
	if b.Len() == 0 || g.r.IntN(8) == 0 {
		b.WriteString(g.sentence(1 + g.r.IntN(10)))
	}
	return b.String()
}

func (g gen) barriers() []string {
	var out []string
	for _, l := range barrierSet {
		if g.r.IntN(4) == 0 {
			out = append(out, l)
		}
	}
	return out
}

func (g gen) put() map[string]any {
	doc := map[string]any{
		"tenant":         g.pick(tenants),
		"doc_id":         g.pick(docIDs),
		"text":           g.text(),
		"classification": g.pick(classes),
		"barriers":       g.barriers(),
		"as_of_tick":     g.r.IntN(200),
	}
	if g.r.IntN(6) == 0 {
		doc["title"] = "T " + g.pick(words)
		doc["metadata"] = map[string]any{"source": g.pick(words), "n": g.r.IntN(9)}
	}
	return map[string]any{"op": "put", "document": doc}
}

func (g gen) retrieve() map[string]any {
	pol := map[string]any{}
	if g.r.IntN(2) == 0 {
		pol["max_stale_ticks"] = g.r.IntN(150)
	}
	if g.r.IntN(3) == 0 {
		pol["enable_rerank"] = false
	}
	if g.r.IntN(3) == 0 {
		pol["min_score"] = []float64{0, 0.1, 0.34, 0.5, 1}[g.r.IntN(5)]
	}
	if g.r.IntN(3) == 0 {
		pol["top_n"] = 1 + g.r.IntN(8)
	}
	if g.r.IntN(3) == 0 {
		pol["rerank_depth"] = 1 + g.r.IntN(8)
	}
	if g.r.IntN(4) == 0 {
		pol["rrf_k"] = 1 + g.r.IntN(100)
	}
	if g.r.IntN(2) == 0 {
		pol["limit"] = 1 + g.r.IntN(10)
	}
	if g.r.IntN(3) == 0 {
		w := map[string]any{}
		if g.r.IntN(2) == 0 {
			w["bm25"] = []float64{0, 0.5, 1, 2.5}[g.r.IntN(4)]
		}
		if g.r.IntN(2) == 0 {
			w["cosine"] = []float64{0, 0.25, 1, 3}[g.r.IntN(4)]
		}
		pol["rrf_weights"] = w
	}
	if g.r.IntN(2) == 0 {
		pol["rerank"] = []string{"overlap", "idf_overlap"}[g.r.IntN(2)]
	}
	if g.r.IntN(3) == 0 {
		blend := []float64{0, 0.3, 0.5, 1}[g.r.IntN(4)]
		pol["rerank_blend"] = blend
		if blend == 0.3 || blend == 1 {
			// From the draw already made, so the scripts of every seed
			// stay what they were up to here.
			pol["rerank_proximity"] = map[float64]float64{0.3: 0.25, 1: 1}[blend]
		}
		if blend <= 0.5 && g.r.IntN(2) == 0 {
			pol["rerank_dense"] = []float64{0.15, 0.5}[g.r.IntN(2)]
		}
	}
	if g.r.IntN(3) == 0 {
		pol["max_chunks_per_doc"] = g.r.IntN(3)
	}
	step := map[string]any{
		"op": "retrieve",
		"principal": map[string]any{
			"tenant": g.pick(tenants), "clearance": g.pick(classes), "barriers": g.barriers(),
		},
		"query":    g.sentence(1 + g.r.IntN(6)),
		"now_tick": 100 + g.r.IntN(150),
		"policy":   pol,
	}
	// Query expansion, drawn last so the draws above keep their order.
	if g.r.IntN(3) == 0 {
		pol["prf_docs"] = g.r.IntN(4)
		if g.r.IntN(2) == 0 {
			pol["prf_terms"] = 1 + g.r.IntN(5)
		}
		if g.r.IntN(2) == 0 {
			pol["prf_weight"] = []float64{0, 0.3, 0.5, 1}[g.r.IntN(4)]
		}
	}
	// Query term frequency, drawn after expansion for the same reason.
	if g.r.IntN(3) == 0 {
		pol["qtf_k3"] = []float64{0, 0.5, 8, 1000}[g.r.IntN(4)]
	}
	if g.r.IntN(3) == 0 {
		pol["idf"] = []string{"plus1", "rsj"}[g.r.IntN(2)]
	}
	// Document evidence, drawn last for the same reason.
	if g.r.IntN(3) == 0 {
		w, _ := pol["rrf_weights"].(map[string]any)
		if w == nil {
			w = map[string]any{}
			pol["rrf_weights"] = w
		}
		doc := []float64{0, 0.5, 1, 2}[g.r.IntN(4)]
		w["doc"] = doc
		// rerank_doc from the draw already made, so the scripts of every
		// seed stay what they were up to here; with doc 0 it must change
		// nothing.
		if v := map[float64]float64{0: 0.5, 1: 0.1, 2: 1}[doc]; v > 0 {
			pol["rerank_doc"] = v
		}
	}
	// The query stop list, drawn last for the same reason; the vocabulary
	// holds some of its words.
	if g.r.IntN(3) == 0 {
		pol["stop_words"] = []string{"", "none", "english", "english"}[g.r.IntN(4)]
	}
	// The stem terms' weight, drawn last for the same reason.
	if g.r.IntN(2) == 0 {
		pol["stem_weight"] = []float64{0, 0.3, 0.5, 1}[g.r.IntN(4)]
	}
	// The field terms' weight, drawn last for the same reason.
	if g.r.IntN(2) == 0 {
		pol["field_weight"] = []float64{0, 0.25, 1, 4}[g.r.IntN(4)]
	}
	// Combined terms, drawn last for the same reason.
	if g.r.IntN(2) == 0 {
		pol["bm25f"] = true
	}
	return step
}

func (g gen) ground() map[string]any {
	claims := make([]string, g.r.IntN(4))
	for i := range claims {
		claims[i] = g.sentence(1 + g.r.IntN(6))
	}
	step := map[string]any{"op": "ground", "claims": claims}
	if g.r.IntN(2) == 0 {
		step["threshold"] = []float64{0, 0.3, 0.6, 1}[g.r.IntN(4)]
	}
	return step
}

func (g gen) assemble() map[string]any {
	return map[string]any{
		"op": "assemble", "question": g.sentence(1+g.r.IntN(8)) + "?",
		"budget_tokens": 1 + g.r.IntN(300),
		"instructions":  []string{"", "Answer only from the sources."}[g.r.IntN(2)],
		"tool_schema":   []string{"", `{"name":"search"}`}[g.r.IntN(2)],
		"policy":        []string{"", "cite every claim"}[g.r.IntN(2)],
	}
}

// bad returns a step with invalid input, which every store must reject the same
// way.
func (g gen) bad() any {
	switch g.r.IntN(10) {
	case 7:
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "retail", "clearance": "public"}, "query": "hold", "policy": map[string]any{"rrf_weights": map[string]any{"bm25": -1}}}
	case 8:
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "retail", "clearance": "public"}, "query": "hold", "policy": map[string]any{"rerank": "cross_encoder"}}
	case 9:
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "retail", "clearance": "public"}, "query": "hold", "policy": map[string]any{"rerank_blend": 1.5}}
	case 6:
		return map[string]any{"op": "put", "document": map[string]any{"tenant": "retail", "doc_id": "nul", "text": "hold\u0000release", "classification": "public"}}
	case 0:
		return map[string]any{"op": "put", "document": map[string]any{"tenant": "Bad-Tenant", "doc_id": "d", "text": "x", "classification": "public"}}
	case 1:
		return map[string]any{"op": "put", "document": map[string]any{"tenant": "retail", "doc_id": "d", "text": "!!! ---", "classification": "public"}}
	case 2:
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "retail", "clearance": "secret"}, "query": "hold"}
	case 3:
		return map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "retail", "clearance": "public"}, "query": "hold", "policy": map[string]any{"limit": 0}}
	case 4:
		return map[string]any{"op": "assemble", "question": "q", "budget_tokens": 1}
	default:
		return map[string]any{"op": fmt.Sprintf("nope%d", g.r.IntN(3))}
	}
}
