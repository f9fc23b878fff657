// Package adversarial builds corpora meant to make an in-memory index hold
// far more, or far other, memory than a typical corpus does: long unique
// tokens (a dictionary entry per term), many tiny documents (a per-document
// cost per chunk), a few huge documents, and non-Latin text (multi-byte
// tokens, CJK runs that tokenize as one long token). Tests of the memory
// budget measure an index of each against the live heap.
package adversarial

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/cordon-rag/cordon/cordontype"
)

// Corpus is a named set of documents of one tenant.
type Corpus struct {
	Name string
	Docs []cordontype.Document
}

// Corpora returns the adversarial corpora of tenant, each of about scale
// MB of text (scale 1 is enough for a live-heap measurement to dwarf the
// collector's noise), the same for the same arguments.
func Corpora(tenant string, scale int) []Corpus {
	scale = max(scale, 1)
	return []Corpus{
		LongUniqueTokens(tenant, 400*scale),
		TinyDocuments(tenant, 20_000*scale),
		HugeDocuments(tenant, 3, 400_000*scale),
		NonLatin(tenant, 1_500*scale),
	}
}

// LongUniqueTokens is docs documents of 190 tokens each, every token
// unique and 24 to 48 letters and digits long.
func LongUniqueTokens(tenant string, docs int) Corpus {
	r := rand.New(rand.NewPCG(1, 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	c := Corpus{Name: "long unique tokens"}
	for i := range docs {
		var b strings.Builder
		for j := range 190 {
			fmt.Fprintf(&b, "u%dx%d", i, j) // unique
			for range 20 + r.IntN(24) {
				b.WriteByte(alphabet[r.IntN(len(alphabet))])
			}
			b.WriteByte(' ')
		}
		c.Docs = append(c.Docs, doc(tenant, i, b.String()))
	}
	return c
}

// TinyDocuments is docs documents of 2 to 6 words from a vocabulary of
// 2,000.
func TinyDocuments(tenant string, docs int) Corpus {
	r := rand.New(rand.NewPCG(2, 2))
	c := Corpus{Name: "many tiny documents"}
	for i := range docs {
		words := make([]string, 2+r.IntN(5))
		for j := range words {
			words[j] = fmt.Sprintf("w%d", r.IntN(2000))
		}
		c.Docs = append(c.Docs, doc(tenant, i, strings.Join(words, " ")))
	}
	return c
}

// HugeDocuments is docs documents of words words each, from a vocabulary
// of 50,000 drawn with a skew (a few common words, a long tail).
func HugeDocuments(tenant string, docs, words int) Corpus {
	r := rand.New(rand.NewPCG(3, 3))
	z := rand.NewZipf(r, 1.1, 4, 49_999)
	c := Corpus{Name: "a few huge documents"}
	for i := range docs {
		var b strings.Builder
		for j := range words {
			fmt.Fprintf(&b, "term%d", z.Uint64())
			if j%23 == 22 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		c.Docs = append(c.Docs, doc(tenant, i, b.String()))
	}
	return c
}

// NonLatin is docs documents of 150 words each: runs of Han characters
// (each run one token), Cyrillic and Arabic words, drawn from vocabularies
// of 20,000 each, so most runs are rare.
func NonLatin(tenant string, docs int) Corpus {
	r := rand.New(rand.NewPCG(4, 4))
	word := func(lo, n rune, min, spread int) string {
		var b strings.Builder
		for range min + r.IntN(spread) {
			b.WriteRune(lo + rune(r.IntN(int(n))))
		}
		return b.String()
	}
	vocab := func(lo, n rune, min, spread int) []string {
		v := make([]string, 20_000)
		for i := range v {
			v[i] = word(lo, n, min, spread)
		}
		return v
	}
	han := vocab(0x4E00, 0x5000, 2, 10)          // CJK unified ideographs
	cyrillic := vocab(0x0430, 32, 4, 8)          // а-я
	arabic := vocab(0x0627, 0x064A-0x0627, 3, 7) // ا-ي
	c := Corpus{Name: "non-Latin text"}
	for i := range docs {
		var b strings.Builder
		for j := range 150 {
			switch j % 3 {
			case 0:
				b.WriteString(han[r.IntN(len(han))])
				b.WriteString("，")
			case 1:
				b.WriteString(cyrillic[r.IntN(len(cyrillic))])
				b.WriteByte(' ')
			default:
				b.WriteString(arabic[r.IntN(len(arabic))])
				b.WriteByte(' ')
			}
		}
		c.Docs = append(c.Docs, doc(tenant, i, b.String()))
	}
	return c
}

func doc(tenant string, i int, text string) cordontype.Document {
	var barriers []string
	if i%5 == 1 {
		barriers = []string{"deal-a"}
	}
	return cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("doc-%06d", i), Text: text,
		Classification: cordontype.Classification(i % 4), Barriers: barriers, AsOfTick: int64(i)}
}
