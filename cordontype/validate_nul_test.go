package cordontype

import (
	"errors"
	"testing"
)

func TestDocumentRejectsNUL(t *testing.T) {
	tests := []struct {
		name string
		doc  Document
	}{
		{"text", Document{Text: "hold\x00release"}},
		{"title", Document{Text: "hold", Title: "a\x00"}},
		{"metadata value", Document{Text: "hold", Metadata: map[string]any{"k": "v\x00"}}},
		{"metadata key", Document{Text: "hold", Metadata: map[string]any{"k\x00": 1}}},
		{"nested metadata", Document{Text: "hold", Metadata: map[string]any{"k": []any{map[string]any{"x": "\x00"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.doc
			d.Tenant, d.DocID, d.Classification = "t", "d", Public
			if err := d.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
	ok := Document{Tenant: "t", DocID: "d", Text: "hold", Metadata: map[string]any{"k": "v"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a clean document: %v", err)
	}
}
