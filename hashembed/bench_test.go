package hashembed

import "testing"

// Dense scoring of one chunk at the default 256 dimensions: the exact integer
// dot product and the cosine made from it. A Postgres query scores every
// visible chunk of a tenant this way (in SQL for the dot, in Go for the
// cosine of the kept ones), the memory store in Go.

func benchVectors() (q, d []int32) {
	q, d = make([]int32, DefaultDims), make([]int32, DefaultDims)
	for i := range q {
		q[i] = int32(i%5) - 2
		d[i] = int32((i*7)%11) - 5
	}
	return q, d
}

func BenchmarkDot(b *testing.B) {
	q, d := benchVectors()
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += Dot(q, d)
	}
	_ = s
}

func BenchmarkCosine(b *testing.B) {
	q, d := benchVectors()
	qn, dn := NormSq(q), NormSq(d)
	b.ReportAllocs()
	var s float64
	for b.Loop() {
		s += Cosine(Dot(q, d), qn, dn)
	}
	_ = s
}

func BenchmarkNormSq(b *testing.B) {
	_, d := benchVectors()
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += NormSq(d)
	}
	_ = s
}

func BenchmarkBucket(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Bucket("tx4096", DefaultDims)
	}
}
