package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cordon-rag/cordon/internal/jsontext"
	"io"
	"mime"
	"net/http"
	"strings"
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

// DecodeStrict decodes exactly one JSON object into dst and refuses what a
// lenient decoder would quietly accept: invalid UTF-8 or unpaired surrogate
// escapes (encoding/json would repair them into U+FFFD), duplicate keys (the
// last would win), keys that only match a field case-insensitively, unknown
// fields, and trailing data.
func DecodeStrict(data []byte, dst any) error {
	if !jsontext.ValidUTF8(data) {
		return errors.New("the body is not valid UTF-8 (or has an unpaired surrogate escape); Cordon never repairs text")
	}
	if err := checkKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return cleanJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// checkKeys walks the JSON tokens: the value must be an object, no object may
// repeat a key, and outside free-form "metadata" every key must be lower-case
// snake_case, so a key cannot reach a field by encoding/json's
// case-insensitive match ("Query", "QUERY").
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	first := true
	var walk func(path string, free bool) error
	walk = func(path string, free bool) error {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		d, ok := tok.(json.Delim)
		if first {
			first = false
			if !ok || d != '{' {
				return errors.New("the body must be a JSON object")
			}
		}
		if !ok {
			return nil
		}
		switch d {
		case '{':
			seen := make(map[string]struct{})
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return syntaxError(err)
				}
				k, _ := kt.(string)
				if _, dup := seen[k]; dup {
					return fmt.Errorf("duplicate key %q", path+k)
				}
				seen[k] = struct{}{}
				if !free && !snakeCase(k) {
					return fmt.Errorf("unknown field %q", path+k)
				}
				if err := walk(path+k+".", free || (path == "" && k == "metadata")); err != nil {
					return err
				}
			}
		case '[':
			for dec.More() {
				if err := walk(path, free); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return syntaxError(err)
		}
		return nil
	}
	return walk("", false)
}

func snakeCase(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func syntaxError(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the body is not a complete JSON value")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	return fmt.Errorf("malformed JSON: %s", err.Error())
}

// cleanJSONError turns encoding/json's messages into ones that name the field.
func cleanJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		what := te.Type.Kind().String()
		switch what {
		case "slice":
			what = "list"
		case "map", "struct", "ptr":
			what = "object"
		case "int", "int64", "int32":
			what = "integer (no fraction or exponent) in range"
		case "float64":
			what = "number"
		}
		if te.Field != "" {
			return fmt.Errorf("field %q: a JSON %s is not a %s", te.Field, te.Value, what)
		}
		return fmt.Errorf("a JSON %s is not a %s", te.Value, what)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return syntaxError(err)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the body is not a complete JSON value")
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return errors.New(msg)
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
