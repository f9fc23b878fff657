package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Int is a JSON integer field: it rejects 2.0, 1e3, strings and values outside
// int64.
type Int struct {
	V   int64
	Set bool
}

// UnmarshalJSON accepts a JSON integer literal only.
func (i *Int) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*i = Int{}
		return nil
	}
	if bytes.ContainsAny(b, ".eE\"") {
		return fmt.Errorf("%s is not an integer (write integers without a fraction or exponent)", b)
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a 64-bit integer", b)
	}
	*i = Int{V: v, Set: true}
	return nil
}

// Float is a JSON number field.
type Float struct {
	V   float64
	Set bool
}

// UnmarshalJSON accepts any JSON number.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float{}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%s is not a number", b)
	}
	*f = Float{V: v, Set: true}
	return nil
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown fields
// and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cleanJSONError(err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// cleanJSONError turns encoding/json's messages into ones that name the field.
func cleanJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("field %q: %s is not a %s", te.Field, te.Value, jsonKind(te.Type.Kind().String()))
		}
		return fmt.Errorf("%s is not a %s", te.Value, jsonKind(te.Type.Kind().String()))
	}
	return err
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "list"
	case "map", "struct", "ptr":
		return "object"
	}
	return k
}

// validUTF8JSON reports whether raw JSON text is valid UTF-8 and has no
// unpaired surrogate escape (\ud800-\udfff not forming a pair). encoding/json
// would silently replace either with U+FFFD; Cordon rejects text it would
// have to repair (SPEC section 2).
func validUTF8JSON(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i++ // skip the escaped character, e.g. \\ or \"
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		default:
			i += 5
		}
	}
	return true
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
