package hashembed

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
)

// The expected buckets were computed independently with Python's
// hashlib.blake2b(token, digest_size=8); the "trunc512" columns are what a
// truncated BLAKE2b-512 would give instead, which SPEC section 3 rules out.
func TestBucket(t *testing.T) {
	tests := []struct {
		name      string
		token     string
		dims      int
		wantIndex int
		wantSign  int32
	}{
		{"pmt", "pmt", 256, 153, -1},
		{"771", "771", 256, 16, 1},
		{"hold", "hold", 256, 177, 1},
		{"tx4096", "tx4096", 256, 1, 1},
		{"non-ASCII token hashed as UTF-8", "ünïcödé", 256, 221, 1},
		{"CJK token", "東京", 256, 202, -1},
		{"empty string", "", 256, 87, 1},
		{"dims 7", "pmt", 7, 4, -1},
		{"dims 16000", "pmt", 16000, 14745, -1},
		{"dims 1", "hold", 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, s := Bucket(tt.token, tt.dims)
			if i != tt.wantIndex || s != tt.wantSign {
				t.Errorf("Bucket(%q, %d) = (%d, %d), want (%d, %d)", tt.token, tt.dims, i, s, tt.wantIndex, tt.wantSign)
			}
		})
	}
}

func TestVector(t *testing.T) {
	tests := []struct {
		name   string
		tokens []string
		dims   int
		want   map[int]int32 // non-zero components
	}{
		{"empty", nil, 256, map[int]int32{}},
		{"repetition counts", []string{"pmt", "pmt", "771"}, 256, map[int]int32{153: -2, 16: 1}},
		{"signed collision cancels", []string{"pmt", "hold"}, 7, map[int]int32{}},
		{"collision after cancel", []string{"pmt", "771", "hold", "hold"}, 7, map[int]int32{0: 1, 4: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Vector(tt.tokens, tt.dims)
			if len(v) != tt.dims {
				t.Fatalf("len(Vector) = %d, want %d", len(v), tt.dims)
			}
			for i, x := range v {
				if x != tt.want[i] {
					t.Errorf("Vector(%q)[%d] = %d, want %d", tt.tokens, i, x, tt.want[i])
				}
			}
		})
	}
}

func TestNormSqAndDot(t *testing.T) {
	tests := []struct {
		name    string
		q, d    []int32
		wantDot int64
		wantQN  int64
	}{
		{"zero", []int32{0, 0}, []int32{1, 2}, 0, 0},
		{"mixed signs", []int32{1, -2, 3}, []int32{-1, 2, 2}, 1, 14},
		{"no int32 overflow", []int32{1 << 24, 1 << 24}, []int32{1 << 24, -(1 << 23)}, 1<<48 - 1<<47, 1 << 49},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Dot(tt.q, tt.d); got != tt.wantDot {
				t.Errorf("Dot = %d, want %d", got, tt.wantDot)
			}
			if got := NormSq(tt.q); got != tt.wantQN {
				t.Errorf("NormSq = %d, want %d", got, tt.wantQN)
			}
		})
	}
}

func TestCosine(t *testing.T) {
	tests := []struct {
		name          string
		dot, qn, dn   int64
		want          float64
		wantBitsExact bool
	}{
		{"zero query norm", 0, 0, 5, 0, true},
		{"zero document norm", 0, 5, 0, 0, true},
		{"orthogonal", 0, 2, 3, 0, true},
		// sqrt(3)*sqrt(3) rounds below 3, so the SPEC formula gives a value
		// one ulp above 1; sqrt(3*3) would give exactly 1.
		{"product of norms taken first", 3, 3, 3, 1.0000000000000002, true},
		{"negative", -2, 4, 4, -0.5, true},
		{"half", 1, 1, 4, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cosine(tt.dot, tt.qn, tt.dn)
			if got != tt.want {
				t.Errorf("Cosine(%d, %d, %d) = %v, want %v", tt.dot, tt.qn, tt.dn, got, tt.want)
			}
		})
	}
}

// TestCosineMatchesSpecFormula checks Cosine against SPEC section 3 written out
// on real vectors: float64(dot) / (sqrt(float64(qn)) * sqrt(float64(dn))).
func TestCosineMatchesSpecFormula(t *testing.T) {
	texts := []string{
		"payment hold release rules", "PMT-771 hold reason", "the quick brown fox", "hold hold hold",
		"sanctions screening alert for wire transfer", "release requires two approvals",
	}
	for _, a := range texts {
		for _, b := range texts {
			t.Run(a+"|"+b, func(t *testing.T) {
				q := Vector(analysis.Tokenize(a), DefaultDims)
				d := Vector(analysis.Tokenize(b), DefaultDims)
				dot, qn, dn := Dot(q, d), NormSq(q), NormSq(d)
				den := float64(math.Sqrt(float64(qn)) * math.Sqrt(float64(dn)))
				want := float64(dot) / den
				if got := Cosine(dot, qn, dn); got != want {
					t.Errorf("Cosine = %v, want %v", got, want)
				}
			})
		}
	}
}

