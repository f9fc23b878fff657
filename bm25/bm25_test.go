package bm25

import (
	"errors"
	"math"
	"runtime"
	"testing"
)

// TestIDFDesignNotes checks the worked numbers of the design notes: N = 12,
// a rare token with df = 1 gets ln(1 + 11.5/1.5) ≈ 2.159 and a common one with
// df = 10 gets ln(1 + 2.5/10.5) ≈ 0.213 (the notes truncate to 3 decimals).
func TestIDFDesignNotes(t *testing.T) {
	tests := []struct {
		name      string
		n, df     int64
		num, den  float64 // the IDF argument is num/den + 1
		wantMilli float64 // floor(idf * 1000)
	}{
		{"rare tx4096", 12, 1, 11.5, 1.5, 2159},
		{"common network", 12, 10, 2.5, 10.5, 213},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := IDF(tt.n, tt.df)
			if m := math.Floor(got * 1000); m != tt.wantMilli {
				t.Errorf("floor(IDF(%d, %d) * 1000) = %v (IDF %v), want %v", tt.n, tt.df, m, got, tt.wantMilli)
			}
			// On amd64, math.Log is the reference for every IDF argument.
			if runtime.GOARCH == "amd64" {
				num, den := tt.num, tt.den
				if want := math.Log(num/den + 1); got != want {
					t.Errorf("IDF(%d, %d) = %v, want math.Log = %v", tt.n, tt.df, got, want)
				}
			}
		})
	}
	// The 10x weight gap of the notes.
	if r := IDF(12, 1) / IDF(12, 10); math.Floor(r) != 10 {
		t.Errorf("IDF(12,1)/IDF(12,10) = %v, want about 10", r)
	}
}

func TestIDFGuards(t *testing.T) {
	tests := []struct {
		name  string
		n, df int64
		want  float64
	}{
		{"empty tenant", 0, 0, 0},
		{"one chunk, term absent", 1, 0, Log(float64(1.5/0.5) + 1)},
		{"one chunk holding the term", 1, 1, Log(float64(0.5/1.5) + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IDF(tt.n, tt.df); got != tt.want {
				t.Errorf("IDF(%d, %d) = %v, want %v", tt.n, tt.df, got, tt.want)
			}
		})
	}
}

// TestIDFNeverNegative is invariant 4: a term in every chunk (df = N), or in
// most chunks, still has IDF >= 0; with the +1 it is even strictly positive, so
// a chunk holding the term never ranks below one that does not.
func TestIDFNeverNegative(t *testing.T) {
	for n := int64(1); n <= 3000; n++ {
		for _, df := range []int64{0, 1, n / 2, n/2 + 1, n - 1, n} {
			if df < 0 || df > n {
				continue
			}
			if got := IDF(n, df); !(got >= 0) {
				t.Fatalf("IDF(%d, %d) = %v, want >= 0", n, df, got)
			}
		}
		if got := IDF(n, n); !(got > 0) {
			t.Fatalf("IDF(%d, %d) = %v, want > 0 for a term in every chunk", n, n, got)
		}
	}
}

// TestTermSaturation is invariant 5, with b = 0 to isolate term frequency:
// 9 -> 10 occurrences adds less than 1 -> 2, and the factor never reaches
// k1 + 1 = 2.5.
func TestTermSaturation(t *testing.T) {
	p := Params{K1: 1.5, B: 0}
	f := func(tf int64) float64 { return Term(1, tf, 100, 20, p) }
	// With b = 0 the denominator is tf + 1.5: f(tf) = 2.5 tf / (tf + 1.5).
	tests := []struct {
		name string
		tf   int64
		num  float64
		den  float64
	}{
		{"tf 1", 1, 2.5, 2.5},
		{"tf 2", 2, 5, 3.5},
		{"tf 9", 9, 22.5, 10.5},
		{"tf 10", 10, 25, 11.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			num, den := tt.num, tt.den
			if got, want := f(tt.tf), num/den; got != want {
				t.Errorf("Term(tf=%d, b=0) = %v, want %v", tt.tf, got, want)
			}
		})
	}
	low, high := f(2)-f(1), f(10)-f(9)
	if !(high < low) {
		t.Errorf("increment 9->10 = %v, increment 1->2 = %v, want the first smaller", high, low)
	}
	if math.Floor(low*1e6) != 428571 || math.Floor(high*1e6) != 31055 {
		t.Errorf("increments = %v, %v, want 0.428571..., 0.031055...", low, high)
	}
	if c := f(1_000_000_000); !(c < 2.5 && c > 2.49) {
		t.Errorf("Term(tf=1e9) = %v, want just below the ceiling k1+1 = 2.5", c)
	}
}

