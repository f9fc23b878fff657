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
	"slices"
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

// MaxJSONDepth is the deepest nesting of arrays and objects Cordon decodes,
// counting the outermost object as level 1. A request body, an NDJSON batch
// line or a token's claims that nest deeper are refused (400, or 401 for a
// token) as soon as the scan reaches level MaxJSONDepth+1, before anything
// is decoded. Cordon's own fields use at most 2 levels; the rest is room for
// free-form metadata. The limit bounds the stack and memory of every
// decoder that follows: encoding/json's own limit is 10,000 levels, and a
// recursive walk over millions of levels overflows the goroutine stack, a
// fatal error that no recover catches.
const MaxJSONDepth = 64

// MaxMetadataBytes bounds a document's free-form metadata as sent (its JSON
// text). Metadata is kept raw until this check passes: building it as Go
// values costs about 47 bytes per input byte, so the bound keeps a document
// body's decoding cost near its size.
const MaxMetadataBytes = 64 << 10

// DecodeStrict decodes exactly one JSON object into dst and refuses what a
// lenient decoder would quietly accept: invalid UTF-8 or unpaired surrogate
// escapes (encoding/json would repair them into U+FFFD), nesting deeper than
// [MaxJSONDepth], duplicate keys (the last would win), keys that only match
// a field case-insensitively, unknown fields, and trailing data.
//
// One scan over the bytes ([walkJSON]) checks syntax, depth and keys,
// allocating little, before encoding/json decodes anything, so a hostile
// body costs time and memory linear in its size and a too-deep one is
// refused after MaxJSONDepth+1 brackets.
func DecodeStrict(data []byte, dst any) error {
	if !jsontext.ValidUTF8(data) {
		return errors.New("the body is not valid UTF-8 (or has an unpaired surrogate escape); Cordon never repairs text")
	}
	if err := walkJSON(data, "the body", bodyKey); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return cleanJSONError(err)
	}
	return nil
}

// bodyKey is the key rule of request bodies: outside free-form "metadata"
// every key must be lower-case snake_case, so a key cannot reach a field by
// encoding/json's case-insensitive match ("Query", "QUERY", a Kelvin sign).
func bodyKey(w *jsonWalker, key []byte, _ byte) error {
	top := &w.frames[0]
	if !top.object {
		return nil // walkJSON reports that the body is not an object
	}
	if len(w.frames) > 1 && string(top.key) == "metadata" {
		return nil
	}
	if !snakeCase(key) {
		return fmt.Errorf("unknown field %q", w.path())
	}
	return nil
}

// jsonWalker scans one JSON value without recursion: see [walkJSON].
type jsonWalker struct {
	data []byte
	what string // "the body", "the claims": the subject of its messages
	// frames are the open arrays and objects, outermost first.
	frames []walkFrame
	// keys holds the keys of the open objects, each object's from its
	// frame's keysStart on, for the duplicate check when it closes.
	keys [][]byte
	// onKey is called for each object key (decoded) with the first byte
	// of its value; w.frames' last entry is the object, its key set.
	onKey func(w *jsonWalker, key []byte, value byte) error
}

type walkFrame struct {
	object    bool
	keysStart int
	key       []byte // an object's current key
}

// walkJSON checks that data is exactly one JSON value (RFC 8259 grammar,
// whitespace around it allowed) whose outermost value is an object, nesting
// at most [MaxJSONDepth] levels, with no object repeating a key, and calls
// onKey for every key. It is a single pass over the bytes; it allocates its
// frame stack once and a slice header per key of the open objects (a key
// with escapes is decoded into a copy). It does not check UTF-8: callers
// run [jsontext.ValidUTF8] first.
func walkJSON(data []byte, what string, onKey func(w *jsonWalker, key []byte, value byte) error) error {
	w := &jsonWalker{data: data, what: what, frames: make([]walkFrame, 0, 8), onKey: onKey}
	if err := w.walk(); err != nil {
		return err
	}
	if i := skipSpace(data, 0); data[i] != '{' {
		return fmt.Errorf("%s must be a JSON object", what)
	}
	return nil
}

// path names the current key: the open objects' keys joined with dots
// (array elements add nothing), as "policy.limit".
func (w *jsonWalker) path() string {
	var b strings.Builder
	for _, f := range w.frames {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(f.key)
		}
	}
	return b.String()
}

func (w *jsonWalker) syntax(i int, format string, a ...any) error {
	if i >= len(w.data) {
		return fmt.Errorf("%s is not a complete JSON value", w.what)
	}
	return fmt.Errorf("malformed JSON at byte %d: %s", i+1, fmt.Sprintf(format, a...))
}

