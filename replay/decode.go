package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
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

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields, fields whose name differs from the contract only in case (which
// encoding/json would accept), duplicate keys, and trailing data.
func decodeStrict(data []byte, v any) error {
	if err := checkKeys(data, reflect.TypeOf(v), ""); err != nil {
		return err
	}
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

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkKeys walks raw against type t and requires every object key to be
// exactly a json tag of the struct it decodes into, at most once.
func checkKeys(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	switch t.Kind() {
	case reflect.Struct:
		if len(raw) == 0 || raw[0] != '{' {
			return nil // not an object: the decoder reports the type error
		}
		fields := make(map[string]reflect.Type, t.NumField())
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		return eachMember(raw, func(key string, val []byte) error {
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("unknown field %q", path+key)
			}
			return checkKeys(val, ft, path+key+".")
		})
	case reflect.Slice:
		if len(raw) == 0 || raw[0] != '[' {
			return nil
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil // the decoder reports it
		}
		for _, e := range elems {
			if err := checkKeys(e, t.Elem(), path); err != nil {
				return err
			}
		}
	case reflect.Map:
		if len(raw) == 0 || raw[0] != '{' {
			return nil
		}
		return eachMember(raw, func(string, []byte) error { return nil })
	}
	return nil
}

// eachMember calls fn for each member of a JSON object in order and rejects
// duplicate keys.
func eachMember(raw []byte, fn func(key string, val []byte) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil // malformed: the decoder reports it
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil
		}
		if err := fn(key, val); err != nil {
			return err
		}
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
