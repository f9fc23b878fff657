package embed

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cordon-rag/cordon/hashembed"
)

func TestQuantizeRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		v := make([]float32, 1+r.IntN(600))
		for i := range v {
			v[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(7)-3)))
		}
		q, err := Quantize(v)
		if err != nil {
			t.Fatal(err)
		}
		var m float64
		mi := 0
		for i, x := range v {
			if a := math.Abs(float64(x)); a > m {
				m, mi = a, i
			}
		}
		if q[mi] != QuantMax && q[mi] != -QuantMax {
			t.Fatalf("largest component quantized to %d, want ±%d", q[mi], QuantMax)
		}
		for i, x := range v {
			if q[i] > QuantMax || q[i] < -QuantMax {
				t.Fatalf("component %d = %d out of range", i, q[i])
			}
			// Each component is within half a step of the scaled float.
			if d := math.Abs(float64(q[i]) - float64(x)*QuantMax/m); d > 0.5+1e-9 {
				t.Fatalf("component %d off by %v steps", i, d)
			}
		}
	}
}

// The quantized cosine stays close to the float cosine for vectors of a
// sentence encoder's size; the bound is the documented error.
func TestQuantizeCosineError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var worst float64
	for n := 0; n < 500; n++ {
		a, b := make([]float32, 512), make([]float32, 512)
		for i := range a {
			a[i] = float32(r.NormFloat64())
			b[i] = float32(0.6*float64(a[i]) + 0.8*r.NormFloat64())
		}
		qa, _ := Quantize(a)
		qb, _ := Quantize(b)
		var dot, na, nb float64
		for i := range a {
			dot += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		exact := dot / math.Sqrt(na*nb)
		got := hashembed.Cosine(hashembed.Dot(qa, qb), hashembed.NormSq(qa), hashembed.NormSq(qb))
		worst = max(worst, math.Abs(got-exact))
	}
	if worst > 0.01 {
		t.Fatalf("worst |quantized - float| cosine = %v, want <= 0.01", worst)
	}
}

func TestQuantizeRefuses(t *testing.T) {
	for _, v := range [][]float32{nil, {0, 0}, {1, float32(math.NaN())}, {float32(math.Inf(-1))}} {
		if _, err := Quantize(v); err == nil {
			t.Fatalf("Quantize(%v) gave no error", v)
		}
	}
}

type fixed struct{ vecs [][]float32 }

func (f fixed) Embed(_ context.Context, texts []string, _ Kind) ([][]float32, error) {
	return f.vecs[:min(len(texts), len(f.vecs))], nil
}

func TestRegistryVectors(t *testing.T) {
	var r Registry
	if _, err := r.Vectors(context.Background(), Spec{Model: "m", Dims: 2}, []string{"a"}, Query); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unregistered model: %v", err)
	}
	if err := r.Register(Hash, fixed{}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("registering hash: %v", err)
	}
	if err := r.Register("bad name", fixed{}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("bad name: %v", err)
	}
	if err := r.Register("m", fixed{vecs: [][]float32{{0.5, -1}}}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Vectors(context.Background(), Spec{Model: "m", Dims: 2}, []string{"a"}, Query)
	if err != nil || len(got) != 1 || got[0][0] != 64 || got[0][1] != -127 {
		t.Fatalf("Vectors = %v, %v", got, err)
	}
	if _, err := r.Vectors(context.Background(), Spec{Model: "m", Dims: 3}, []string{"a"}, Query); !errors.Is(err, ErrProvider) {
		t.Fatalf("wrong dims: %v", err)
	}
	if _, err := r.Vectors(context.Background(), Spec{Model: "m", Dims: 2}, []string{"a", "b"}, Query); !errors.Is(err, ErrProvider) {
		t.Fatalf("too few vectors: %v", err)
	}
}

// TestRegistryHashing checks the built-in provider: any registry, nil
// included, gives hashing vectors, the signed counts of the text's tokens.
func TestRegistryHashing(t *testing.T) {
	texts := []string{"Alpha beta, alpha!", "", "gamma"}
	tokens := [][]string{{"alpha", "beta", "alpha"}, nil, {"gamma"}}
	for _, tt := range []struct {
		name string
		reg  *Registry
		spec Spec
	}{
		{"nil registry", nil, Spec{Model: Hash, Dims: 16}},
		{"empty model name", &Registry{}, Spec{Dims: 16}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.reg.Check(tt.spec); err != nil {
				t.Fatalf("Check = %v, want nil", err)
			}
			for _, kind := range []Kind{Document, Query} {
				got, err := tt.reg.Vectors(context.Background(), tt.spec, texts, kind)
				if err != nil {
					t.Fatalf("Vectors(%s) = %v", kind, err)
				}
				for i, toks := range tokens {
					want := hashembed.Vector(toks, tt.spec.Dims)
					if !slices.Equal(got[i], want) {
						t.Errorf("%s vector %d: got %v, want %v", kind, i, got[i], want)
					}
				}
			}
		})
	}
	var r Registry
	if err := r.Check(Spec{Model: "m", Dims: 2}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("Check(unregistered) = %v, want ErrUnknownModel", err)
	}
	if _, err := r.Vectors(context.Background(), Spec{Model: Hash}, texts, Query); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("hashing with 0 dims: got %v, want ErrInvalidSpec", err)
	}
}