// TestTermDesignNotes: tf = 1 in a chunk of average length gives the factor
// 1.0 exactly, so the term contributes its IDF.
func TestTermDesignNotes(t *testing.T) {
	if got := Term(1, 1, 22, 22, DefaultParams()); got != 1 {
		t.Errorf("Term(idf=1, tf=1, dl=avgdl) = %v, want 1", got)
	}
	idf := IDF(12, 1)
	if got := Term(idf, 1, 22, 22, DefaultParams()); math.Floor(got*1000) != 2159 {
		t.Errorf("Term(IDF(12,1), tf=1, dl=avgdl) = %v, want about 2.159", got)
	}
}

func TestTermLengthNormalisation(t *testing.T) {
	p := DefaultParams()
	short, avg, long := Term(1, 1, 11, 22, p), Term(1, 1, 22, 22, p), Term(1, 1, 44, 22, p)
	if !(short > avg && avg > long) {
		t.Errorf("Term for dl 11, 22, 44 (avgdl 22) = %v, %v, %v, want strictly decreasing", short, avg, long)
	}
	p.B = 0
	if a, b := Term(1, 1, 11, 22, p), Term(1, 1, 44, 22, p); a != b {
		t.Errorf("with b = 0, Term for dl 11 and 44 = %v, %v, want equal", a, b)
	}
	p = Params{K1: 0, B: 0.75}
	if got := Term(2.5, 7, 11, 22, p); got != 2.5 {
		t.Errorf("with k1 = 0, Term = %v, want the IDF 2.5", got)
	}
}

// specTerm is SPEC section 4 written out: denom = tf + k1 * (1 - b + b * dl /
// avgdl) left to right, then idf * (tf * (k1 + 1)) / denom.
func specTerm(idf float64, tf, dl int64, avgdl float64, k1, b float64) float64 {
	ftf := float64(tf)
	bdl := float64(b * float64(dl))
	inner := float64(float64(1-b) + float64(bdl/avgdl))
	denom := float64(ftf + float64(k1*inner))
	return float64(float64(idf*float64(ftf*float64(k1+1))) / denom)
}

// TestTermEvaluationOrder checks Term against the formula on inputs where the
// order of evaluation changes the result: (b*dl)/avgdl differs from
// b*(dl/avgdl) in the last bit.
func TestTermEvaluationOrder(t *testing.T) {
	found := 0
	for dl := int64(1); dl < 400 && found < 20; dl++ {
		for _, avgdl := range []float64{3.3, 7.1, 13.7, 22.9, 101.3} {
			for _, b := range []float64{0.75, 0.3, 0.9} {
				a1 := float64(float64(b*float64(dl)) / avgdl)
				a2 := float64(b * float64(float64(dl)/avgdl))
				if a1 == a2 {
					continue
				}
				found++
				idf := IDF(1000, dl%50)
				if got, want := Term(idf, 3, dl, avgdl, Params{K1: 1.2, B: b}), specTerm(idf, 3, dl, avgdl, 1.2, b); got != want {
					t.Errorf("Term(dl=%d, avgdl=%v, b=%v) = %v, want %v", dl, avgdl, b, got, want)
				}
			}
		}
	}
	if found == 0 {
		t.Fatalf("found no input where the evaluation order matters; the test cannot fail")
	}
}

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Params
		wantErr bool
	}{
		{"defaults", DefaultParams(), false},
		{"k1 zero", Params{0, 0.5}, false},
		{"b zero", Params{1.2, 0}, false},
		{"b one", Params{1.2, 1}, false},
		{"k1 negative", Params{-0.1, 0.5}, true},
		{"k1 NaN", Params{math.NaN(), 0.5}, true},
		{"k1 infinite", Params{math.Inf(1), 0.5}, true},
		{"b negative", Params{1.2, -0.01}, true},
		{"b above one", Params{1.2, 1.01}, true},
		{"b NaN", Params{1.2, math.NaN()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalidParams)) {
				t.Errorf("Validate(%+v) = %v, want ErrInvalidParams %v", tt.p, err, tt.wantErr)
			}
		})
	}
	if d := DefaultParams(); d.K1 != 1.5 || d.B != 0.75 {
		t.Errorf("DefaultParams() = %+v, want {1.5 0.75}", d)
	}
}

