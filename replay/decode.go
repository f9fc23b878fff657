package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
