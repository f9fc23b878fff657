package retrieval_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/rerank"
	"github.com/cordon-rag/cordon/retrieval"
)

// fakeModel scores a text by the first of its keywords it holds (0.01
// otherwise) and records every call.
type fakeModel struct {
	keywords []string
	scores   []float64
	// answer, when set, replaces the scores it would give.
	answer func(ctx context.Context, scores []float64) ([]float64, error)

	mu    sync.Mutex
	calls []modelCall
}

type modelCall struct {
	query    string
	texts    []string
	budget   time.Duration // time left until the deadline, at the call
	deadline bool
	at       time.Time // the deadline
}

func (f *fakeModel) Name() string  { return "fake" }
func (f *fakeModel) Model() string { return "fake-cross-encoder" }

func (f *fakeModel) Score(ctx context.Context, query string, texts []string) ([]float64, error) {
	dl, ok := ctx.Deadline()
	f.mu.Lock()
	f.calls = append(f.calls, modelCall{query: query, texts: slices.Clone(texts), budget: time.Until(dl), deadline: ok, at: dl})
	f.mu.Unlock()
	out := make([]float64, len(texts))
	for i, t := range texts {
		out[i] = 0.01
		for k, w := range f.keywords {
			if strings.Contains(t, w) {
				out[i] = f.scores[k]
				break
			}
		}
	}
	if f.answer != nil {
		return f.answer(ctx, out)
	}
	return out, nil
}

func (f *fakeModel) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// paymentModel prefers the wires chunk, then the two that name a review
// desk (a tie), and hardly wants the superseded one.
func paymentModel() *fakeModel {
	return &fakeModel{
		keywords: []string{"wires", "sanctions", "investigations", "Deal X", "superseded"},
		scores:   []float64{0.9, 0.7, 0.7, 0.2, 0.05},
	}
}

// paymentQuery is "payment hold" over corpus("wholesale") for a principal
// who sees all of it. Its fused order is pay-003, pay-001, pay-004, pay-005,
// pay-002.
func paymentQuery(edit func(*retrieval.Policy)) retrieval.Query {
	return query(principal("wholesale", cordontype.Restricted, "deal-x"), "payment hold", func(p *retrieval.Policy) {
		p.Rerank = retrieval.RerankModel
		if edit != nil {
			edit(p)
		}
	})
}

func modelRetrieve(t *testing.T, st retrieval.Store, m rerank.Reranker, q retrieval.Query) retrieval.Result {
	t.Helper()
	res, err := retrieval.New(st, retrieval.WithReranker(m)).Retrieve(context.Background(), q)
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	return res
}

func reranks(r retrieval.Result) []float64 {
	out := make([]float64, len(r.Chunks))
	for i, s := range r.Chunks {
		out[i] = math.NaN()
		if s.Rerank != nil {
			out[i] = *s.Rerank
		}
	}
	return out
}

// blended is docs/spec.md's rerank score with the model's score for the
// overlap, every step rounded.
func blended(model, bm25, bm25max, g float64) float64 {
	t1 := float64(float64(1.0-g) * model)
	t2 := float64(g * float64(bm25/bm25max))
	return float64(t1 + t2)
}