func TestAvgDL(t *testing.T) {
	tests := []struct {
		name   string
		sum, n int64
		want   float64
	}{
		{"empty tenant", 0, 0, 0},
		{"exact", 10, 4, 2.5},
		{"thirds", 10, 3, 10.0 / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AvgDL(tt.sum, tt.n); got != tt.want {
				t.Errorf("AvgDL(%d, %d) = %v, want %v", tt.sum, tt.n, got, tt.want)
			}
		})
	}
}

func BenchmarkTerm(b *testing.B) {
	p := DefaultParams()
	idf := IDF(10_000, 37)
	b.ReportAllocs()
	var s float64
	for i := 0; b.Loop(); i++ {
		s += Term(idf, int64(i%7+1), int64(i%300+1), 143.7, p)
	}
	_ = s
}

func TestScopeEntitledFailsClosed(t *testing.T) {
	for _, tt := range []struct {
		s    Scope
		want bool
	}{{ScopeEntitled, true}, {ScopeTenant, false}, {"", true}, {"Tenant", true}} {
		if got := tt.s.Entitled(); got != tt.want {
			t.Errorf("Scope(%q).Entitled() = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestRSJ: the Robertson-Spärck Jones weight, floored, against math.Log on
// amd64 and the plus-one IDF less its +1 inside the log.
func TestRSJ(t *testing.T) {
	tests := []struct {
		name  string
		n, df int64
		want  float64
	}{
		{"empty tenant", 0, 0, 0},
		{"in every chunk", 10, 10, RSJFloor},
		{"in half the chunks", 10, 5, RSJFloor}, // ln(5.5/5.5) = 0
		{"just under half", 11, 5, math.Log(6.5 / 5.5)},
		{"rare", 1000, 1, math.Log(999.5 / 1.5)},
		{"unseen", 1000, 0, math.Log(1000.5 / 0.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RSJ(tt.n, tt.df); got != tt.want && runtime.GOARCH == "amd64" {
				t.Fatalf("RSJ(%d, %d) = %v, want %v", tt.n, tt.df, got, tt.want)
			}
		})
	}
	// Never below the floor, never above the plus-one IDF, for every df.
	for n := int64(1); n <= 300; n++ {
		for df := int64(0); df <= n; df++ {
			r := RSJ(n, df)
			if r < RSJFloor || r > IDF(n, df) {
				t.Fatalf("RSJ(%d, %d) = %v outside [%v, IDF %v]", n, df, r, RSJFloor, IDF(n, df))
			}
		}
	}
}

func TestIDFs(t *testing.T) {
	for _, kind := range []IDFKind{IDFPlusOne, IDFRSJ, ""} {
		w := NewIDFs(kind, 3)
		for i, df := range []int64{0, 40, 90} {
			w.Set(i, 100, df)
		}
		for i, df := range []int64{0, 40, 90} {
			want := IDF(100, df)
			if kind == IDFRSJ {
				want = RSJ(100, df)
			}
			if w.IDF[i] != IDF(100, df) || w.Lex[i] != want {
				t.Errorf("kind %q, df %d: idf %v lex %v, want %v and %v", kind, df, w.IDF[i], w.Lex[i], IDF(100, df), want)
			}
		}
	}
}
