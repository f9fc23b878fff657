package hashembed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"

	"golang.org/x/crypto/blake2b"
)

// Dimension limits: 256 by default; pgvector's vector type holds at most 16000.
const (
	DefaultDims = 256
	MaxDims     = 16000
)

// ErrInvalidDims is returned when dims is outside 1..16000.
var ErrInvalidDims = errors.New("invalid dims")

// ValidateDims checks 1 <= dims <= MaxDims.
func ValidateDims(dims int) error {
	if dims < 1 || dims > MaxDims {
		return fmt.Errorf("%w: dims %d must be in 1..%d", ErrInvalidDims, dims, MaxDims)
	}
	return nil
}

// Bucket returns the dimension and sign of one token.
func Bucket(token string, dims int) (index int, sign int32) {
	h, _ := blake2b.New(8, nil) // cannot fail: 8 is a valid size and there is no key
	h.Write([]byte(token))
	var d [8]byte
	h.Sum(d[:0])
	index = int(binary.BigEndian.Uint32(d[0:4]) % uint32(dims))
	if d[4]%2 == 0 {
		return index, 1
	}
	return index, -1
}

// Vector returns the signed count vector of tokens (with repetition).
func Vector(tokens []string, dims int) []int32 {
	v := make([]int32, dims)
	for _, t := range tokens {
		i, s := Bucket(t, dims)
		v[i] += s
	}
	return v
}

// NormSq is the exact squared L2 norm, sum of v[i]^2.
func NormSq(v []int32) int64 {
	var s int64
	for _, x := range v {
		s += int64(x) * int64(x)
	}
	return s
}

// Dot is the exact integer dot product.
func Dot(q, d []int32) int64 {
	var s int64
	for i := range q {
		s += int64(q[i]) * int64(d[i])
	}
	return s
}

// Cosine is SPEC section 3's similarity from the exact dot product and the
// squared norms: float64(dot) / (sqrt(qNormSq) * sqrt(dNormSq)), the product of
// the norms taken first; 0 when either norm is 0. Every store calls this.
func Cosine(dot, qNormSq, dNormSq int64) float64 {
	if qNormSq == 0 || dNormSq == 0 {
		return 0
	}
	den := float64(math.Sqrt(float64(qNormSq)) * math.Sqrt(float64(dNormSq)))
	return float64(dot) / den
}

// Cache hashes tokens like Bucket, once per distinct token, reusing one
// BLAKE2b state. It is for one goroutine (index.Prepare uses one per
// document).
type Cache struct {
	dims int
	h    hash.Hash
	m    map[string]cached
	d    [8]byte
}

type cached struct {
	index int32
	sign  int32
}

// NewCache returns an empty cache for dims dimensions.
func NewCache(dims int) *Cache {
	h, _ := blake2b.New(8, nil) // cannot fail: 8 is a valid size and there is no key
	return &Cache{dims: dims, h: h, m: make(map[string]cached)}
}

// Bucket is [Bucket](token, dims), memoised.
func (c *Cache) Bucket(token string) (index int, sign int32) {
	if b, ok := c.m[token]; ok {
		return int(b.index), b.sign
	}
	c.h.Reset()
	c.h.Write([]byte(token))
	d := c.h.Sum(c.d[:0])
	index = int(binary.BigEndian.Uint32(d[0:4]) % uint32(c.dims))
	sign = -1
	if d[4]%2 == 0 {
		sign = 1
	}
	c.m[token] = cached{index: int32(index), sign: sign}
	return index, sign
}
