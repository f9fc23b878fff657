package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/hashembed"
)

// Hash is the model name of signed feature hashing, the default.
const Hash = "hash"

// QuantMax is the largest magnitude [Quantize] gives a component: vectors are
// scaled so their largest |component| becomes 127 (int8's range).
const QuantMax = 127

// Spec names a tenant's embedding model as recorded with its index: vectors
// of two different specs are never compared.
type Spec struct {
	// Model is Hash or the name a provider serves the model under.
	Model string
	// Dims is the vector length.
	Dims int
}

// IsHash reports whether s is signed feature hashing.
func (s Spec) IsHash() bool { return s.Model == "" || s.Model == Hash }

// String is "model/dims", e.g. "hash/256" or "use-lite/512".
func (s Spec) String() string {
	m := s.Model
	if m == "" {
		m = Hash
	}
	return fmt.Sprintf("%s/%d", m, s.Dims)
}

var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// ValidateModel checks a model name: Hash, or 1-128 characters of letters,
// digits and . _ : / @ + - starting with a letter or digit (the names
// providers use, such as "text-embedding-3-small", "nomic-embed-text:latest"
// or "BAAI/bge-small-en-v1.5").
func ValidateModel(name string) error {
	if !modelName.MatchString(name) {
		return fmt.Errorf("%w: model name %q must be 1-128 letters, digits or . _ : / @ + - (starting with a letter or digit)", ErrInvalidSpec, name)
	}
	return nil
}

// Kind tells a provider whether it embeds documents or a query; some models
// embed the two with different prefixes or instructions.
type Kind int

const (
	Document Kind = iota
	Query
)

func (k Kind) String() string {
	if k == Query {
		return "query"
	}
	return "document"
}

// Embedder embeds texts with one model. Implementations must return exactly
// one vector per text, in order, each of the model's dimensions; they are
// safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string, kind Kind) ([][]float32, error)
}

// Registry maps model names to the embedders that serve them, and serves
// hashing itself: it is the one way from text to a vector, so callers ask it
// for a spec's vectors and never branch on the model (as goose's dialect
// querier spares its callers the dialect). The zero value (and nil) serves
// hashing only.
type Registry struct {
	models map[string]Embedder
}

// Register makes e serve model name. It fails for an invalid name or Hash.
func (r *Registry) Register(name string, e Embedder) error {
	if err := ValidateModel(name); err != nil {
		return err
	}
	if name == Hash {
		return fmt.Errorf("%w: %q is built in", ErrInvalidSpec, Hash)
	}
	if r.models == nil {
		r.models = map[string]Embedder{}
	}
	r.models[name] = e
	return nil
}

// Models lists the registered model names, sorted.
func (r *Registry) Models() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.models))
	for n := range r.models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the embedder of model, or an error wrapping
// ErrUnknownModel that names the configured ones.
func (r *Registry) Lookup(model string) (Embedder, error) {
	if r != nil {
		if e, ok := r.models[model]; ok {
			return e, nil
		}
	}
	have := "none"
	if ms := r.Models(); len(ms) > 0 {
		have = strings.Join(ms, ", ")
	}
	return nil, fmt.Errorf("%w: %q (configured: %s); configure a provider for it (cordon serve --embed-url ... --embed-model %s)", ErrUnknownModel, model, have, model)
}

// Check reports whether r can give vectors of spec's model: nil for
// hashing, which is built in, else [Registry.Lookup]'s error.
func (r *Registry) Check(spec Spec) error {
	if spec.IsHash() {
		return nil
	}
	_, err := r.Lookup(spec.Model)
	return err
}

// Vectors gives texts their vectors under spec. For hashing, the built-in
// provider, each is the signed count vector of the text's tokens
// (analysis.Tokenize, hashembed.Vector); a document's must keep every
// component within [hashembed.MaxCount], as stores keep them in float32.
// For any other model texts are embedded by its provider and each vector
// quantized; that fails if the provider answers with the wrong number of
// vectors or the wrong dimensions, or a vector that [Quantize] refuses.
func (r *Registry) Vectors(ctx context.Context, spec Spec, texts []string, kind Kind) ([][]int32, error) {
	if spec.IsHash() {
		return hashVectors(spec.Dims, texts, kind)
	}
	e, err := r.Lookup(spec.Model)
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return nil, nil
	}
	fs, err := e.Embed(ctx, texts, kind)
	if err != nil {
		return nil, fmt.Errorf("embed %d %s text(s) with %s: %w", len(texts), kind, spec, err)
	}
	if len(fs) != len(texts) {
		return nil, fmt.Errorf("%w: %s returned %d vectors for %d texts", ErrProvider, spec, len(fs), len(texts))
	}
	out := make([][]int32, len(fs))
	for i, f := range fs {
		if len(f) != spec.Dims {
			return nil, fmt.Errorf("%w: %w: %s returned a vector of %d dimensions; the tenant records %d", ErrProvider, ErrDims, spec, len(f), spec.Dims)
		}
		if out[i], err = Quantize(f); err != nil {
			return nil, fmt.Errorf("%w: %s vector %d: %v", ErrProvider, spec, i, err)
		}
	}
	return out, nil
}

// hashVectors is the built-in hashing provider: no call, no quantization,
// the counts are integers already.
func hashVectors(dims int, texts []string, kind Kind) ([][]int32, error) {
	if err := hashembed.ValidateDims(dims); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	buckets := hashembed.Shared(dims) // memoised hashembed.Bucket
	out := make([][]int32, len(texts))
	for i, text := range texts {
		v := make([]int32, dims)
		for _, t := range analysis.Tokenize(text) {
			d, sign := buckets.Bucket(t)
			v[d] += sign
		}
		if kind == Document {
			for _, x := range v {
				if x > hashembed.MaxCount || x < -hashembed.MaxCount {
					return nil, fmt.Errorf("chunk text %d: %w", i, hashembed.ErrVectorBound)
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

// Quantize scales v so that its largest |component| becomes [QuantMax] and
// rounds each component to the nearest integer (halves away from zero). The
// cosine does not depend on a vector's length, so the scale is per vector
// and uses int8's whole range. Each component moves by at most 0.5/127 of
// the largest one. The arithmetic is one float64 division and one
// multiplication per component, exact IEEE operations, so every
// architecture gives the same integers for the same floats. It refuses
// non-finite components and the zero vector.
func Quantize(v []float32) ([]int32, error) {
	var m float64
	for i, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("component %d is %v", i, x)
		}
		m = max(m, math.Abs(f))
	}
	if m == 0 {
		return nil, errors.New("zero vector")
	}
	scale := float64(QuantMax) / m
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(math.Round(float64(float64(x) * scale)))
	}
	return out, nil
}
