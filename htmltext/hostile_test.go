package htmltext

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// fill repeats unit after prefix up to just under MaxBytes.
func fill(prefix, unit string) string {
	return prefix + strings.Repeat(unit, (MaxBytes-len(prefix)-1024)/len(unit))
}

// Hostile HTML, built so that the parser holds hundreds of elements open
// around every tag (its cost is tags times depth: minutes for 10 MiB), is
// refused by the pre-pass with ErrTooComplex or ErrTooDeep, allocating a
// few MiB rather than the hundreds the parse would. Some inputs misnest
// tags so that a naive count of start and end tags would see them flat.
func TestConvertRefusesHostile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"list items 500 deep", fill(strings.Repeat("<ul><li>", 250), "<li>x"), ErrTooComplex},
		{"paragraphs under 500 divs", fill(strings.Repeat("<div>", 500), "<p>x"), ErrTooComplex},
		{"cells in 120 nested tables", fill(strings.Repeat("<table><tr><td>", 120), "<td>x"), ErrTooComplex},
		{"divs 200 deep, paragraphs", fill(strings.Repeat("<div>", 200), "<p>x"), ErrTooComplex},
		{"stray end tags", fill(strings.Repeat("<div></x></y>", 450), "<li>x"), ErrTooComplex},
		{"end tag behind a block", fill(strings.Repeat("<span><div></span>", 240), "<li>x"), ErrTooComplex},
		{"end tag outside a table", fill(strings.Repeat("<div><table><td></div>", 100), "<li>x"), ErrTooComplex},
		{"distinct formatting reopened", fill(func() string {
			var b strings.Builder
			for i := range 400 {
				b.WriteString("<div><b id=" + strings.Repeat("i", i) + "></div>x")
			}
			return b.String()
		}(), "<li>x"), ErrTooComplex},
		{"tags in a foreign style", fill("<svg><style>"+strings.Repeat("<div>", 400), "<li>x"), ErrTooComplex},
		{"heading closed by another level", fill("<h2></h3>"+strings.Repeat("<span>", 400)+"</h2>", "<li>x"), ErrTooComplex},
		{"nested formatting", fill("", "<b id=1><i class=2>x"), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Convert(tt.in)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tt.want) || !errors.Is(err, cordontype.ErrInvalid) {
				t.Fatalf("got %v, want %v (and cordontype.ErrInvalid)", err, tt.want)
			}
			// The parse of these allocates hundreds of MiB; the pre-pass
			// a few.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Fatalf("refusing allocated %d MiB, want at most 32", alloc>>20)
			}
		})
	}
}

// The pre-pass's depth is at least the parser's (the tree's depth) for the
// ordinary pages, and the limits leave them room: at most half of MaxWork.
func TestPrecheckOrdinaryHeadroom(t *testing.T) {
	for _, p := range ordinaryPages() {
		work, depth, err := measure(context.Background(), p.in, MaxDepth, MaxWork)
		if err != nil || work > MaxWork/2 {
			t.Errorf("%s: work %d (limit %d), %v", p.name, work, MaxWork, err)
		}
		if d := treeDepth(t, p.in); depth < d {
			t.Errorf("%s: pre-pass depth %d, below the parser's %d", p.name, depth, d)
		}
	}
}

// countdown is a context whose Err is context.Canceled from its n-th call
// on, counting the calls.
type countdown struct {
	context.Context
	n, calls atomic.Int64
}

func (c *countdown) Err() error {
	if c.calls.Add(1) > c.n.Load() {
		return context.Canceled
	}
	return nil
}

// ConvertContext stops once its context is done, in the pre-pass, in the
// parse and in the walk alike, with the context's error (not a refusal of
// the html).
func TestConvertContextCanceled(t *testing.T) {
	in := strings.Repeat(guidePage, 2000)
	never := &countdown{Context: context.Background()}
	never.n.Store(1 << 62)
	want, err := ConvertContext(never, in)
	if err != nil {
		t.Fatal(err)
	}
	total := never.calls.Load()
	if total < 10 {
		t.Fatalf("the context was looked at %d times, want many", total)
	}
	for _, n := range []int64{0, 1, total / 4, total / 2, 3 * total / 4, total - 1} {
		ctx := &countdown{Context: context.Background()}
		ctx.n.Store(n)
		got, err := ConvertContext(ctx, in)
		if !errors.Is(err, context.Canceled) || errors.Is(err, cordontype.ErrInvalid) || got != (Result{}) {
			t.Fatalf("done after %d of %d looks: got %d bytes, %v; want context.Canceled", n, total, len(got.Text), err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ConvertContext(ctx, fill(strings.Repeat("<ul><li>", 250), "<li>x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if got, err := ConvertContext(context.Background(), in); err != nil || got != want {
		t.Fatalf("got %d bytes, %v; want the same as before", len(got.Text), err)
	}
}
