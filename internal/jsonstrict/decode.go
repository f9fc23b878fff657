package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// Decoder is one contract's strict decoding: the HTTP API's request bodies
// and the replay format's steps share the scan, the depth limit, the
// duplicate-key rule and the error cleaning, and differ in how keys are
// checked and in the wording of type errors, which each contract pins (the
// API's responses, the replay golden files).
type Decoder struct {
	// What names the decoded text in messages: "the body", "the step".
	What string
	// Keys, when set, checks each object key first (a contract's own rule,
	// such as the API's snake_case keys); every key is then checked
	// against dst's type ([FieldKeys]), so an unknown field is named with
	// its path ("policy.x") under either contract.
	Keys KeyFunc
	// Plain words type errors as `field "claims": string is not a list`
	// (the replay format's wording) rather than `field "claims": a JSON
	// string is not a list` (the API's).
	Plain bool
}

// Decode decodes exactly one JSON object into dst and refuses what a
// lenient decoder would quietly accept: invalid UTF-8 or unpaired surrogate
// escapes (encoding/json would repair them into U+FFFD), nesting deeper than
// [MaxDepth], duplicate keys (the last would win), keys the key rule refuses
// (case variants that encoding/json would match case-insensitively), unknown
// fields, and trailing data.
//
// One scan over the bytes ([Walk]) checks syntax, depth and keys, allocating
// little, before encoding/json decodes anything, so a hostile text costs
// time and memory linear in its size and a too-deep one is refused after
// MaxDepth+1 brackets.
func (d Decoder) Decode(data []byte, dst any) error {
	if !ValidUTF8(data) {
		return fmt.Errorf("%s is not valid UTF-8 (or has an unpaired surrogate escape); Cordon never repairs text", d.What)
	}
	// An unknown field is reported once the scan has passed the whole text,
	// so that a text that is malformed, too deep or repeats a key is
	// refused for that, whatever keys it holds.
	fields, own := FieldKeys(reflect.TypeOf(dst)), d.Keys
	var unknown error
	keys := func(s *Scan, key []byte, value byte) error {
		if own != nil {
			if err := own(s, key, value); err != nil {
				return err
			}
		}
		if unknown == nil {
			unknown = fields(s, key, value)
		}
		return nil
	}
	if err := Walk(data, d.What, keys); err != nil {
		return err
	}
	if unknown != nil {
		return unknown
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return CleanError(err, data, d.Plain)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// FieldKeys is the key rule of a schema: in every object that decodes into
// a struct, a key must be exactly the json name of one of its fields (no
// case variant), else the rule returns `unknown field "path"` (a [Walk]
// stops there; [Decoder.Decode] reports it once the scan has passed). Objects
// that decode into maps, interfaces or types with their own UnmarshalJSON
// are not checked beyond the scan's own rules; a value of the wrong kind is
// left for the decoder to report.
func FieldKeys(root reflect.Type) KeyFunc {
	return func(s *Scan, key []byte, _ byte) error {
		t := root
		for level := 0; level < s.Depth(); level++ {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			info := infoOf(t)
			if info.unmarshaler {
				return nil
			}
			last := level == s.Depth()-1
			switch {
			case s.Object(level) && t.Kind() == reflect.Struct:
				k := key
				if !last {
					k = s.Key(level)
				}
				ft, ok := info.fields[string(k)]
				if !ok {
					if last {
						return fmt.Errorf("unknown field %q", s.Path())
					}
					return nil
				}
				t = ft
			case s.Object(level) && t.Kind() == reflect.Map, !s.Object(level) && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
				t = t.Elem()
			default:
				return nil
			}
		}
		return nil
	}
}

// typeInfo is what [FieldKeys] asks of a type, worked out once per type:
// every key of every request would otherwise read the struct's tags again.
type typeInfo struct {
	// unmarshaler is whether a pointer to the type has its own
	// UnmarshalJSON.
	unmarshaler bool
	// fields maps a struct's json names to their fields' types: the
	// first field of each name, in field order (nil for other kinds).
	fields map[string]reflect.Type
}

// typeInfos caches a *typeInfo per reflect.Type. The types are those of
// the decoders' destinations and what they hold, a fixed set.
var typeInfos sync.Map

// infoOf returns t's typeInfo.
func infoOf(t reflect.Type) *typeInfo {
	if v, ok := typeInfos.Load(t); ok {
		return v.(*typeInfo)
	}
	info := &typeInfo{unmarshaler: reflect.PointerTo(t).Implements(unmarshalerType)}
	if t.Kind() == reflect.Struct {
		info.fields = map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if _, dup := info.fields[tag]; tag != "" && tag != "-" && !dup {
				info.fields[tag] = f.Type
			}
		}
	}
	v, _ := typeInfos.LoadOrStore(t, info)
	return v.(*typeInfo)
}

// CleanError turns encoding/json's messages about data into ones that name
// the field, in the API's wording or, with plain, the replay format's (see
// [Decoder]).
func CleanError(err error, data []byte, plain bool) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if plain {
			return plainTypeError(te, data)
		}
		if te.Field != "" {
			return fmt.Errorf("field %q: a JSON %s is not %s", te.Field, te.Value, withArticle(kindName(te.Type)))
		}
		return fmt.Errorf("a JSON %s is not %s", te.Value, withArticle(kindName(te.Type)))
	}
	if plain {
		return err
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the body is not a complete JSON value")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// plainTypeError is the replay format's wording of a type error. A number
// field names the offending value as written, "2.0 is not an integer",
// "\"0.5\" is not a number" (the golden files pin these).
func plainTypeError(te *json.UnmarshalTypeError, data []byte) error {
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		if lit, ok := rawValue(te, data); ok {
			return IntError(lit)
		}
	case reflect.Float64:
		if lit, ok := rawValue(te, data); ok {
			return fmt.Errorf("%s is not a number", lit)
		}
	}
	if te.Field != "" {
		return fmt.Errorf("field %q: %s is not %s", te.Field, te.Value, withArticle(kindName(te.Type)))
	}
	return fmt.Errorf("%s is not %s", te.Value, withArticle(kindName(te.Type)))
}

