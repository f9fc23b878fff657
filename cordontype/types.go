package cordontype

import (
	"encoding/json"
	"fmt"
)

// Classification is a document's sensitivity level and a principal's clearance.
// The levels are ordered: Public < Internal < Confidential < Restricted, so a
// principal may see a chunk when chunk.Classification <= principal.Clearance.
type Classification int

// The four classification levels, in increasing order of sensitivity. Their
// integer values are stored by the Postgres store; never renumber them.
const (
	Public       Classification = 0
	Internal     Classification = 1
	Confidential Classification = 2
	Restricted   Classification = 3
)

var classificationNames = [...]string{"public", "internal", "confidential", "restricted"}

// String returns the lower-case name of the level ("public", ...).
func (c Classification) String() string {
	if c < Public || c > Restricted {
		return fmt.Sprintf("classification(%d)", int(c))
	}
	return classificationNames[c]
}

// ParseClassification maps a level name to its Classification. Names are
// case-sensitive and lower-case, as written in SPEC section 2.
func ParseClassification(s string) (Classification, error) {
	for i, n := range classificationNames {
		if s == n {
			return Classification(i), nil
		}
	}
	return 0, invalid(fmt.Sprintf("classification %q is not one of public, internal, confidential, restricted", s))
}

// Valid reports whether c is one of the four levels.
func (c Classification) Valid() bool { return c >= Public && c <= Restricted }

// MarshalJSON writes the level's name.
func (c Classification) MarshalJSON() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("marshal %s: %w", c, ErrInvalid)
	}
	return json.Marshal(c.String())
}

// UnmarshalJSON reads a level's name.
func (c *Classification) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return invalid("classification must be a string: one of public, internal, confidential, restricted")
	}
	v, err := ParseClassification(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Document is the unit a caller puts into Cordon. Chunks inherit its tenant,
// classification, barriers and as_of_tick.
type Document struct {
	Tenant         string
	DocID          string
	Text           string
	Classification Classification
	// Barriers are information-barrier labels; a principal must hold every one
	// of them to see the document's chunks. Kept sorted and de-duplicated by
	// [Document.Validate].
	Barriers []string
	AsOfTick int64
	Title    string
	Metadata map[string]any
}

// Chunk is a citable span of a document, the unit of retrieval.
type Chunk struct {
	ChunkID        string
	DocID          string
	Tenant         string
	Section        string
	Text           string
	StartChar      int // code-point offset into the document's text, inclusive
	EndChar        int // code-point offset into the document's text, exclusive
	Length         int // number of tokens of Text
	Classification Classification
	Barriers       []string
	AsOfTick       int64
}

// Principal is who asks: a tenant, a clearance and the information-barrier
// labels it holds.
type Principal struct {
	Tenant    string
	Clearance Classification
	Barriers  []string
}

// Validate checks a principal against SPEC section 2 and normalises its
// barriers (sorted, de-duplicated).
func (p *Principal) Validate() error {
	if err := ValidateTenant(p.Tenant); err != nil {
		return err
	}
	if !p.Clearance.Valid() {
		return invalid(fmt.Sprintf("clearance %s is not one of public, internal, confidential, restricted", p.Clearance))
	}
	b, err := ValidateBarriers(p.Barriers)
	if err != nil {
		return fmt.Errorf("principal: %w", err)
	}
	p.Barriers = b
	return nil
}
