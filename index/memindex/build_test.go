package memindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// TestBuilderIsPut: an index from a Builder equals, field for field, the
// one Put builds from the same documents in the same order: with and
// without per-label-set counts, with the posting lists built in parts, with vectors beyond int8 (overflow), and
// with a document id that comes twice (the later replaces the earlier).
// Documents counted as a cache's load counts them come with their texts
// packed (PackedTexts).
func TestBuilderIsPut(t *testing.T) {
	s := index.DefaultSettings()
	s.Chunking.MaxWords, s.Chunking.OverlapWords = 12, 3
	words := strings.Fields("wire hold ledger release payment review sanctions Zürich naïve 42 x-ray desk")
	r := rand.New(rand.NewPCG(1, 2))
	type doc struct {
		id  string
		pcs []index.PreparedChunk
	}
	var docs []doc
	for i := range 60 {
		var b strings.Builder
		n := 5 + r.IntN(40)
		if i%9 == 0 {
			n = 600 // a word repeated beyond int8 and a byte in one chunk
		}
		for j := range n {
			w := words[r.IntN(len(words))]
			if i%9 == 0 {
				w = words[j%2]
			}
			b.WriteString(w + " ")
		}
		var barriers []string
		if i%4 == 1 {
			barriers = []string{"deal-a"}
		}
		d := cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("d%02d", i%50), Text: b.String(),
			Classification: cordontype.Classification(i % 4), Barriers: barriers, AsOfTick: int64(i)}
		if i%9 == 0 {
			s.Chunking.MaxWords = 600
		}
		pcs, err := index.Prepare(&d, s)
		s.Chunking.MaxWords = 12
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{d.DocID, pcs})
	}
	for _, tt := range []struct {
		name     string
		docs     int
		countMin int
		counted  bool
	}{
		{"distinct ids", 50, labelCountsMin, false},
		{"distinct ids, label counts", 50, 3, false},
		{"an id twice", 60, 3, false},
		{"counted by two vocabularies", 50, 3, true},
		{"counted, an id twice", 60, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, oldMin, oldProcs := labelCountsMin, buildPartMin, runtime.GOMAXPROCS(4)
			labelCountsMin, buildPartMin = tt.countMin, 8 // four parts
			t.Cleanup(func() { labelCountsMin, buildPartMin = old, oldMin; runtime.GOMAXPROCS(oldProcs) })
			want := New(s)
			b := NewBuilder(s, 10)
			if tt.counted {
				b.PackedTexts() // as a cache's load gives them
			}
			vocabs := []*analysis.Vocabulary{analysis.NewVocabulary(), analysis.NewVocabulary()}
			for i, d := range docs[:tt.docs] {
				want.Put(d.id, d.pcs)
				if !tt.counted {
					b.Add(d.id, d.pcs)
					continue
				}
				// As a cache's loading workers count: each document by
				// one of two vocabularies, in turn.
				v := vocabs[i%2]
				pcs := slices.Clone(d.pcs)
				ids := make([][]int32, len(pcs))
				for j := range pcs {
					// As a load counts: ids, and no names.
					ids[j], pcs[j].TF = v.CountIDs(pcs[j].Chunk.Text)
					if s.Stems() {
						ids[j], pcs[j].TF = v.AppendStemIDs(ids[j], pcs[j].TF)
					}
					pcs[j].Terms = nil
					pcs[j].Chunk.Text = PackText(pcs[j].Chunk.Text)
					if terms := v.Names(ids[j]); !reflect.DeepEqual(terms, d.pcs[j].Terms) || !reflect.DeepEqual(pcs[j].TF, d.pcs[j].TF) {
						t.Fatalf("doc %s chunk %d: the vocabulary counts %v %v, Prepare %v %v", d.id, j, terms, pcs[j].TF, d.pcs[j].Terms, d.pcs[j].TF)
					}
				}
				b.AddCounted(d.id, pcs, v, ids)
			}
			got := b.Index()
			if len(got.overflow) == 0 || got.Len() == 0 || got.BigTFs() == 0 {
				t.Fatalf("%d chunks, %d beyond int8, %d tfs beyond a byte: the test exercises too little", got.Len(), len(got.overflow), got.BigTFs())
			}
			if tt.countMin == 3 {
				withCounts := 0
				for _, p := range got.postings {
					if p.byLabel() != nil {
						withCounts++
					}
				}
				if withCounts == 0 {
					t.Fatal("no posting list keeps label counts")
				}
			}
			// How each counts its memory differs with how it was laid out.
			forgetAccounting(got)
			forgetAccounting(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatal("the built index differs from the one Put built")
			}
		})
	}
}

// forgetAccounting clears what x counts of its memory (see Bytes), which
// depends on how its arrays were allocated.
func forgetAccounting(x *Index) {
	x.acct = accounting{}
	for _, p := range x.lists {
		if p != nil {
			p.built, p.windows = false, false
		}
	}
}