// kindName names what a Go type wants in JSON's terms.
func kindName(t reflect.Type) string {
	switch k := t.Kind().String(); k {
	case "slice":
		return "list"
	case "map", "struct", "ptr":
		return "object"
	case "int", "int64", "int32", "int16", "int8":
		return "integer in range (no fraction or exponent)"
	case "uint", "uint64", "uint32", "uint16", "uint8":
		return "non-negative integer in range (no fraction or exponent)"
	case "float64", "float32":
		return "number"
	default:
		return k
	}
}

// withArticle puts "a" or "an" before a kind's name: "an integer", "an
// object", "a list". Every name kindName gives that starts with a vowel
// letter is read with a vowel sound (the unsigned kinds are named
// "non-negative integer", never "uint").
func withArticle(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// rawValue is the JSON value a type error is about, as written in data.
// encoding/json gives the offset after a literal (number, string, bool), or
// after the opening bracket of an array or object.
func rawValue(te *json.UnmarshalTypeError, data []byte) (string, bool) {
	if lit, ok := strings.CutPrefix(te.Value, "number "); ok {
		return lit, true
	}
	end := int(te.Offset)
	if end < 1 || end > len(data) {
		return "", false
	}
	start := end - 1
	switch c := data[start]; {
	case c == '[' || c == '{':
		var raw json.RawMessage
		if json.NewDecoder(bytes.NewReader(data[start:])).Decode(&raw) != nil {
			return "", false
		}
		return string(raw), true
	case c == '"':
		for start--; start >= 0; start-- {
			if data[start] == '"' && backslashes(data[:start])%2 == 0 {
				return string(data[start:end]), true
			}
		}
		return "", false
	default:
		for start > 0 && data[start-1] >= 'a' && data[start-1] <= 'z' {
			start--
		}
		return string(data[start:end]), true
	}
}

// backslashes counts the backslashes that end b.
func backslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// IntError is the replay format's message for a JSON value lit that is not
// an integer in int64's range.
func IntError(lit string) error {
	if strings.ContainsAny(lit, `.eE"`) {
		return fmt.Errorf("%s is not an integer (write integers without a fraction or exponent)", lit)
	}
	return fmt.Errorf("%s is not a 64-bit integer", lit)
}
