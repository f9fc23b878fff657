package hashembed

import (
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/blake2b"
)

// Dimension limits: 256 by default; pgvector's vector type holds at most 16000.
const (
	DefaultDims = 256
	MaxDims     = 16000
)

// MaxCount is the largest count magnitude a stored vector component may
// hold: 2^24, the end of float32's exact integers.
const MaxCount = 1 << 24

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

// Cache hashes tokens like Bucket, once per distinct token: a memo that
// goroutines share (Shared gives one per dimension count for the whole
// process, so that ingest hashes each term of the vocabulary once rather
// than once per document). It holds at most maxEntries tokens, the first
// ones seen (in Zipf-distributed text the frequent ones), of at most
// MaxCachedTokenBytes bytes each; other tokens are hashed each time, so
// hostile input cannot grow it beyond its bound.
type Cache struct {
	dims       int
	maxEntries int64
	entries    atomic.Int64
	shards     [cacheShards]cacheShard
	hashers    sync.Pool
}

const cacheShards = 32

// DefaultCacheEntries bounds a shared cache: with MaxCachedTokenBytes,
// about 25 MB of memo at most.
const DefaultCacheEntries = 1 << 18

// MaxCachedTokenBytes is the longest token a Cache memoises.
const MaxCachedTokenBytes = 32

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]cached
}

type cached struct {
	index int32
	sign  int32
}

// NewCache returns an empty cache for dims dimensions holding at most
// maxEntries tokens.
func NewCache(dims int, maxEntries int64) *Cache {
	c := &Cache{dims: dims, maxEntries: maxEntries}
	for i := range c.shards {
		c.shards[i].m = map[string]cached{}
	}
	c.hashers.New = func() any {
		h, _ := blake2b.New(8, nil) // cannot fail: 8 is a valid size and there is no key
		return h
	}
	return c
}

var shared sync.Map // dims -> *Cache

// Shared returns the process-wide cache for dims dimensions.
func Shared(dims int) *Cache {
	if c, ok := shared.Load(dims); ok {
		return c.(*Cache)
	}
	c, _ := shared.LoadOrStore(dims, NewCache(dims, DefaultCacheEntries))
	return c.(*Cache)
}

// Bucket is [Bucket](token, dims), memoised.
func (c *Cache) Bucket(token string) (index int, sign int32) {
	sh := &c.shards[shardOf(token)]
	sh.mu.RLock()
	b, ok := sh.m[token]
	sh.mu.RUnlock()
	if ok {
		return int(b.index), b.sign
	}
	h := c.hashers.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(token))
	var d [8]byte
	h.Sum(d[:0])
	c.hashers.Put(h)
	index = int(binary.BigEndian.Uint32(d[0:4]) % uint32(c.dims))
	sign = -1
	if d[4]%2 == 0 {
		sign = 1
	}
	if len(token) <= MaxCachedTokenBytes && c.entries.Load() < c.maxEntries {
		sh.mu.Lock()
		if _, ok := sh.m[token]; !ok {
			if c.entries.Add(1) <= c.maxEntries {
				sh.m[token] = cached{index: int32(index), sign: sign}
			} else {
				c.entries.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	return index, sign
}

// shardOf spreads tokens over the shards by their length and last bytes
// (cheap; no second hash of the token).
func shardOf(t string) int {
	n := len(t)
	if n == 0 {
		return 0
	}
	return (n*7 + int(t[n-1]) + int(t[n/2])*3) % cacheShards
}
