package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
)

// mediaJSON checks a request's Content-Type against the accepted types
// (with an optional charset=utf-8).
func mediaOK(r *http.Request, accepted ...string) *apiError {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil {
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			err = errors.New("charset")
		}
	}
	for _, a := range accepted {
		if err == nil && mt == a {
			return nil
		}
	}
	return errf(http.StatusUnsupportedMediaType, "unsupported_media_type",
		"Content-Type %q is not accepted here: send %s (UTF-8)", ct, strings.Join(accepted, " or "))
}

// readBody reads at most limit bytes of the body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, errf(http.StatusRequestEntityTooLarge, "payload_too_large", "the request body is over the limit of %d bytes", limit)
		}
		return nil, errf(http.StatusBadRequest, "bad_request", "reading the request body failed")
	}
	return data, nil
}

// decodeJSONRequest checks the media type, reads the body within limit and
// decodes it strictly into dst.
func decodeJSONRequest(w http.ResponseWriter, r *http.Request, limit int64, dst any) *apiError {
	if e := mediaOK(r, "application/json"); e != nil {
		return e
	}
	data, e := readBody(w, r, limit)
	if e != nil {
		return e
	}
	if err := DecodeStrict(data, dst); err != nil {
		return errf(http.StatusBadRequest, "bad_request", "%s", err.Error())
	}
	return nil
}

// MaxJSONDepth is the deepest nesting of arrays and objects Cordon decodes,
// counting the outermost object as level 1 ([jsonstrict.MaxDepth]). A
// request body, an NDJSON batch line or a token's claims that nest deeper
// are refused (400, or 401 for a token) before anything is decoded.
const MaxJSONDepth = jsonstrict.MaxDepth

// MaxMetadataBytes bounds a document's free-form metadata as sent (its JSON
// text). Metadata is kept raw until this check passes: building it as Go
// values costs about 47 bytes per input byte, so the bound keeps a document
// body's decoding cost near its size.
const MaxMetadataBytes = 64 << 10

// bodyDecoder is the request bodies' contract: the shared strict decoder
// ([jsonstrict.Decoder]) with the snake_case key rule and the API's wording.
var bodyDecoder = jsonstrict.Decoder{What: "the body", Keys: bodyKey}

// DecodeStrict decodes exactly one JSON object into dst and refuses what a
// lenient decoder would quietly accept: invalid UTF-8 or unpaired surrogate
// escapes (encoding/json would repair them into U+FFFD), nesting deeper than
// [MaxJSONDepth], duplicate keys (the last would win), keys that only match
// a field case-insensitively, unknown fields, and trailing data. It is
// [jsonstrict.Decoder.Decode] with the request bodies' key rule.
func DecodeStrict(data []byte, dst any) error {
	return bodyDecoder.Decode(data, dst)
}

// bodyKey is the key rule of request bodies: outside free-form "metadata"
// every key must be lower-case snake_case, so a key cannot reach a field by
// encoding/json's case-insensitive match ("Query", "QUERY", a Kelvin sign).
func bodyKey(s *jsonstrict.Scan, key []byte, _ byte) error {
	if !s.Object(0) {
		return nil // the scan reports that the body is not an object
	}
	if s.Depth() > 1 && string(s.Key(0)) == "metadata" {
		return nil
	}
	if !snakeCase(key) {
		return fmt.Errorf("unknown field %q", s.Path())
	}
	return nil
}

func snakeCase(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// noNUL rejects U+0000 in text fields: PostgreSQL text cannot store it.
func noNUL(fields map[string]string) error {
	for name, v := range fields {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%s contains U+0000 (NUL), which Cordon cannot store", name)
		}
	}
	return nil
}

// metadataNUL reports whether a metadata value holds a NUL in a key or string.
func metadataNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || metadataNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if metadataNUL(e) {
				return true
			}
		}
	}
	return false
}
