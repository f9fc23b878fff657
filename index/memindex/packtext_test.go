package memindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

// TestPackText: a text comes back from its packed form byte for byte, the
// empty text packs to nothing, and prose packs smaller.
func TestPackText(t *testing.T) {
	prose := strings.Repeat("The wire was held for review because the payment's sanctions screening matched a listed name. ", 9)
	for _, text := range []string{"", "a", "ledger", prose, "Zürich naïve 東京", "\x00\xff\xfe invalid \xc3", strings.Repeat("x", 200_000)} {
		p := PackText(text)
		if got := UnpackText(p); got != text {
			t.Fatalf("%.40q: got back %.40q", text, got)
		}
		if text == "" && p != "" {
			t.Fatalf("the empty text packs to %q", p)
		}
	}
	if p := PackText(prose); len(p) >= len(prose)*3/4 {
		t.Fatalf("%d bytes of prose pack to %d", len(prose), len(p))
	}
}

// TestUnpackTextRefusesCorruption: a packed text that does not decode
// panics rather than giving a wrong text.
func TestUnpackTextRefusesCorruption(t *testing.T) {
	p := []byte(PackText(strings.Repeat("ledger hold ", 40)))
	p[0] ^= 0x7f // the length
	defer func() {
		if recover() == nil {
			t.Fatal("a corrupted packed text decoded")
		}
	}()
	UnpackText(string(p))
}

func FuzzPackText(f *testing.F) {
	for _, s := range []string{"", "a", "ledger hold ledger hold", "Zürich", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got := UnpackText(PackText(text)); got != text {
			t.Fatalf("%q: got back %q (valid UTF-8: %t)", text, got, utf8.ValidString(text))
		}
	})
}

// TestPutPackedIsPut: chunks put with their texts packed (PutPacked, as a
// cache's refresh gives them) make the index Put makes of them as
// index.Prepare gives them, through replacements, removals and
// compactions, and the index takes texts as given again afterwards.
func TestPutPackedIsPut(t *testing.T) {
	old := compactMinDead
	compactMinDead = 4
	t.Cleanup(func() { compactMinDead = old })
	s := index.DefaultSettings()
	s.Chunking.MaxWords, s.Chunking.OverlapWords = 12, 3
	r := rand.New(rand.NewPCG(7, 8))
	words := strings.Fields("wire hold ledger release payment review sanctions Zürich naïve 42 desk")
	want, got := New(s), New(s)
	for i := range 120 {
		var b strings.Builder
		for range 5 + r.IntN(40) {
			b.WriteString(words[r.IntN(len(words))] + " ")
		}
		d := cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("d%02d", r.IntN(30)), Text: b.String(), Classification: cordontype.Public}
		if i%7 == 3 {
			want.Remove(d.DocID)
			got.Remove(d.DocID)
			continue
		}
		pcs, err := index.Prepare(&d, s)
		if err != nil {
			t.Fatal(err)
		}
		want.Put(d.DocID, pcs)
		packed := slices.Clone(pcs)
		for j := range packed {
			packed[j].Chunk.Text = PackText(packed[j].Chunk.Text)
		}
		got.PutPacked(d.DocID, packed)
		if got.packedIn {
			t.Fatal("PutPacked left the index taking packed texts")
		}
	}
	if got.compactions == 0 {
		t.Fatal("no compaction: the test exercises too little")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the index of packed texts differs from Put's")
	}
}
