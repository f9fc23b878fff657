package replay

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
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
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return jsonstrict.IntError(string(b))
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

// stepDecoder is the replay format's contract: the shared strict decoder
// ([jsonstrict.Decoder]) checking keys against the step's type, with the
// replay wording the golden files pin.
var stepDecoder = jsonstrict.Decoder{What: "the step", Plain: true}

// decodeStrict decodes exactly one JSON object into v, rejecting invalid
// UTF-8, nesting deeper than [jsonstrict.MaxDepth], unknown fields, fields
// whose name differs from the contract only in case (which encoding/json
// would accept), duplicate keys, and trailing data.
func decodeStrict(data []byte, v any) error {
	return stepDecoder.Decode(data, v)
}
