package embed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cordon-rag/cordon/internal/jsonstrict"
)

// decodeObject decodes a provider's answer, one JSON object, into dst
// strictly: valid UTF-8, exactly one value with nothing after it, no
// duplicate keys, at most [jsonstrict.MaxDepth] levels, and no key that
// matches one of fields only case-insensitively (encoding/json would take
// it). Other unknown keys are allowed: servers add their own ("object",
// "usage", "total_duration").
func decodeObject(data []byte, dst any, fields ...string) error {
	if !jsonstrict.ValidUTF8(data) {
		return errors.New("the answer is not valid UTF-8")
	}
	err := jsonstrict.Walk(data, "the answer", func(_ *jsonstrict.Scan, key []byte, _ byte) error {
		for _, f := range fields {
			if !bytes.Equal(key, []byte(f)) && bytes.EqualFold(key, []byte(f)) {
				return fmt.Errorf("key %q is not %q", key, f)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return jsonstrict.CleanError(err, data, false)
	}
	return nil
}

// parseVector parses one embedding, a JSON list of numbers, each finite as
// a float32. encoding/json leaves a null element as zero; here it, and any
// other non-number, is an error, as is a number beyond float32's range
// (which would become an infinity) and the empty list. raw is a JSON value
// encoding/json has checked (a json.RawMessage), or empty when the member
// was missing.
func parseVector(raw json.RawMessage) ([]float32, error) {
	i := skipWS(raw, 0)
	if i >= len(raw) {
		return nil, errors.New("missing")
	}
	if raw[i] != '[' {
		return nil, fmt.Errorf("a JSON %s, not a list of numbers", jsonKind(raw[i]))
	}
	// Size the vector once: one component more than commas (an upper
	// bound; a non-number element fails anyway).
	out := make([]float32, 0, bytes.Count(raw[i:], []byte{','})+1)
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil, errors.New("an empty list")
	}
	for {
		if i >= len(raw) {
			return nil, errors.New("not a complete list")
		}
		if c := raw[i]; c != '-' && (c < '0' || c > '9') {
			return nil, fmt.Errorf("component %d is a JSON %s, not a number", len(out), jsonKind(c))
		}
		j := i + 1
		for j < len(raw) && isNumberByte(raw[j]) {
			j++
		}
		f, err := strconv.ParseFloat(string(raw[i:j]), 32)
		if err != nil {
			return nil, fmt.Errorf("component %d, %s, is not a finite float32", len(out), raw[i:j])
		}
		out = append(out, float32(f))
		i = skipWS(raw, j)
		if i < len(raw) && raw[i] == ',' {
			i = skipWS(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == ']' {
			return out, nil
		}
		return nil, errors.New("not a list of numbers")
	}
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonKind names the kind of JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "list"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "value"
}

// parseVectors parses n embeddings, naming each by where it sits (what(i),
// e.g. "embeddings[3]").
func parseVectors(raws []json.RawMessage, n int, what func(i int) string) ([][]float32, error) {
	if len(raws) != n {
		return nil, fmt.Errorf("%d embeddings for %d texts", len(raws), n)
	}
	out := make([][]float32, n)
	for i, raw := range raws {
		v, err := parseVector(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what(i), err)
		}
		out[i] = v
	}
	return out, nil
}
