package cli

import (
	"encoding/json"
	"io"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/store/postgres"
)

// The --json forms of the admin commands. Field names are snake_case and
// stable; a field is never renamed, only added.

// tenantJSON is one tenant of 'cordon tenant list --json'.
type tenantJSON struct {
	Name           string  `json:"name"`
	Schema         string  `json:"schema"`
	Model          string  `json:"model"`
	Dims           int     `json:"dims"`
	K1             float64 `json:"k1"`
	B              float64 `json:"b"`
	MaxWords       int     `json:"max_words"`
	OverlapWords   int     `json:"overlap_words"`
	BM25Statistics string  `json:"bm25_statistics"`
	Analyzer       string  `json:"analyzer"`
	Fields         bool    `json:"fields"`
	// SectionPaths: the field terms count the headings enclosing each
	// chunk's section; false for a tenant indexed under the rules before
	// them ('cordon tenant set --fields=true' re-indexes it under them).
	SectionPaths bool `json:"section_paths"`
	// FieldNorm: field frequencies are length-normalised (the field rules
	// of analysis.FieldsVersion).
	FieldNorm bool   `json:"field_norm"`
	Chunks    int64  `json:"chunks"`
	Reembed   string `json:"reembed"`
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeTenantsJSON(w io.Writer, ts []postgres.TenantInfo, roles []string) error {
	out := struct {
		Tenants      []tenantJSON `json:"tenants"`
		ServiceRoles []string     `json:"service_roles"`
	}{Tenants: []tenantJSON{}, ServiceRoles: roles}
	if out.ServiceRoles == nil {
		out.ServiceRoles = []string{}
	}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, tenantJSON{Name: t.Name, Schema: t.Schema, Model: t.Settings.Spec().Model,
			Dims: t.Settings.Dims, K1: t.Settings.BM25.K1, B: t.Settings.BM25.B, MaxWords: t.Settings.Chunking.MaxWords,
			OverlapWords: t.Settings.Chunking.OverlapWords, BM25Statistics: string(t.Settings.Statistics), Analyzer: analyzerName(t), Fields: t.Settings.Fields,
			SectionPaths: t.Settings.Fields && t.Settings.FieldRules != analysis.FieldsSectionVersion,
			FieldNorm:    t.Settings.NormFields(), Chunks: t.Chunks,
			Reembed: t.Reembed})
	}
	return writeJSON(w, out)
}
