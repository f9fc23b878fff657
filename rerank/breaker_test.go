package rerank_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/rerank"
)

// fake is a Reranker whose next answers are scripted: fail makes it fail,
// block (when set) holds each call until closed.
type fake struct {
	calls atomic.Int32
	fail  atomic.Bool
	block chan struct{}
}

func (f *fake) Name() string  { return "fake" }
func (f *fake) Model() string { return "m" }
func (f *fake) Score(ctx context.Context, _ string, texts []string) ([]float64, error) {
	f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail.Load() {
		return nil, errors.New("model down")
	}
	return make([]float64, len(texts)), nil
}

// waitState polls b until it reports want (the cool-down runs on the
// breaker's own clock); it fails the test after a generous bound.
func waitState(t *testing.T, b *rerank.Breaker, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("breaker state %q, want %q", b.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	f := &fake{}
	var changes []string
	var mu sync.Mutex
	b, err := rerank.NewBreaker(f, rerank.BreakerConfig{Failures: 3, CoolDown: 30 * time.Millisecond,
		OnStateChange: func(from, to string) { mu.Lock(); changes = append(changes, from+"->"+to); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := []string{"a"}
	f.fail.Store(true)
	for i := range 3 {
		if _, err := b.Score(ctx, "q", in); err == nil || errors.Is(err, rerank.ErrBreakerOpen) {
			t.Fatalf("failure %d: got %v, want the model's error", i+1, err)
		}
	}
	if b.State() != "open" {
		t.Fatalf("after 3 failures the breaker is %q, want open", b.State())
	}
	// Open: refused at once, the model is not called.
	_, err = b.Score(ctx, "q", in)
	if !errors.Is(err, rerank.ErrBreakerOpen) || rerank.OutcomeOf(err) != rerank.BreakerOpen || f.calls.Load() != 3 {
		t.Fatalf("open: got %v after %d calls, want ErrBreakerOpen without a call", err, f.calls.Load())
	}
	// Half-open: a failing probe opens it again.
	waitState(t, b, "half-open")
	if _, err := b.Score(ctx, "q", in); err == nil || errors.Is(err, rerank.ErrBreakerOpen) || f.calls.Load() != 4 {
		t.Fatalf("probe: got %v after %d calls, want the model's error from one probe", err, f.calls.Load())
	}
	if b.State() != "open" {
		t.Fatalf("after a failed probe the breaker is %q, want open", b.State())
	}
	// Half-open again: a good probe closes it.
	waitState(t, b, "half-open")
	f.fail.Store(false)
	if got, err := b.Score(ctx, "q", in); err != nil || len(got) != 1 {
		t.Fatalf("probe: got %v, %v, want scores", got, err)
	}
	if b.State() != "closed" {
		t.Fatalf("after a good probe the breaker is %q, want closed", b.State())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if !slices.Equal(changes, want) {
		t.Errorf("state changes %v, want %v", changes, want)
	}
}

// TestBreakerSuccessResets: failures must be consecutive.
func TestBreakerSuccessResets(t *testing.T) {
	f := &fake{}
	b, err := rerank.NewBreaker(f, rerank.BreakerConfig{Failures: 2, CoolDown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, fail := range []bool{true, false, true, false, true} {
		f.fail.Store(fail)
		_, _ = b.Score(context.Background(), "q", []string{"a"})
		if b.State() != "closed" {
			t.Fatalf("call %d: breaker %q, want closed (no two failures in a row)", i+1, b.State())
		}
	}
}

// TestBreakerOneProbe: while the half-open probe is in flight, other calls
// are refused.
func TestBreakerOneProbe(t *testing.T) {
	f := &fake{}
	b, err := rerank.NewBreaker(f, rerank.BreakerConfig{Failures: 1, CoolDown: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.fail.Store(true)
	_, _ = b.Score(context.Background(), "q", []string{"a"})
	waitState(t, b, "half-open")
	f.fail.Store(false)
	f.block = make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.Score(context.Background(), "q", []string{"a"})
		done <- err
	}()
	for f.calls.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Score(context.Background(), "q", []string{"a"}); !errors.Is(err, rerank.ErrBreakerOpen) {
		t.Fatalf("second call during the probe: got %v, want ErrBreakerOpen", err)
	}
	close(f.block)
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if b.State() != "closed" {
		t.Fatalf("breaker %q after the probe, want closed", b.State())
	}
}

// TestBreakerCounts: deadlines count as failures, cancellations and empty
// calls do not.
func TestBreakerCounts(t *testing.T) {
	f := &fake{block: make(chan struct{})}
	b, err := rerank.NewBreaker(f, rerank.BreakerConfig{Failures: 2, CoolDown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.Score(ctx, "q", []string{"a"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if _, err := b.Score(context.Background(), "q", nil); err != nil {
			t.Fatalf("no texts: %v", err)
		}
	}
	if b.State() != "closed" || f.calls.Load() != 3 {
		t.Fatalf("breaker %q after %d calls, want closed after 3 (cancellations do not count, empty calls send nothing)", b.State(), f.calls.Load())
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, err := b.Score(ctx, "q", []string{"a"})
		cancel()
		if rerank.OutcomeOf(err) != rerank.Timeout {
			t.Fatalf("got %v, want a timeout", err)
		}
	}
	if b.State() != "open" {
		t.Fatalf("breaker %q after 2 timeouts, want open", b.State())
	}
	if b.Name() != "fake" || b.Model() != "m" {
		t.Errorf("Name, Model = %q, %q", b.Name(), b.Model())
	}
}

func TestNewBreakerRejects(t *testing.T) {
	for _, cfg := range []rerank.BreakerConfig{{Failures: -1}, {CoolDown: -time.Second}} {
		if _, err := rerank.NewBreaker(&fake{}, cfg); !errors.Is(err, rerank.ErrConfig) {
			t.Errorf("NewBreaker(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestObserve(t *testing.T) {
	f := &fake{}
	var got []rerank.Outcome
	var mu sync.Mutex
	r := rerank.Observe(f, func(o rerank.Outcome, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("negative duration %v", d)
		}
		got = append(got, o)
	})
	_, _ = r.Score(context.Background(), "q", []string{"a"})
	f.fail.Store(true)
	_, _ = r.Score(context.Background(), "q", []string{"a"})
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	f.block = make(chan struct{})
	_, _ = r.Score(ctx, "q", []string{"a"})
	if want := []rerank.Outcome{rerank.OK, rerank.Error, rerank.Timeout}; !slices.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if r.Name() != "fake" || r.Model() != "m" {
		t.Errorf("Observe hides Name or Model: %q %q", r.Name(), r.Model())
	}
}
