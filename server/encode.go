package server

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// The retrieve answer is the one body on every request's path whose
// encoding shows in a profile (ten results with their texts, about 10 KB):
// encoding/json spends most of that on reflection over ResultJSON. Its
// bytes are written here directly, exactly as json.Encoder.Encode writes
// them (HTML-safe escaping, invalid UTF-8 as U+FFFD, U+2028 and U+2029
// escaped, ES6 number formatting, a final newline); TestRetrieveResponseJSON
// and FuzzRetrieveResponseJSON hold the two to the same bytes.

// jsonAppender is a response body that encodes itself as encoding/json
// would; [writeJSON] uses it instead of reflection.
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

// errUnsupportedFloat is what encoding/json refuses: NaN and infinities.
var errUnsupportedFloat = errors.New("json: unsupported value: NaN or infinity")

// appendJSON appends r as json.Encoder.Encode writes it, newline included.
func (r *RetrieveResponse) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"results":`...)
	if r.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Results {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendResult(b, &r.Results[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"degraded":`...)
	b = appendStrings(b, r.Degraded)
	b = append(b, `,"now_tick":`...)
	b = strconv.AppendInt(b, r.NowTick, 10)
	for _, f := range []struct {
		key string
		v   *int
	}{{`,"considered":`, r.Considered}, {`,"excluded_by_entitlement":`, r.ExcludedByEntitlement}, {`,"excluded_by_freshness":`, r.ExcludedByFreshness}} {
		if f.v != nil {
			b = append(b, f.key...)
			b = strconv.AppendInt(b, int64(*f.v), 10)
		}
	}
	if r.IndexVersion != nil {
		b = append(b, `,"index_version":`...)
		b = strconv.AppendInt(b, *r.IndexVersion, 10)
	}
	if len(r.Expansion) > 0 {
		b = append(b, `,"expansion":`...)
		b = appendStrings(b, r.Expansion)
	}
	return append(b, "}\n"...), nil
}

// appendResult appends one result object, fields in ResultJSON's order.
func appendResult(b []byte, c *ResultJSON) ([]byte, error) {
	var err error
	b = append(b, `{"chunk_id":`...)
	b = appendString(b, c.ChunkID)
	if c.Digest != "" {
		b = append(b, `,"digest":`...)
		b = appendString(b, c.Digest)
	}
	b = append(b, `,"doc_id":`...)
	b = appendString(b, c.DocID)
	b = append(b, `,"section":`...)
	b = appendString(b, c.Section)
	if c.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, c.Text)
	}
	b = append(b, `,"start_char":`...)
	b = strconv.AppendInt(b, int64(c.StartChar), 10)
	b = append(b, `,"end_char":`...)
	b = strconv.AppendInt(b, int64(c.EndChar), 10)
	b = append(b, `,"bm25":`...)
	if b, err = appendFloatPtr(b, c.BM25); err != nil {
		return nil, err
	}
	b = append(b, `,"bm25_rank":`...)
	b = appendIntPtr(b, c.BM25Rank)
	b = append(b, `,"cosine":`...)
	if b, err = appendFloatPtr(b, c.Cosine); err != nil {
		return nil, err
	}
	b = append(b, `,"cosine_rank":`...)
	b = appendIntPtr(b, c.CosineRank)
	b = append(b, `,"fused":`...)
	if b, err = appendFloat(b, c.Fused); err != nil {
		return nil, err
	}
	b = append(b, `,"rerank":`...)
	if b, err = appendFloatPtr(b, c.Rerank); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendStrings(b []byte, s []string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

func appendIntPtr(b []byte, v *int) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendFloatPtr(b []byte, v *float64) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	return appendFloat(b, *v)
}

// appendFloat formats f as encoding/json does: like strconv's shortest
// 'f', with 'e' below 1e-6 and from 1e21 on, and exponents unpadded.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errUnsupportedFloat
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does with HTML escaping on.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control bytes, and <, >, &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are escaped for JSONP's sake, as encoding/json does.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
