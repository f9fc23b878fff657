package grounding

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

var chunks = []cordontype.Chunk{
	{ChunkID: "pay-001::0", DocID: "pay-001", Section: "Holds", StartChar: 10, EndChar: 60, Text: "Payment PMT-771 is on hold pending sanctions review."},
	{ChunkID: "pay-001::1", DocID: "pay-001", Section: "Release", StartChar: 70, EndChar: 120, Text: "Release requires two approvals from operations."},
	{ChunkID: "pay-002::0", DocID: "pay-002", Section: "body", StartChar: 0, EndChar: 18, Text: "hold, hold: pending"},
}

func TestCheckClaims(t *testing.T) {
	tests := []struct {
		name        string
		claim       string
		threshold   float64
		wantSup     bool
		wantChunk   string // "" when unsupported
		wantOverlap float64
	}{
		{"fully supported", "PMT-771 is on hold.", 0.6, true, "pay-001::0", 1},
		{"second chunk", "Release requires two approvals", 0.6, true, "pay-001::1", 1},
		{"invented claim", "The customer has been notified by email", 0.6, false, "", 0},
		{"tie goes to the earliest chunk", "hold pending", 0.6, true, "pay-001::0", 1},
		{"case and punctuation ignored", "HOLD—PENDING!", 0.6, true, "pay-001::0", 1},
		{"below threshold reports the best overlap", "payment release wire", 0.6, false, "", 1.0 / 3},
		{"at threshold is supported", "payment release wire", 1.0 / 3, true, "pay-001::0", 1.0 / 3},
		{"3 of 5 meets 0.6", "payment hold review wire cable", 0.6, true, "pay-001::0", 0.6},
		{"2 of 4 misses 0.6", "payment hold wire cable", 0.6, false, "", 0.5},
		{"threshold 0 still needs overlap > 0", "zebra", 0, false, "", 0},
		{"threshold 0 with overlap", "zebra hold", 0, true, "pay-001::0", 0.5},
		{"threshold 1", "hold zebra", 1, false, "", 0.5},
		{"repeated claim tokens count once", "hold hold hold zebra", 0.5, true, "pay-001::0", 0.5},
		{"no tokens", "?!", 0.6, false, "", 0},
		{"empty claim", "", 0, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Check([]string{tt.claim}, chunks, tt.threshold)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			c := rep.Claims[0]
			if c.Claim != tt.claim || c.Supported != tt.wantSup || c.Overlap != tt.wantOverlap {
				t.Errorf("got claim %q supported %v overlap %v, want %q %v %v", c.Claim, c.Supported, c.Overlap, tt.claim, tt.wantSup, tt.wantOverlap)
			}
			switch {
			case tt.wantChunk == "" && c.Citation != nil:
				t.Errorf("citation = %+v, want none", c.Citation)
			case tt.wantChunk != "" && (c.Citation == nil || c.Citation.ChunkID != tt.wantChunk):
				t.Errorf("citation = %+v, want chunk %s", c.Citation, tt.wantChunk)
			}
			if rep.IsGrounded != tt.wantSup {
				t.Errorf("is_grounded = %v, want %v", rep.IsGrounded, tt.wantSup)
			}
		})
	}
}

func TestCheckReport(t *testing.T) {
	two, three := 2.0, 3.0
	tests := []struct {
		name         string
		claims       []string
		retrieved    []cordontype.Chunk
		wantCoverage float64
		wantGrounded bool
	}{
		{"no claims", nil, chunks, 1, true},
		{"no claims, nothing retrieved", []string{}, nil, 1, true},
		{"nothing retrieved", []string{"PMT-771 is on hold"}, nil, 0, false},
		{"two of three", []string{"PMT-771 is on hold", "Release requires two approvals", "The customer was emailed"}, chunks, two / three, false},
		{"all supported", []string{"PMT-771 is on hold", "Release requires two approvals"}, chunks, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Check(tt.claims, tt.retrieved, DefaultThreshold)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if rep.Coverage != tt.wantCoverage || rep.IsGrounded != tt.wantGrounded {
				t.Errorf("coverage %v grounded %v, want %v %v", rep.Coverage, rep.IsGrounded, tt.wantCoverage, tt.wantGrounded)
			}
			if len(rep.Claims) != len(tt.claims) {
				t.Errorf("got %d claim verdicts, want %d", len(rep.Claims), len(tt.claims))
			}
		})
	}
}

func TestCheckCitation(t *testing.T) {
	rep, err := Check([]string{"Release requires two approvals"}, chunks, DefaultThreshold)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	want := &Citation{ChunkID: "pay-001::1", DocID: "pay-001", Section: "Release", StartChar: 70, EndChar: 120}
	if got := rep.Claims[0].Citation; !reflect.DeepEqual(got, want) {
		t.Errorf("citation = %+v, want %+v", got, want)
	}
	if DefaultThreshold != 0.6 {
		t.Errorf("DefaultThreshold = %v, want 0.6", DefaultThreshold)
	}
}

func TestCheckInvalidThreshold(t *testing.T) {
	for _, th := range []float64{-0.01, 1.01, math.NaN(), math.Inf(1)} {
		if _, err := Check([]string{"x"}, chunks, th); !errors.Is(err, ErrInvalidThreshold) {
			t.Errorf("Check(threshold=%v) error = %v, want ErrInvalidThreshold", th, err)
		}
	}
}

func TestSplitClaims(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   []string
	}{
		{"three terminators", "A is held. B is released! Is C next?", []string{"A is held.", "B is released!", "Is C next?"}},
		{"decimal point is not a boundary", "Version 1.2 is out. Next", []string{"Version 1.2 is out.", "Next"}},
		{"ellipsis splits after the last dot", "Hello...  world", []string{"Hello...", "world"}},
		{"abbreviation with inner dot", "e.g. this", []string{"e.g.", "this"}},
		{"stacked terminators", "Why?! Because.", []string{"Why?!", "Because."}},
		{"newline and no-break space are whitespace", "One.\nTwo.\u00a0Three", []string{"One.", "Two.", "Three"}},
		{"no terminator", "just one claim", []string{"just one claim"}},
		{"ideographic full stop is not a terminator", "東京。大阪", []string{"東京。大阪"}},
		{"empty", "", nil},
		{"whitespace only", " \n\t", nil},
		{"terminators only", ". ! ?", []string{".", "!", "?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SplitClaims(tt.answer); !slices.Equal(got, tt.want) {
				t.Errorf("SplitClaims(%q) = %q, want %q", tt.answer, got, tt.want)
			}
		})
	}
}
