package embed

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"golang.org/x/crypto/blake2b"
)

// Cache is an [Embedder] that remembers another one's vectors by kind and
// text (its BLAKE2b-256 digest), in memory and, when it has a file, on disk,
// so that repeated evaluations embed each text once. A file holds the
// vectors of one model: name it after the model and its dimensions.
type Cache struct {
	e    Embedder
	dims int
	mu   sync.Mutex
	m    map[cacheKey][]float32
	f    *os.File
	w    *bufio.Writer
	// Hits and Misses count texts answered from the cache and embedded.
	Hits, Misses int64
}

type cacheKey struct {
	kind Kind
	sum  [32]byte
}

// NewCache wraps e, whose vectors have dims dimensions. With path not
// empty, vectors are loaded from the file and new ones appended to it.
func NewCache(e Embedder, dims int, path string) (*Cache, error) {
	c := &Cache{e: e, dims: dims, m: map[cacheKey][]float32{}}
	if path == "" {
		return c, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedding cache: %w", err)
	}
	good, err := c.load(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedding cache %s: %w", path, err)
	}
	// A record cut off by a crash is dropped: later ones append after the
	// last whole record.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("embedding cache %s: %w", path, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("embedding cache %s: %w", path, err)
	}
	c.f, c.w = f, bufio.NewWriter(f)
	return c, nil
}

// cacheMagic starts a cache file, followed by the dimensions (uint32,
// little-endian).
const cacheMagic = "cordon-embedding-cache-1\n"

// A file is the header, then records: kind (1 byte), the text's
// BLAKE2b-256 (32 bytes), then dims float32s, little-endian.
func (c *Cache) load(f *os.File) (int64, error) {
	hdr := make([]byte, len(cacheMagic)+4)
	n, err := io.ReadFull(f, hdr)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		copy(hdr, cacheMagic)
		binary.LittleEndian.PutUint32(hdr[len(cacheMagic):], uint32(c.dims))
		if _, err := f.Write(hdr); err != nil {
			return 0, err
		}
		return int64(len(hdr)), nil
	case err != nil || string(hdr[:len(cacheMagic)]) != cacheMagic:
		return 0, errors.New("not an embedding cache file")
	}
	if d := binary.LittleEndian.Uint32(hdr[len(cacheMagic):]); d != uint32(c.dims) {
		return 0, fmt.Errorf("the file caches %d-dimensional vectors, not %d", d, c.dims)
	}
	r := bufio.NewReader(f)
	good := int64(len(hdr))
	rec := make([]byte, 1+32+4*c.dims)
	for {
		if _, err := io.ReadFull(r, rec); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return good, nil
			}
			return 0, err
		}
		k := cacheKey{kind: Kind(rec[0])}
		if k.kind != Document && k.kind != Query {
			return 0, fmt.Errorf("record at byte %d has kind %d: the file is damaged", good, rec[0])
		}
		copy(k.sum[:], rec[1:33])
		v := make([]float32, c.dims)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec[33+4*i:]))
		}
		c.m[k] = v
		good += int64(len(rec))
	}
}

// Embed implements [Embedder]: cached texts are answered from memory, the
// others embedded in one call and remembered.
func (c *Cache) Embed(ctx context.Context, texts []string, kind Kind) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([]cacheKey, len(texts))
	var miss []int
	c.mu.Lock()
	for i, t := range texts {
		keys[i] = cacheKey{kind: kind, sum: blake2b.Sum256([]byte(t))}
		if v, ok := c.m[keys[i]]; ok {
			out[i] = v
			c.Hits++
		} else {
			miss = append(miss, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	todo := make([]string, len(miss))
	for j, i := range miss {
		todo[j] = texts[i]
	}
	vs, err := c.e.Embed(ctx, todo, kind)
	if err != nil {
		return nil, err
	}
	if len(vs) != len(todo) {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrProvider, len(vs), len(todo))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, i := range miss {
		out[i] = vs[j]
		if len(vs[j]) != c.dims {
			continue // Registry.Vectors reports it; never cached
		}
		c.Misses++
		if _, dup := c.m[keys[i]]; dup {
			continue
		}
		c.m[keys[i]] = vs[j]
		if c.w != nil {
			c.w.WriteByte(byte(kind))
			c.w.Write(keys[i].sum[:])
			var b [4]byte
			for _, x := range vs[j] {
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
				c.w.Write(b[:])
			}
		}
	}
	if c.w != nil {
		if err := c.w.Flush(); err != nil {
			return nil, fmt.Errorf("embedding cache: %w", err)
		}
	}
	return out, nil
}

// Close flushes and closes the cache's file.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := c.w.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	return err
}
