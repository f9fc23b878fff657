package cordontype

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"golang.org/x/crypto/blake2b"
)

// DigestPrefix starts every chunk digest: it names the hash, so a later
// digest scheme can be told apart.
const DigestPrefix = "blake2b-256:"

// digestLen is the length of a chunk digest: the prefix and 64 lower-case hex
// digits.
const digestLen = len(DigestPrefix) + 2*blake2b.Size256

// Digest pins exactly what a retrieval showed of c: its text and its
// citation (chunk id, document, section, code-point span). Chunk ids survive
// a document replacement, so a caller that later grounds or assembles by id
// sends the digest back to learn whether the chunk is still the one it read.
//
// It is "blake2b-256:" followed by the lower-case hex BLAKE2b-256 (unkeyed)
// of, in order: chunk id, document id, section, start_char, end_char, text.
// Each string is its UTF-8 byte length as an 8-byte big-endian integer and
// then its bytes; each offset is an 8-byte big-endian integer. The lengths
// make the encoding unambiguous, so no two different chunks share an
// encoding. The digest depends on nothing else (not on classification,
// barriers, as_of_tick or scores): a reclassification is the visibility
// re-check's business, not the digest's.
func (c *Chunk) Digest() string {
	// The encoding is built in a reused buffer and hashed in one call, so
	// a digest allocates only its string: retrieve computes one per result.
	bp := digestBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range []string{c.ChunkID, c.DocID, c.Section} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(c.StartChar))
	b = binary.BigEndian.AppendUint64(b, uint64(c.EndChar))
	b = binary.BigEndian.AppendUint64(b, uint64(len(c.Text)))
	b = append(b, c.Text...)
	sum := blake2b.Sum256(b)
	if cap(b) <= maxDigestBuffer {
		*bp = b
		digestBuffers.Put(bp)
	}
	var out [digestLen]byte
	copy(out[:], DigestPrefix)
	hex.Encode(out[len(DigestPrefix):], sum[:])
	return string(out[:])
}

// digestBuffers hold the encodings Digest hashes; one grown past
// maxDigestBuffer (a chunk of unusual size) is not kept.
var digestBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxDigestBuffer = 64 << 10

// ValidateDigest checks that s has the form of a [Chunk.Digest]:
// "blake2b-256:" and 64 lower-case hex digits.
func ValidateDigest(s string) error {
	bad := func() error {
		return invalid(fmt.Sprintf("digest %q is not a chunk digest: want %s followed by 64 lower-case hex digits, as retrieve returns it", clip(s), DigestPrefix))
	}
	if len(s) != digestLen || s[:len(DigestPrefix)] != DigestPrefix {
		return bad()
	}
	for i := len(DigestPrefix); i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return bad()
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