func TestModelRerank(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	// BM25 of "payment hold" per chunk, from the rankings.
	rk := allSeeing(t, st, "wholesale", "payment hold")
	bm25 := map[string]float64{}
	for _, h := range rk.Lexical {
		bm25[h.Chunk.DocID] = h.Score
	}
	max := rk.Lexical[0].Score
	tests := []struct {
		name      string
		edit      func(*retrieval.Policy)
		wantIDs   []string
		wantScore []float64
		wantSent  int
	}{
		{"model order, ties in fused order", nil,
			[]string{"pay-005::0", "pay-001::0", "pay-002::0", "pay-003::0", "pay-004::0"}, []float64{0.9, 0.7, 0.7, 0.2, 0.05}, 5},
		{"floor keeps scores at or above it", func(p *retrieval.Policy) { p.RerankMinScore = 0.2 },
			[]string{"pay-005::0", "pay-001::0", "pay-002::0", "pay-003::0"}, []float64{0.9, 0.7, 0.7, 0.2}, 5},
		{"floor above every score", func(p *retrieval.Policy) { p.RerankMinScore = 0.95 }, []string{}, []float64{}, 5},
		{"min_score is the overlap kinds' floor, not the model's", func(p *retrieval.Policy) { p.MinScore = 1 },
			[]string{"pay-005::0", "pay-001::0", "pay-002::0", "pay-003::0", "pay-004::0"}, []float64{0.9, 0.7, 0.7, 0.2, 0.05}, 5},
		{"depth: only the first fused chunks are sent and kept", func(p *retrieval.Policy) { p.RerankDepth = 3 },
			[]string{"pay-001::0", "pay-003::0", "pay-004::0"}, []float64{0.7, 0.2, 0.05}, 3},
		{"limit", func(p *retrieval.Policy) { p.Limit = 2 },
			[]string{"pay-005::0", "pay-001::0"}, []float64{0.9, 0.7}, 5},
		{"blend with BM25", func(p *retrieval.Policy) { p.RerankBlend = 0.5 },
			[]string{"pay-001::0", "pay-005::0", "pay-003::0", "pay-002::0", "pay-004::0"},
			[]float64{blended(0.7, bm25["pay-001"], max, 0.5), blended(0.9, bm25["pay-005"], max, 0.5), blended(0.2, bm25["pay-003"], max, 0.5),
				blended(0.7, bm25["pay-002"], max, 0.5), blended(0.05, bm25["pay-004"], max, 0.5)}, 5},
		{"blend 1 is BM25 order", func(p *retrieval.Policy) { p.RerankBlend = 1 },
			[]string{"pay-003::0", "pay-001::0", "pay-005::0", "pay-004::0", "pay-002::0"},
			[]float64{1, bm25["pay-001"] / max, bm25["pay-005"] / max, bm25["pay-004"] / max, bm25["pay-002"] / max}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := paymentModel()
			res := modelRetrieve(t, st, m, paymentQuery(tt.edit))
			if got := resultIDs(res); !slices.Equal(got, tt.wantIDs) {
				t.Fatalf("got %q, want %q", got, tt.wantIDs)
			}
			if got := reranks(res); !slices.Equal(got, tt.wantScore) {
				t.Errorf("rerank scores %v, want %v", got, tt.wantScore)
			}
			if len(res.Degraded) != 0 {
				t.Errorf("degraded %q, want none", res.Degraded)
			}
			if m.callCount() != 1 || len(m.calls[0].texts) != tt.wantSent || m.calls[0].query != "payment hold" {
				t.Fatalf("calls %+v, want one with the query and %d texts", m.calls, tt.wantSent)
			}
			want := retrieval.ModelRun{Provider: "fake", Model: "fake-cross-encoder", Outcome: rerank.OK}
			if res.Model == nil || *res.Model != want {
				t.Errorf("Model = %+v, want %+v", res.Model, want)
			}
		})
	}
}

// TestModelSentInFusedOrder: the texts go to the model in fused order, so
// the model's scores line up with the chunks.
func TestModelSentInFusedOrder(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	m := paymentModel()
	modelRetrieve(t, st, m, paymentQuery(nil))
	off := retrieve(t, st, paymentQuery(func(p *retrieval.Policy) { p.EnableRerank, p.Rerank = false, retrieval.RerankOverlap }))
	var want []string
	for _, s := range off.Chunks {
		want = append(want, s.Chunk.Text)
	}
	if !slices.Equal(m.calls[0].texts, want) {
		t.Fatalf("sent %q, want the fused texts %q", m.calls[0].texts, want)
	}
}

