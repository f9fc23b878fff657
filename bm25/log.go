package bm25

import "math"

// fdlibm's constants for ln, as in Go's math/log.go (from FreeBSD's e_log.c).
const (
	ln2Hi = 6.93147180369123816490e-01 // 3fe62e42 fee00000
	ln2Lo = 1.90821492927058770002e-10 // 3dea39ef 35793c76
	lg1   = 6.666666666666735130e-01   // 3FE55555 55555593
	lg2   = 3.999999999940941908e-01   // 3FD99999 9997FA04
	lg3   = 2.857142874366239149e-01   // 3FD24924 94229359
	lg4   = 2.222219843214978396e-01   // 3FCC71C5 1D8E78AF
	lg5   = 1.818357216161805012e-01   // 3FC74664 96CB03DE
	lg6   = 1.531383769920937332e-01   // 3FC39A09 D078C69F
	lg7   = 1.479819860511658591e-01   // 3FC2F112 DF3E5244
)

// Log returns the natural logarithm of x by the classic fdlibm algorithm, the
// one in Go's math/log.go, with every product explicitly rounded to float64 so
// that no compiler may fuse a multiply and an add. Its results are the same on
// every architecture.
func Log(x float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}

	// Reduce: x = 2^ki * f1, f1 in [sqrt(2)/2, sqrt(2)).
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 = float64(f1 * 2)
		ki--
	}
	f := float64(f1 - 1)
	k := float64(ki)

	s := float64(f / float64(2+f))
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * float64(lg1+float64(s4*float64(lg3+float64(s4*float64(lg5+float64(s4*lg7)))))))
	t2 := float64(s4 * float64(lg2+float64(s4*float64(lg4+float64(s4*lg6)))))
	r := float64(t1 + t2)
	hfsq := float64(float64(0.5*f) * f)
	inner := float64(float64(s*float64(hfsq+r)) + float64(k*ln2Lo))
	return float64(float64(k*ln2Hi) - float64(float64(hfsq-inner)-f))
}