// TestSignedHashingAllowsNonPositiveSimilarity is invariant 8: across 40 pairs of
// unrelated texts (no shared token), signed hashing makes some similarities
// non-positive. The texts are long enough that collisions are certain in 256
// dims, so unsigned hashing would make every one of them positive; with signs,
// some are strictly negative.
func TestSignedHashingAllowsNonPositiveSimilarity(t *testing.T) {
	nonPositive, negative := 0, 0
	for p := range 40 {
		var a, b []string
		for j := range 150 {
			a = append(a, fmt.Sprintf("alpha%dx%d", p, j))
			b = append(b, fmt.Sprintf("beta%dy%d", p, j))
		}
		q, d := Vector(a, DefaultDims), Vector(b, DefaultDims)
		c := Cosine(Dot(q, d), NormSq(q), NormSq(d))
		if c <= 0 {
			nonPositive++
		}
		if c < 0 {
			negative++
		}
	}
	if nonPositive == 0 {
		t.Errorf("got 0 non-positive similarities over 40 unrelated pairs, want at least 1")
	}
	if negative == 0 {
		t.Errorf("got 0 negative similarities over 40 unrelated pairs, want at least 1 (are the signs applied?)")
	}
}

func TestValidateDims(t *testing.T) {
	tests := []struct {
		name    string
		dims    int
		wantErr bool
	}{
		{"zero", 0, true},
		{"negative", -1, true},
		{"one", 1, false},
		{"default", DefaultDims, false},
		{"max", MaxDims, false},
		{"above max", MaxDims + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDims(tt.dims)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalidDims)) {
				t.Errorf("ValidateDims(%d) = %v, want ErrInvalidDims %v", tt.dims, err, tt.wantErr)
			}
		})
	}
	if DefaultDims != 256 || MaxDims != 16000 {
		t.Errorf("DefaultDims, MaxDims = %d, %d, want 256, 16000", DefaultDims, MaxDims)
	}
}

func TestVectorDeterministic(t *testing.T) {
	toks := analysis.Tokenize("Payment PMT-771 is on hold pending sanctions review")
	first := Vector(toks, DefaultDims)
	for range 100 {
		if v := Vector(toks, DefaultDims); !slices.Equal(v, first) {
			t.Fatalf("Vector changed between runs: got %v, want %v", v, first)
		}
	}
}

func BenchmarkVector(b *testing.B) {
	toks := analysis.Tokenize("Payment PMT-771 is on hold pending sanctions review; release requires two approvals from operations and compliance before cut-off.")
	b.ReportAllocs()
	for b.Loop() {
		Vector(toks, DefaultDims)
	}
}

func TestCacheMatchesBucket(t *testing.T) {
	for _, dims := range []int{1, 7, 256, 16000} {
		// 1000 entries: the first 1000 distinct tokens are memoised, the
		// other 700 hashed each time.
		c := NewCache(dims, 1000)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 3000 {
					tok := fmt.Sprintf("t%d", (i+g*311)%1700) // repeats hit the memo
					wi, ws := Bucket(tok, dims)
					gi, gs := c.Bucket(tok)
					if gi != wi || gs != ws {
						t.Errorf("dims %d, %q: cache (%d, %d), Bucket (%d, %d)", dims, tok, gi, gs, wi, ws)
						return
					}
				}
			})
		}
		wg.Wait()
		if n := c.entries.Load(); n != 1000 {
			t.Fatalf("dims %d: %d entries memoised, want the bound, 1000", dims, n)
		}
		var held int
		for i := range c.shards {
			held += len(c.shards[i].m)
		}
		if held != 1000 {
			t.Fatalf("dims %d: shards hold %d tokens, want 1000", dims, held)
		}
	}
	long := NewCache(256, 10)
	tok := strings.Repeat("x", MaxCachedTokenBytes+1)
	gi, gs := long.Bucket(tok)
	if wi, ws := Bucket(tok, 256); gi != wi || gs != ws {
		t.Fatalf("long token: cache (%d, %d), Bucket (%d, %d)", gi, gs, wi, ws)
	}
	long.Bucket(tok[:MaxCachedTokenBytes])
	if n := long.entries.Load(); n != 1 {
		t.Fatalf("%d entries after a token of %d bytes and one of %d, want 1 (the longer one is not memoised)", n, MaxCachedTokenBytes+1, MaxCachedTokenBytes)
	}
	if a, b := Shared(256), Shared(256); a != b || a == Shared(255) {
		t.Fatal("Shared must give one cache per dimension count")
	}
}
