package analysis

import (
	"hash/maphash"
	"slices"
)

// Vocabulary counts the distinct tokens of texts, as Counter does, and
// numbers them: each distinct token gets an id, the same in every text the
// Vocabulary counts, and one string, allocated at its first occurrence in
// any of them. A cache loading a tenant counts its chunks with one
// Vocabulary per goroutine: the terms of the tenant's chunks share their
// strings, and the posting lists are built by id (memindex.Builder) without
// a string lookup per term of every chunk. A Vocabulary is for one
// goroutine.
//
// Every token of a text is looked up in an open-addressing table (at most
// half full) and its counts in the text are kept by id. A token of at most
// 8 bytes, most of them, is its own key: its bytes in a uint64, which no
// other token has (no token holds a zero byte), so its lookup reads one
// table entry and nothing else. A longer token is found by its hash and
// checked against its string. A Go map per text, as Counter keeps, and one
// for the vocabulary, cost about twice the CPU (BenchmarkBuild in
// index/memindex).
type Vocabulary struct {
	// short holds the tokens of at most 8 bytes, by their bytes.
	short     []shortEntry
	shortMask uint64
	seed      maphash.Seed
	// table holds each longer token's hash's high 32 bits and its id + 1
	// (0 is an empty entry); a token's probe starts at its hash's low
	// bits.
	table []uint64
	mask  uint64
	// shorts and long count the entries of each table.
	shorts, long int
	terms        []string // id -> token
	// tf is the count of each id in the text being counted (0 outside
	// CountIDs); order holds that text's ids in order of first occurrence.
	tf    []int32
	order []int32
	buf   []byte
	// fieldBuf holds a field term while AppendFieldIDs numbers it.
	fieldBuf []byte
	// stems holds, by token id, the id of its stem term + 1, -1 when it
	// has none, 0 when not yet computed (AppendStemIDs).
	stems []int32
}

// shortEntry is a token of at most 8 bytes (key, 0 if empty) and its id.
type shortEntry struct {
	key uint64
	id  int32
}

// vocabularyMin is the smallest table, in entries.
const vocabularyMin = 1 << 10

// NewVocabulary returns an empty Vocabulary.
func NewVocabulary() *Vocabulary {
	return &Vocabulary{short: make([]shortEntry, vocabularyMin), shortMask: vocabularyMin - 1,
		seed: maphash.MakeSeed(), table: make([]uint64, vocabularyMin), mask: vocabularyMin - 1,
		buf: make([]byte, 0, 32)}
}

// Names returns the terms of ids: the Vocabulary's strings, shared by every
// text that holds them.
func (v *Vocabulary) Names(ids []int32) []string {
	if ids == nil {
		return nil
	}
	terms := make([]string, len(ids))
	for j, id := range ids {
		terms[j] = v.terms[id]
	}
	return terms
}

// CountIDs returns the ids of the distinct tokens of s in order of first
// occurrence (Names gives TokenSet(s)) and how often each occurs; the
// slices are s's own.
func (v *Vocabulary) CountIDs(s string) (ids, tf []int32) {
	v.order = v.order[:0]
	scanTokens(s, v.buf, func(tok []byte) bool {
		id := v.id(tok)
		if v.tf[id] == 0 {
			v.order = append(v.order, id)
		}
		v.tf[id]++
		return true
	})
	if len(v.order) == 0 {
		return nil, nil
	}
	ids = slices.Clone(v.order)
	tf = make([]int32, len(ids))
	for j, id := range ids {
		tf[j] = v.tf[id]
		v.tf[id] = 0
	}
	return ids, tf
}

// id returns the id of tok, numbering it if it is new.
func (v *Vocabulary) id(tok []byte) int32 {
	if len(tok) <= 8 {
		return v.shortID(tok)
	}
	h := maphash.Bytes(v.seed, tok)
	tag := h >> 32
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		e := v.table[i]
		if e == 0 {
			id := int32(len(v.terms))
			v.terms = append(v.terms, string(tok))
			v.tf = append(v.tf, 0)
			v.table[i] = tag<<32 | uint64(id+1)
			if v.long++; 2*v.long > len(v.table) {
				v.grow()
			}
			return id
		}
		if e>>32 == tag {
			if id := int32(e&0xffffffff) - 1; v.terms[id] == string(tok) {
				return id
			}
		}
	}
}

// shortKey is a token of at most 8 bytes as a uint64, and where its probe
// starts in a table of mask+1 entries.
func shortKey(tok []byte, mask uint64) (key, at uint64) {
	for i, c := range tok {
		key |= uint64(c) << (8 * i)
	}
	return key, shortAt(key, mask)
}

// shortAt is where the probe for key starts (Fibonacci hashing: the
// product's high bits).
func shortAt(key, mask uint64) uint64 { return (key * 0x9e3779b97f4a7c15 >> 32) & mask }

// shortID is id for a token of at most 8 bytes.
func (v *Vocabulary) shortID(tok []byte) int32 {
	key, i := shortKey(tok, v.shortMask)
	for ; ; i = (i + 1) & v.shortMask {
		e := &v.short[i]
		if e.key == key {
			return e.id
		}
		if e.key == 0 {
			id := int32(len(v.terms))
			v.terms = append(v.terms, string(tok))
			v.tf = append(v.tf, 0)
			*e = shortEntry{key: key, id: id}
			if v.shorts++; 2*v.shorts > len(v.short) {
				v.growShort()
			}
			return id
		}
	}
}

// growShort doubles the table of short tokens.
func (v *Vocabulary) growShort() {
	old := v.short
	v.short = make([]shortEntry, 2*len(old))
	v.shortMask = uint64(len(v.short) - 1)
	for _, e := range old {
		if e.key == 0 {
			continue
		}
		at := shortAt(e.key, v.shortMask)
		for v.short[at].key != 0 {
			at = (at + 1) & v.shortMask
		}
		v.short[at] = e
	}
}

// grow doubles the table of longer tokens.
func (v *Vocabulary) grow() {
	v.table = make([]uint64, 2*len(v.table))
	v.mask = uint64(len(v.table) - 1)
	for id, t := range v.terms {
		if len(t) <= 8 {
			continue
		}
		h := maphash.String(v.seed, t)
		i := h & v.mask
		for v.table[i] != 0 {
			i = (i + 1) & v.mask
		}
		v.table[i] = h>>32<<32 | uint64(id+1)
	}
}

// Terms returns every token counted so far, indexed by id. The slice is
// the Vocabulary's: it is read only once counting is done.
func (v *Vocabulary) Terms() []string { return v.terms }