// wire is a result as a caller sees it, the model report left out.
func wire(t *testing.T, r retrieval.Result) string {
	t.Helper()
	chunks := make([]retrieval.ScoredJSON, len(r.Chunks))
	for i, c := range r.Chunks {
		chunks[i] = c.JSON(true)
	}
	b, err := json.Marshal(map[string]any{"results": chunks, "degraded": r.Degraded, "considered": r.Considered,
		"excluded_by_entitlement": r.ExcludedByEntitlement, "excluded_by_freshness": r.ExcludedByFreshness, "expansion": r.Expansion})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestModelShed: whatever goes wrong with the model, the result is byte for
// byte the same request's with enable_rerank false, and says what happened.
func TestModelShed(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	failing := func(err error) func(context.Context, []float64) ([]float64, error) {
		return func(context.Context, []float64) ([]float64, error) { return nil, err }
	}
	waitForBudget := func(ctx context.Context, _ []float64) ([]float64, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	// A reranker that waits out the budget and then answers with an error
	// of its own: still a timeout.
	lateOwnError := func(ctx context.Context, _ []float64) ([]float64, error) {
		<-ctx.Done()
		return nil, errors.New("gave up")
	}
	open, err := rerank.NewBreaker(&fakeModel{answer: failing(errors.New("down"))}, rerank.BreakerConfig{Failures: 1, CoolDown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Score(context.Background(), "q", []string{"x"}); err == nil || open.State() != "open" {
		t.Fatalf("breaker did not open: %v, %s", err, open.State())
	}
	tests := []struct {
		name    string
		m       rerank.Reranker
		edit    func(*retrieval.Policy)
		outcome rerank.Outcome
		errPart string
	}{
		{"error", &fakeModel{answer: failing(errors.New("model crashed"))}, nil, rerank.Error, "model crashed"},
		{"timeout", &fakeModel{answer: waitForBudget}, func(p *retrieval.Policy) { p.RerankBudgetMS = 1 }, rerank.Timeout, "deadline exceeded"},
		{"timeout with the reranker's own error", &fakeModel{answer: lateOwnError}, func(p *retrieval.Policy) { p.RerankBudgetMS = 1 }, rerank.Timeout, "gave up"},
		{"breaker open", open, nil, rerank.BreakerOpen, "circuit breaker is open"},
		{"too few scores", &fakeModel{answer: func(_ context.Context, s []float64) ([]float64, error) { return s[1:], nil }}, nil, rerank.Error, "4 scores for 5 chunks"},
		{"NaN score", &fakeModel{answer: func(_ context.Context, s []float64) ([]float64, error) { s[2] = math.NaN(); return s, nil }}, nil, rerank.Error, "score 2 is NaN"},
		{"infinite score", &fakeModel{answer: func(_ context.Context, s []float64) ([]float64, error) { s[0] = math.Inf(1); return s, nil }}, nil, rerank.Error, "score 0 is +Inf"},
		{"shed with collapse, blend and a small limit", &fakeModel{answer: failing(errors.New("x"))}, func(p *retrieval.Policy) {
			p.MaxChunksPerDoc, p.RerankBlend, p.Limit, p.RerankDepth = 1, 0.5, 3, 2
		}, rerank.Error, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := paymentQuery(tt.edit)
			res := modelRetrieve(t, st, tt.m, q)
			off := q
			off.Policy.EnableRerank = false
			want := modelRetrieve(t, st, tt.m, off)
			if got, want := wire(t, res), wire(t, want); got != want {
				t.Fatalf("shed result\n  %s\nwant the enable_rerank=false result\n  %s", got, want)
			}
			if !slices.Equal(res.Degraded, []string{"rerank"}) || len(res.Chunks) == 0 {
				t.Fatalf("degraded %q with %d chunks, want [rerank] and the fused chunks", res.Degraded, len(res.Chunks))
			}
			if want.Model != nil {
				t.Errorf("enable_rerank false reports a model run %+v", want.Model)
			}
			r := res.Model
			if r == nil || r.Outcome != tt.outcome || !r.Shed || r.Err == nil || !strings.Contains(r.Err.Error(), tt.errPart) || r.Provider != tt.m.Name() {
				t.Fatalf("Model = %+v, want outcome %s, shed, an error mentioning %q", r, tt.outcome, tt.errPart)
			}
		})
	}
}

// TestModelShedOnCancel: a caller that gave up sheds the stage too (the
// retrieval's own result is then the caller's to drop).
func TestModelShedOnCancel(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	q := paymentQuery(nil)
	rk := allSeeing(t, st, "wholesale", "payment hold")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := &fakeModel{answer: func(ctx context.Context, _ []float64) ([]float64, error) { return nil, ctx.Err() }}
	r := retrieval.New(st, retrieval.WithReranker(m))
	res := r.Finish(ctx, rk, terms("payment hold"), q)
	off := q
	off.Policy.EnableRerank = false
	if got, want := wire(t, res), wire(t, retrieval.Tail(rk, terms("payment hold"), nil, off.Policy)); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if res.Model == nil || !res.Model.Shed || res.Model.Outcome != rerank.Error {
		t.Fatalf("Model = %+v, want shed with outcome error", res.Model)
	}
}

// TestModelBudget: the model call runs under the policy's budget.
func TestModelBudget(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	for _, ms := range []int{7, 300, retrieval.MaxRerankBudgetMS} {
		m := paymentModel()
		modelRetrieve(t, st, m, paymentQuery(func(p *retrieval.Policy) { p.RerankBudgetMS = ms }))
		c := m.calls[0]
		if budget := time.Duration(ms) * time.Millisecond; !c.deadline || c.budget > budget {
			t.Errorf("budget %d ms: the call had deadline %v with %v left, want one within %v", ms, c.deadline, c.budget, budget)
		}
	}
	// A request deadline shorter than the budget still bounds the call.
	m := paymentModel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := retrieval.New(st, retrieval.WithReranker(m)).Retrieve(ctx, paymentQuery(nil)); err != nil {
		t.Fatal(err)
	}
	if c := m.calls[0]; !c.deadline || c.budget > 5*time.Millisecond {
		t.Errorf("the call had %v left, want at most the caller's 5ms", c.budget)
	}
}

// TestModelReserve: a query's Reserve ends the model call that long before
// the caller's deadline when that comes before the budget's, and when the
// deadline leaves no time at all the model is not called and the stage is
// shed as a timeout, exactly as enable_rerank false.
func TestModelReserve(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// An hour left, a minute of budget, 59m30s reserved: the call ends
	// 30s from now, at the deadline less the reserve.
	m := paymentModel()
	q := paymentQuery(func(p *retrieval.Policy) { p.RerankBudgetMS = retrieval.MaxRerankBudgetMS })
	q.Reserve = 59*time.Minute + 30*time.Second
	res, err := retrieval.New(st, retrieval.WithReranker(m)).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if m.callCount() != 1 || !m.calls[0].at.Equal(deadline.Add(-q.Reserve)) {
		t.Fatalf("calls %+v, want one ending at %v", m.calls, deadline.Add(-q.Reserve))
	}
	if len(res.Degraded) != 0 || res.Model.Shed {
		t.Fatalf("degraded %q, model %+v: want the model's scores", res.Degraded, res.Model)
	}

	// Two hours reserved of the hour left: not called, shed.
	m = paymentModel()
	q.Reserve = 2 * time.Hour
	res, err = retrieval.New(st, retrieval.WithReranker(m)).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	off := q
	off.Policy.EnableRerank = false
	if got, want := wire(t, res), wire(t, modelRetrieve(t, st, m, off)); got != want {
		t.Fatalf("no time left: result\n  %s\nwant the enable_rerank=false result\n  %s", got, want)
	}
	if m.callCount() != 0 || res.Model == nil || !res.Model.Shed || res.Model.Outcome != rerank.Timeout ||
		!errors.Is(res.Model.Err, context.DeadlineExceeded) || !strings.Contains(res.Model.Err.Error(), "leaves no time") {
		t.Fatalf("no time left: %d calls, model %+v; want none, shed as a timeout", m.callCount(), res.Model)
	}

	// Without a deadline the reserve changes nothing: the budget bounds
	// the call.
	m = paymentModel()
	if _, err := retrieval.New(st, retrieval.WithReranker(m)).Retrieve(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if m.callCount() != 1 || !m.calls[0].deadline {
		t.Fatalf("without a deadline: calls %+v, want one bounded by the budget", m.calls)
	}
}

func TestModelNotCalled(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	m := paymentModel()
	// Nothing fused: nothing to score, nothing shed.
	res := modelRetrieve(t, st, m, query(principal("wholesale", cordontype.Public), "zzyzx", func(p *retrieval.Policy) { p.Rerank = retrieval.RerankModel }))
	if len(res.Chunks) != 0 || len(res.Degraded) != 0 || m.callCount() != 0 {
		t.Fatalf("got %q degraded %q after %d calls, want nothing, not degraded, no call", resultIDs(res), res.Degraded, m.callCount())
	}
	if want := (retrieval.ModelRun{Provider: "fake", Model: "fake-cross-encoder"}); res.Model == nil || *res.Model != want {
		t.Errorf("Model = %+v, want %+v", res.Model, want)
	}
	// Rerank off: the model is not asked.
	res = modelRetrieve(t, st, m, paymentQuery(func(p *retrieval.Policy) { p.EnableRerank = false }))
	if m.callCount() != 0 || res.Model != nil || !slices.Equal(res.Degraded, []string{"rerank"}) {
		t.Fatalf("rerank off: %d calls, Model %+v, degraded %q", m.callCount(), res.Model, res.Degraded)
	}
	// The overlap kinds do not ask it either, and are unchanged by it.
	for _, kind := range []retrieval.RerankKind{retrieval.RerankOverlap, retrieval.RerankIDFOverlap} {
		q := paymentQuery(func(p *retrieval.Policy) { p.Rerank = kind })
		with := modelRetrieve(t, st, m, q)
		without := retrieve(t, st, q)
		if m.callCount() != 0 || with.Model != nil || wire(t, with) != wire(t, without) {
			t.Fatalf("%s: %d calls, Model %+v; with a reranker %s, without %s", kind, m.callCount(), with.Model, wire(t, with), wire(t, without))
		}
	}
}

// TestModelValidation: "model" needs a reranker; the pure Tail, which has
// none, sheds it.
func TestModelValidation(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	q := paymentQuery(nil)
	_, err := retrieval.New(st).Retrieve(context.Background(), q)
	if !errors.Is(err, retrieval.ErrInvalidPolicy) || !strings.Contains(err.Error(), "--reranker-url") {
		t.Fatalf("without a reranker: got %v, want ErrInvalidPolicy naming --reranker-url", err)
	}
	if err := retrieval.New(st, retrieval.WithReranker(paymentModel())).Validate(q.Policy); err != nil {
		t.Fatalf("with a reranker: %v", err)
	}
	q.Policy.RerankBudgetMS = 0
	if err := retrieval.New(st, retrieval.WithReranker(paymentModel())).Validate(q.Policy); !errors.Is(err, retrieval.ErrInvalidPolicy) {
		t.Fatalf("budget 0: got %v, want ErrInvalidPolicy", err)
	}
	rk := allSeeing(t, st, "wholesale", "payment hold")
	pol := paymentQuery(nil).Policy
	tail := retrieval.Tail(rk, terms("payment hold"), nil, pol)
	pol.EnableRerank = false
	if wire(t, tail) != wire(t, retrieval.Tail(rk, terms("payment hold"), nil, pol)) {
		t.Fatalf("Tail with rerank model is not the shed result")
	}
}

func TestModelDeterministic(t *testing.T) {
	st := newStore(t, corpus("wholesale")...)
	first := wire(t, modelRetrieve(t, st, paymentModel(), paymentQuery(func(p *retrieval.Policy) { p.RerankBlend = 0.3 })))
	for range 20 {
		if got := wire(t, modelRetrieve(t, st, paymentModel(), paymentQuery(func(p *retrieval.Policy) { p.RerankBlend = 0.3 }))); got != first {
			t.Fatalf("run differs:\n%s\n%s", got, first)
		}
	}
}
