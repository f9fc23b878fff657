package cordontype

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

func digestChunk() Chunk {
	return Chunk{ChunkID: "pay-001::0", DocID: "pay-001", Tenant: "wholesale", Section: "Payments",
		Text: "PMT-771 hold release requires dual approval.", StartChar: 11, EndChar: 55, Length: 6,
		Classification: Confidential, Barriers: []string{"deal-x"}, AsOfTick: 100}
}

// TestDigestEncoding builds the documented encoding by hand, byte by byte,
// so the digest cannot drift from what docs/running.md tells clients.
func TestDigestEncoding(t *testing.T) {
	c := digestChunk()
	var enc []byte
	lenBytes := func(n int) []byte { return []byte{0, 0, 0, 0, 0, 0, 0, byte(n)} }
	for _, f := range []string{c.ChunkID, c.DocID, c.Section} {
		enc = append(enc, lenBytes(len(f))...)
		enc = append(enc, f...)
	}
	enc = append(enc, lenBytes(11)...)
	enc = append(enc, lenBytes(55)...)
	enc = append(enc, lenBytes(len(c.Text))...)
	enc = append(enc, c.Text...)
	sum := blake2b.Sum256(enc)
	want := "blake2b-256:" + hex.EncodeToString(sum[:])
	if got := c.Digest(); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if err := ValidateDigest(c.Digest()); err != nil {
		t.Fatalf("a digest does not validate: %v", err)
	}
}

func TestDigestPinsTextAndCitation(t *testing.T) {
	base := digestChunk()
	tests := []struct {
		name    string
		edit    func(c *Chunk)
		changes bool
	}{
		{"text", func(c *Chunk) { c.Text = "PMT-771 hold release requires single approval." }, true},
		{"one trailing space", func(c *Chunk) { c.Text += " " }, true},
		{"chunk id", func(c *Chunk) { c.ChunkID = "pay-001::1" }, true},
		{"doc id", func(c *Chunk) { c.DocID = "pay-002" }, true},
		{"section", func(c *Chunk) { c.Section = "Holds" }, true},
		{"start", func(c *Chunk) { c.StartChar = 12 }, true},
		{"end", func(c *Chunk) { c.EndChar = 56 }, true},
		{"field boundary", func(c *Chunk) { c.ChunkID, c.DocID = "pay-001::0p", "ay-001" }, true},
		{"classification", func(c *Chunk) { c.Classification = Restricted }, false},
		{"barriers", func(c *Chunk) { c.Barriers = nil }, false},
		{"as_of_tick", func(c *Chunk) { c.AsOfTick = 200 }, false},
		{"length and tenant", func(c *Chunk) { c.Length, c.Tenant = 7, "retail" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Barriers = append([]string(nil), base.Barriers...)
			tt.edit(&c)
			if got := c.Digest() != base.Digest(); got != tt.changes {
				t.Fatalf("digest changed = %t, want %t", got, tt.changes)
			}
		})
	}
}

func TestValidateDigest(t *testing.T) {
	good := "blake2b-256:" + strings.Repeat("0a", 32)
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"good", good, true},
		{"empty", "", false},
		{"no prefix", strings.Repeat("0a", 32), false},
		{"other hash", "sha256:" + strings.Repeat("0a", 32), false},
		{"upper-case hex", "blake2b-256:" + strings.Repeat("0A", 32), false},
		{"short", good[:len(good)-1], false},
		{"long", good + "0", false},
		{"not hex", "blake2b-256:" + strings.Repeat("zz", 32), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDigest(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateDigest(%q) = %v, want ok %t", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

// BenchmarkDigest digests a chunk of 1,000 bytes, about a retrieved
// chunk's size; retrieve digests every result.
func BenchmarkDigest(b *testing.B) {
	c := Chunk{ChunkID: "payments/2024-05::12", DocID: "payments/2024-05", Section: "Holds and releases", StartChar: 4100, EndChar: 5100,
		Text: strings.Repeat("a payment hold is released ", 37)}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Digest()
	}
}
