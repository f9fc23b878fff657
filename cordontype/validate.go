package cordontype

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/analysis"
)

// Limits from SPEC section 2.
const (
	MaxTenantLen     = 40
	MaxDocIDLen      = 200
	MaxBarrierLen    = 64
	MaxBarriers      = 64
	MaxTextBytes     = 10 << 20 // 10 MiB
	MaxTick          = int64(1) << 62
	tenantRuleText   = "a tenant is 1-40 characters: a lower-case ASCII letter, then lower-case letters, digits or '_'"
	docIDRuleText    = "a doc_id is 1-200 bytes of A-Z a-z 0-9 . _ : / -"
	barrierRuleText  = "a barrier label is 1-64 bytes of A-Z a-z 0-9 _ . : / -"
	tickRangeRuleTxt = "ticks are integers in [0, 2^62]"
)

// ValidateTenant checks a tenant name against ^[a-z][a-z0-9_]{0,39}$. Only a
// name that passes may become a schema name.
func ValidateTenant(t string) error {
	if len(t) == 0 || len(t) > MaxTenantLen {
		return invalid(fmt.Sprintf("tenant %q: %s", t, tenantRuleText))
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := c >= 'a' && c <= 'z' || (i > 0 && (c >= '0' && c <= '9' || c == '_'))
		if !ok {
			return invalid(fmt.Sprintf("tenant %q: %s", t, tenantRuleText))
		}
	}
	return nil
}

// ValidateDocID checks a document id: 1-200 bytes of [A-Za-z0-9._:/-].
func ValidateDocID(id string) error {
	if len(id) == 0 || len(id) > MaxDocIDLen {
		return invalid(fmt.Sprintf("doc_id %q: %s", id, docIDRuleText))
	}
	for i := 0; i < len(id); i++ {
		if !isLabelByte(id[i]) {
			return invalid(fmt.Sprintf("doc_id %q: %s", id, docIDRuleText))
		}
	}
	return nil
}

// isLabelByte is the byte class shared by doc ids and barrier labels:
// [A-Za-z0-9._:/-].
func isLabelByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '/' || c == '-'
}

// ValidateBarriers checks a list of barrier labels and returns them sorted and
// de-duplicated (a set). Labels are case-sensitive; at most 64 distinct labels.
func ValidateBarriers(labels []string) ([]string, error) {
	for _, l := range labels {
		if len(l) == 0 || len(l) > MaxBarrierLen {
			return nil, invalid(fmt.Sprintf("barrier %q: %s", l, barrierRuleText))
		}
		for i := 0; i < len(l); i++ {
			if !isLabelByte(l[i]) {
				return nil, invalid(fmt.Sprintf("barrier %q: %s", l, barrierRuleText))
			}
		}
	}
	out := slices.Clone(labels)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxBarriers {
		return nil, invalid(fmt.Sprintf("%d barrier labels: at most %d are allowed", len(out), MaxBarriers))
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// ValidateTick checks that a tick (as_of_tick, now_tick) is in [0, 2^62].
func ValidateTick(name string, v int64) error {
	if v < 0 || v > MaxTick {
		return invalid(fmt.Sprintf("%s %d: %s", name, v, tickRangeRuleTxt))
	}
	return nil
}

// Validate checks a document against SPEC section 2 and normalises its
// barriers. A document that fails is never stored.
func (d *Document) Validate() error {
	if err := ValidateTenant(d.Tenant); err != nil {
		return err
	}
	if err := ValidateDocID(d.DocID); err != nil {
		return err
	}
	if !d.Classification.Valid() {
		return invalid(fmt.Sprintf("document %q: classification %s is not one of public, internal, confidential, restricted", d.DocID, d.Classification))
	}
	b, err := ValidateBarriers(d.Barriers)
	if err != nil {
		return fmt.Errorf("document %q: %w", d.DocID, err)
	}
	if err := ValidateTick("as_of_tick", d.AsOfTick); err != nil {
		return fmt.Errorf("document %q: %w", d.DocID, err)
	}
	if len(d.Text) > MaxTextBytes {
		return invalid(fmt.Sprintf("document %q: text is %d bytes; the limit is %d bytes (10 MiB): split the document", d.DocID, len(d.Text), MaxTextBytes))
	}
	if !utf8.ValidString(d.Text) {
		return invalid(fmt.Sprintf("document %q: text is not valid UTF-8 (Cordon never repairs text: fix the encoding at the source)", d.DocID))
	}
	if strings.IndexByte(d.Text, 0) >= 0 || strings.IndexByte(d.Title, 0) >= 0 || hasNUL(d.Metadata) {
		return invalid(fmt.Sprintf("document %q: text, title or metadata contains U+0000 (NUL), which PostgreSQL text cannot store: remove it at the source", d.DocID))
	}
	if !utf8.ValidString(d.Title) {
		return invalid(fmt.Sprintf("document %q: title is not valid UTF-8", d.DocID))
	}
	if !analysis.HasToken(d.Text) {
		return invalid(fmt.Sprintf("document %q: text has no token (no letter or number), so it could never be retrieved", d.DocID))
	}
	d.Barriers = b
	return nil
}

// hasNUL reports whether a metadata value holds U+0000 in any key or string.
func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	}
	return false
}
