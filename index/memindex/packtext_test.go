package memindex

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPackText: a text comes back from its packed form byte for byte, the
// empty text packs to nothing, and prose packs smaller.
func TestPackText(t *testing.T) {
	prose := strings.Repeat("The wire was held for review because the payment's sanctions screening matched a listed name. ", 9)
	for _, text := range []string{"", "a", "ledger", prose, "Zürich naïve 東京", "\x00\xff\xfe invalid \xc3", strings.Repeat("x", 200_000)} {
		p := PackText(text)
		if got := unpackText(p); got != text {
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
	unpackText(string(p))
}

func FuzzPackText(f *testing.F) {
	for _, s := range []string{"", "a", "ledger hold ledger hold", "Zürich", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got := unpackText(PackText(text)); got != text {
			t.Fatalf("%q: got back %q (valid UTF-8: %t)", text, got, utf8.ValidString(text))
		}
	})
}