func (w *jsonWalker) walk() error {
	data := w.data
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return w.syntax(i, "")
		}
		var err error
		switch c := data[i]; {
		case c == '{' || c == '[':
			if len(w.frames) == MaxJSONDepth {
				return fmt.Errorf("%s nests deeper than %d levels of arrays and objects (at byte %d); the limit is %d",
					w.what, MaxJSONDepth, i+1, MaxJSONDepth)
			}
			w.frames = append(w.frames, walkFrame{object: c == '{', keysStart: len(w.keys)})
			if i = skipSpace(data, i+1); i < len(data) && (c == '{' && data[i] == '}' || c == '[' && data[i] == ']') {
				w.frames = w.frames[:len(w.frames)-1]
				i++
				break
			}
			if c == '{' {
				if i, err = w.member(i); err != nil {
					return err
				}
			}
			continue
		case c == '"':
			i, _, err = w.skipString(i)
		case c == '-' || c >= '0' && c <= '9':
			i, err = w.skipNumber(i)
		case c == 't':
			i, err = w.literal(i, "true")
		case c == 'f':
			i, err = w.literal(i, "false")
		case c == 'n':
			i, err = w.literal(i, "null")
		default:
			return w.syntax(i, "invalid character %q looking for a value", c)
		}
		if err != nil {
			return err
		}
		// After a value: close containers until a comma or the end.
		for {
			i = skipSpace(data, i)
			if len(w.frames) == 0 {
				if i < len(data) {
					return fmt.Errorf("trailing data after the JSON object (at byte %d)", i+1)
				}
				return nil
			}
			if i >= len(data) {
				return w.syntax(i, "")
			}
			f := &w.frames[len(w.frames)-1]
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if f.object {
					if i, err = w.member(i); err != nil {
						return err
					}
				}
				break
			}
			if f.object && c == '}' {
				if err := w.closeObject(); err != nil {
					return err
				}
			} else if f.object || c != ']' {
				return w.syntax(i, "invalid character %q after a value (want ',' or the closing bracket)", c)
			}
			w.frames = w.frames[:len(w.frames)-1]
			i++
		}
	}
}

// member reads an object key and its colon at i and returns where the
// value starts.
func (w *jsonWalker) member(i int) (int, error) {
	data := w.data
	if i >= len(data) || data[i] != '"' {
		return 0, w.syntax(i, "invalid character %q looking for an object key", at(data, i))
	}
	end, escaped, err := w.skipString(i)
	if err != nil {
		return 0, err
	}
	key := data[i+1 : end-1]
	if escaped {
		var s string
		if err := json.Unmarshal(data[i:end], &s); err != nil {
			return 0, w.syntax(i, "bad object key: %s", err.Error())
		}
		key = []byte(s)
	}
	i = skipSpace(data, end)
	if i >= len(data) || data[i] != ':' {
		return 0, w.syntax(i, "invalid character %q after an object key (want ':')", at(data, i))
	}
	if i = skipSpace(data, i+1); i >= len(data) {
		return 0, w.syntax(i, "")
	}
	w.frames[len(w.frames)-1].key = key
	w.keys = append(w.keys, key)
	if w.onKey != nil {
		if err := w.onKey(w, key, data[i]); err != nil {
			return 0, err
		}
	}
	return i, nil
}

// closeObject rejects a key the closing object repeats and forgets its keys.
func (w *jsonWalker) closeObject() error {
	f := &w.frames[len(w.frames)-1]
	keys := w.keys[f.keysStart:]
	defer func() { w.keys = w.keys[:f.keysStart] }()
	var dup []byte
	if len(keys) <= 8 {
		for j := 1; j < len(keys) && dup == nil; j++ {
			for _, k := range keys[:j] {
				if bytes.Equal(k, keys[j]) {
					dup = k
					break
				}
			}
		}
	} else {
		slices.SortFunc(keys, bytes.Compare)
		for j := 1; j < len(keys); j++ {
			if bytes.Equal(keys[j-1], keys[j]) {
				dup = keys[j]
				break
			}
		}
	}
	if dup != nil {
		f.key = dup
		return fmt.Errorf("duplicate key %q", w.path())
	}
	return nil
}

// skipString returns the index after the string starting at i and whether
// it has escapes.
func (w *jsonWalker) skipString(i int) (int, bool, error) {
	data := w.data
	escaped := false
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			j++
			if j >= len(data) {
				return 0, false, w.syntax(j, "")
			}
			switch data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if j+k >= len(data) {
						return 0, false, w.syntax(j+k, "")
					}
					if !isHex(data[j+k]) {
						return 0, false, w.syntax(j+k, "invalid character %q in \\u hexadecimal character escape", data[j+k])
					}
				}
				j += 4
			default:
				return 0, false, w.syntax(j, "invalid character %q in string escape code", data[j])
			}
		case c < 0x20:
			return 0, false, w.syntax(j, "invalid character %q in string literal", c)
		}
	}
	return 0, false, w.syntax(len(data), "")
}

// skipNumber returns the index after the number starting at i:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *jsonWalker) skipNumber(i int) (int, error) {
	data := w.data
	digits := func(j int) int {
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return j
	}
	need := func(j int, what string) error {
		if j >= len(data) {
			return w.syntax(j, "")
		}
		return w.syntax(j, "invalid character %q %s", data[j], what)
	}
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		i = digits(i)
	default:
		return 0, need(i, "in numeric literal")
	}
	if i < len(data) && data[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, need(j, "after decimal point in numeric literal")
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, need(j, "in exponent of numeric literal")
		}
		i = j
	}
	return i, nil
}

func (w *jsonWalker) literal(i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(w.data) {
			return 0, w.syntax(i+k, "")
		}
		if w.data[i+k] != lit[k] {
			return 0, w.syntax(i+k, "invalid character %q in literal %s", w.data[i+k], lit)
		}
	}
	return i + len(lit), nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// at is data[i], or 0 past the end (the messages print it with %q).
func at(data []byte, i int) byte {
	if i < len(data) {
		return data[i]
	}
	return 0
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
