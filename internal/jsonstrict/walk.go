package jsonstrict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxDepth is the deepest nesting of arrays and objects Cordon decodes,
// counting the outermost object as level 1. A request body, an NDJSON batch
// line, a token's claims or a replay step that nest deeper are refused as
// soon as the scan reaches level MaxDepth+1, before anything is decoded.
// Cordon's own fields use at most 3 levels; the rest is room for free-form
// metadata. The limit bounds the stack and memory of every decoder that
// follows: encoding/json's own limit is 10,000 levels, and a recursive walk
// over millions of levels overflows the goroutine stack, a fatal error that
// no recover catches.
const MaxDepth = 64

// KeyFunc is a key rule: [Walk] calls it for each object key (decoded) with
// the first byte of its value; s's innermost open container is the object,
// its key set. An error stops the scan.
type KeyFunc func(s *Scan, key []byte, value byte) error

// Scan scans one JSON value without recursion: see [Walk].
type Scan struct {
	data []byte
	what string // "the body", "the claims": the subject of its messages
	// frames are the open arrays and objects, outermost first.
	frames []frame
	// keys holds the keys of the open objects, each object's from its
	// frame's keysStart on, for the duplicate check when it closes.
	keys [][]byte
	// onKey is called for each object key (decoded) with the first byte
	// of its value; w.frames' last entry is the object, its key set.
	onKey KeyFunc
}

type frame struct {
	object    bool
	keysStart int
	key       []byte // an object's current key
}

// Walk checks that data is exactly one JSON value (RFC 8259 grammar,
// whitespace around it allowed) whose outermost value is an object, nesting
// at most [MaxDepth] levels, with no object repeating a key, and calls
// onKey for every key. It is a single pass over the bytes; it allocates its
// frame stack once and a slice header per key of the open objects (a key
// with escapes is decoded into a copy). It does not check UTF-8: callers
// run [ValidUTF8] first.
func Walk(data []byte, what string, onKey KeyFunc) error {
	w := &Scan{data: data, what: what, frames: make([]frame, 0, 8), onKey: onKey}
	if err := w.walk(); err != nil {
		return err
	}
	if i := skipSpace(data, 0); data[i] != '{' {
		return fmt.Errorf("%s must be a JSON object", what)
	}
	return nil
}

// Depth is how many arrays and objects are open: 1 inside the outermost.
func (w *Scan) Depth() int { return len(w.frames) }

// Object reports whether the open container at level (0 the outermost) is
// an object.
func (w *Scan) Object(level int) bool { return w.frames[level].object }

// Key is the current key of the open object at level (0 the outermost);
// nil for an array.
func (w *Scan) Key(level int) []byte { return w.frames[level].key }

// Path names the current key: the open objects' keys joined with dots
// (array elements add nothing), as "policy.limit".
func (w *Scan) Path() string {
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

func (w *Scan) syntax(i int, format string, a ...any) error {
	if i >= len(w.data) {
		return fmt.Errorf("%s is not a complete JSON value", w.what)
	}
	return fmt.Errorf("malformed JSON at byte %d: %s", i+1, fmt.Sprintf(format, a...))
}

func (w *Scan) walk() error {
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
			if len(w.frames) == MaxDepth {
				return fmt.Errorf("%s nests deeper than %d levels of arrays and objects (at byte %d); the limit is %d",
					w.what, MaxDepth, i+1, MaxDepth)
			}
			w.frames = append(w.frames, frame{object: c == '{', keysStart: len(w.keys)})
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
func (w *Scan) member(i int) (int, error) {
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
func (w *Scan) closeObject() error {
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
		return fmt.Errorf("duplicate key %q", w.Path())
	}
	return nil
}

// skipString returns the index after the string starting at i and whether
// it has escapes.
func (w *Scan) skipString(i int) (int, bool, error) {
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
func (w *Scan) skipNumber(i int) (int, error) {
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

func (w *Scan) literal(i int, lit string) (int, error) {
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
