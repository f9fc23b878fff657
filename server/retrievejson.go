package server

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// A retrieve's answer is the service's largest and most frequent body
// (about 10 KB for ten chunks with their text). It is encoded by hand:
// encoding/json walks its fields by reflection on every request. The bytes
// are exactly encoding/json's, as json.NewEncoder(w).Encode writes them
// (HTML-safe escaping, invalid UTF-8 as U+FFFD, the trailing newline);
// TestRetrieveResponseJSONMatchesEncodingJSON and FuzzRetrieveResponseJSON
// hold the two to that. A value encoding/json refuses (a NaN or infinite
// score) is left to it, so it answers 500 as before.

// jsonAppender is a response body that encodes itself as encoding/json
// would. ok is false when it cannot, and encoding/json then does.
type jsonAppender interface {
	appendJSON(dst []byte) (out []byte, ok bool)
}

var _ jsonAppender = (*RetrieveResponse)(nil)

// appendJSON appends r as json.Encoder.Encode writes it, newline included.
func (r *RetrieveResponse) appendJSON(dst []byte) ([]byte, bool) {
	ok := true
	dst = append(dst, `{"results":`...)
	if r.Results == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range r.Results {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendResultJSON(dst, &r.Results[i]); !ok {
				return dst, false
			}
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"degraded":`...)
	dst = appendStringsJSON(dst, r.Degraded)
	dst = append(dst, `,"now_tick":`...)
	dst = strconv.AppendInt(dst, r.NowTick, 10)
	if r.Considered != nil {
		dst = append(dst, `,"considered":`...)
		dst = strconv.AppendInt(dst, int64(*r.Considered), 10)
	}
	if r.ExcludedByEntitlement != nil {
		dst = append(dst, `,"excluded_by_entitlement":`...)
		dst = strconv.AppendInt(dst, int64(*r.ExcludedByEntitlement), 10)
	}
	if r.ExcludedByFreshness != nil {
		dst = append(dst, `,"excluded_by_freshness":`...)
		dst = strconv.AppendInt(dst, int64(*r.ExcludedByFreshness), 10)
	}
	if r.IndexVersion != nil {
		dst = append(dst, `,"index_version":`...)
		dst = strconv.AppendInt(dst, *r.IndexVersion, 10)
	}
	if len(r.Expansion) > 0 { // omitempty
		dst = append(dst, `,"expansion":`...)
		dst = appendStringsJSON(dst, r.Expansion)
	}
	return append(dst, '}', '\n'), true
}

// appendResultJSON appends one [ResultJSON] (retrieval.ScoredJSON) in its
// fields' order, with their omitempty rules.
func appendResultJSON(dst []byte, c *ResultJSON) ([]byte, bool) {
	ok := true
	dst = append(dst, `{"chunk_id":`...)
	dst = appendStringJSON(dst, c.ChunkID)
	if c.Digest != "" {
		dst = append(dst, `,"digest":`...)
		dst = appendStringJSON(dst, c.Digest)
	}
	dst = append(dst, `,"doc_id":`...)
	dst = appendStringJSON(dst, c.DocID)
	dst = append(dst, `,"section":`...)
	dst = appendStringJSON(dst, c.Section)
	if c.Text != "" {
		dst = append(dst, `,"text":`...)
		dst = appendStringJSON(dst, c.Text)
	}
	dst = append(dst, `,"start_char":`...)
	dst = strconv.AppendInt(dst, int64(c.StartChar), 10)
	dst = append(dst, `,"end_char":`...)
	dst = strconv.AppendInt(dst, int64(c.EndChar), 10)
	dst = append(dst, `,"bm25":`...)
	if dst, ok = appendFloatPtrJSON(dst, c.BM25); !ok {
		return dst, false
	}
	dst = append(dst, `,"bm25_rank":`...)
	dst = appendIntPtrJSON(dst, c.BM25Rank)
	dst = append(dst, `,"cosine":`...)
	if dst, ok = appendFloatPtrJSON(dst, c.Cosine); !ok {
		return dst, false
	}
	dst = append(dst, `,"cosine_rank":`...)
	dst = appendIntPtrJSON(dst, c.CosineRank)
	dst = append(dst, `,"fused":`...)
	if dst, ok = appendFloatJSON(dst, c.Fused); !ok {
		return dst, false
	}
	dst = append(dst, `,"rerank":`...)
	if dst, ok = appendFloatPtrJSON(dst, c.Rerank); !ok {
		return dst, false
	}
	if c.DocRank != nil {
		dst = append(dst, `,"doc_rank":`...)
		dst = strconv.AppendInt(dst, int64(*c.DocRank), 10)
	}
	return append(dst, '}'), true
}

func appendIntPtrJSON(dst []byte, v *int) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(*v), 10)
}

func appendFloatPtrJSON(dst []byte, v *float64) ([]byte, bool) {
	if v == nil {
		return append(dst, "null"...), true
	}
	return appendFloatJSON(dst, *v)
}

// appendFloatJSON appends f as encoding/json writes a float64 (ES6 number
// formatting: 'f', or 'e' below 1e-6 and from 1e21 with the exponent's
// leading zero dropped). NaN and infinities are not JSON: ok is false.
func appendFloatJSON(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// appendStringsJSON appends a []string: null when nil.
func appendStringsJSON(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendStringJSON(dst, s)
	}
	return append(dst, ']')
}

// jsonSafe marks the ASCII bytes encoding/json writes as they are with HTML
// escaping on: printable, and none of " \ < > &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := byte(0x20); b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendStringJSON appends s quoted as encoding/json does with HTML
// escaping on (its default): \" \\ \b \f \n \r \t, other control bytes and
// < > & as \u00XX, each invalid UTF-8 byte as \ufffd, U+2028 and U+2029
// as \u2028 and \u2029.
func appendStringJSON(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
