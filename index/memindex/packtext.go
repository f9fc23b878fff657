package memindex

import (
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
)

// A slot keeps its chunk's text packed: compressed in S2's block format
// (github.com/klauspost/compress/s2, the format of its Encode and Decode:
// the text's length as a uvarint, then its blocks), which is lossless, so
// a hit's text is the chunk's text byte for byte. A chunk's text is the
// largest part of what the index holds of it; S2 stores the bench corpus's
// texts in 0.73 of their bytes and SciFact's in 0.76, and decodes one in
// about a microsecond, which a query pays for each hit whose text it reads:
// a ranking for a retriever (retrieval.RankRequest.LazyTexts) returns them
// packed, and the retriever reads those it reranks and returns. The empty
// text (an index that drops texts) packs to "".

// packBufs are encoding buffers, reused.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// PackText returns text packed as an index's slot keeps it. A cache that
// decodes stored rows packs their texts on its workers and gives them to
// a Builder packed (Builder.PackedTexts).
func PackText(text string) string {
	if text == "" {
		return ""
	}
	bp := packBufs.Get().(*[]byte)
	n := s2.MaxEncodedLen(len(text))
	if n < 0 {
		// Beyond S2's block size (4 GiB): kept as it is would be ambiguous,
		// and no chunk row holds a text that long (PostgreSQL's text is at
		// most 1 GB).
		panic("memindex: a chunk text too long to pack")
	}
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	src := unsafe.Slice(unsafe.StringData(text), len(text))
	packed := string(s2.EncodeBetter((*bp)[:n], src))
	packBufs.Put(bp)
	return packed
}

// UnpackText returns the text packed by PackText (a slot's, or a hit's
// Packed text: retrieval.RankRequest.LazyTexts). A packed text that does
// not decode was corrupted in memory: UnpackText panics.
func UnpackText(packed string) string {
	if packed == "" {
		return ""
	}
	src := unsafe.Slice(unsafe.StringData(packed), len(packed))
	n, err := s2.DecodedLen(src)
	if err != nil {
		panic("memindex: a packed chunk text does not decode: " + err.Error())
	}
	if n == 0 {
		return ""
	}
	out, err := s2.Decode(make([]byte, n), src)
	if err != nil {
		panic("memindex: a packed chunk text does not decode: " + err.Error())
	}
	// out is this call's own, written no more.
	return unsafe.String(unsafe.SliceData(out), len(out))
}
