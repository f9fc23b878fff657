package cordontype

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestValidateTenant(t *testing.T) {
	tests := []struct {
		name    string
		tenant  string
		wantErr bool
	}{
		{"simple", "wholesale", false},
		{"one letter", "a", false},
		{"digits and underscore", "group_compliance2", false},
		{"40 characters", "a" + strings.Repeat("b", 39), false},
		{"41 characters", "a" + strings.Repeat("b", 40), true},
		{"empty", "", true},
		{"upper case", "Wholesale", true},
		{"leading digit", "1bank", true},
		{"leading underscore", "_bank", true},
		{"hyphen", "whole-sale", true},
		{"space", "whole sale", true},
		{"non-ASCII letter", "bänk", true},
		{"schema injection", `a"; drop schema x; --`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTenant(tt.tenant)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("ValidateTenant(%q) = %v, want ErrInvalid %v", tt.tenant, err, tt.wantErr)
			}
		})
	}
}

func TestValidateDocID(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		wantErr bool
	}{
		{"simple", "pay-001", false},
		{"every allowed byte class", "A-Z_a.z:0/9", false},
		{"200 bytes", strings.Repeat("x", 200), false},
		{"201 bytes", strings.Repeat("x", 201), true},
		{"empty", "", true},
		{"space", "pay 001", true},
		{"hash", "pay#1", true},
		{"non-ASCII", "pay-ü", true},
		{"newline", "pay\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDocID(tt.id)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("ValidateDocID(%q) = %v, want ErrInvalid %v", tt.id, err, tt.wantErr)
			}
		})
	}
}

func labels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("l%03d", i)
	}
	return out
}

func TestValidateBarriers(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr bool
	}{
		{"nil becomes empty", nil, []string{}, false},
		{"sorted and de-duplicated", []string{"b", "a", "b"}, []string{"a", "b"}, false},
		{"case-sensitive", []string{"deal", "Deal"}, []string{"Deal", "deal"}, false},
		{"every allowed byte class", []string{"A-z_0.9:/x"}, []string{"A-z_0.9:/x"}, false},
		{"64 bytes", []string{strings.Repeat("x", 64)}, []string{strings.Repeat("x", 64)}, false},
		{"65 bytes", []string{strings.Repeat("x", 65)}, nil, true},
		{"empty label", []string{""}, nil, true},
		{"space", []string{"deal x"}, nil, true},
		{"non-ASCII", []string{"déal"}, nil, true},
		{"64 labels", labels(64), labels(64), false},
		{"65 labels", labels(65), nil, true},
		// The limit counts distinct labels: the list is a set.
		{"65 entries, 64 distinct", append(labels(64), "l000"), labels(64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ValidateBarriers(tt.in)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("ValidateBarriers(%q) error = %v, want ErrInvalid %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && (got == nil || !slices.Equal(got, tt.want)) {
				t.Errorf("ValidateBarriers(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestValidateTick(t *testing.T) {
	tests := []struct {
		name    string
		v       int64
		wantErr bool
	}{
		{"zero", 0, false},
		{"2^62", 1 << 62, false},
		{"2^62 + 1", 1<<62 + 1, true},
		{"negative", -1, true},
		{"max int64", 1<<63 - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTick("now_tick", tt.v)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("ValidateTick(%d) = %v, want ErrInvalid %v", tt.v, err, tt.wantErr)
			}
		})
	}
}

func TestDocumentValidate(t *testing.T) {
	good := Document{Tenant: "wholesale", DocID: "pay-001", Text: "PMT-771 hold", Classification: Confidential, Barriers: []string{"b", "a", "a"}, AsOfTick: 100}
	tests := []struct {
		name    string
		edit    func(d *Document)
		wantErr bool
		wantMsg string
	}{
		{"valid", nil, false, ""},
		{"bad tenant", func(d *Document) { d.Tenant = "Bad" }, true, "tenant"},
		{"bad doc id", func(d *Document) { d.DocID = "a b" }, true, "doc_id"},
		{"bad classification", func(d *Document) { d.Classification = 7 }, true, "classification"},
		{"bad barrier", func(d *Document) { d.Barriers = []string{"a b"} }, true, "barrier"},
		{"negative tick", func(d *Document) { d.AsOfTick = -1 }, true, "as_of_tick"},
		{"tick over 2^62", func(d *Document) { d.AsOfTick = 1<<62 + 1 }, true, "as_of_tick"},
		{"invalid UTF-8", func(d *Document) { d.Text = "hold \xff" }, true, "UTF-8"},
		{"U+FFFD itself is fine", func(d *Document) { d.Text = "hold \ufffd" }, false, ""},
		{"no token", func(d *Document) { d.Text = "--- ... !!!" }, true, "no token"},
		{"empty text", func(d *Document) { d.Text = "" }, true, "no token"},
		{"exactly 10 MiB", func(d *Document) { d.Text = "a" + strings.Repeat(" ", MaxTextBytes-1) }, false, ""},
		{"over 10 MiB", func(d *Document) { d.Text = "a" + strings.Repeat(" ", MaxTextBytes) }, true, "10 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			d.Barriers = slices.Clone(good.Barriers)
			if tt.edit != nil {
				tt.edit(&d)
			}
			err := d.Validate()
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Validate() = %v, want ErrInvalid %v", err, tt.wantErr)
			}
			if tt.wantErr && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Validate() = %q, want it to mention %q", err, tt.wantMsg)
			}
			if !tt.wantErr && !slices.Equal(d.Barriers, []string{"a", "b"}) {
				t.Errorf("barriers after Validate = %q, want [a b]", d.Barriers)
			}
		})
	}
	if MaxTextBytes != 10*1024*1024 || MaxTick != 1<<62 {
		t.Errorf("MaxTextBytes, MaxTick = %d, %d, want 10 MiB, 2^62", MaxTextBytes, MaxTick)
	}
}

func TestPrincipalValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Principal
		want    []string
		wantErr bool
	}{
		{"valid", Principal{Tenant: "t", Clearance: Restricted, Barriers: []string{"z", "a", "z"}}, []string{"a", "z"}, false},
		{"nil barriers", Principal{Tenant: "t", Clearance: Public}, []string{}, false},
		{"bad tenant", Principal{Tenant: "", Clearance: Public}, nil, true},
		{"bad clearance", Principal{Tenant: "t", Clearance: -1}, nil, true},
		{"bad barrier", Principal{Tenant: "t", Clearance: Public, Barriers: []string{"#"}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			err := p.Validate()
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Validate() = %v, want ErrInvalid %v", err, tt.wantErr)
			}
			if !tt.wantErr && !slices.Equal(p.Barriers, tt.want) {
				t.Errorf("barriers = %q, want %q", p.Barriers, tt.want)
			}
		})
	}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Classification
		wantErr bool
	}{
		{"public", "public", Public, false},
		{"internal", "internal", Internal, false},
		{"confidential", "confidential", Confidential, false},
		{"restricted", "restricted", Restricted, false},
		{"upper case rejected", "Public", 0, true},
		{"unknown", "secret", 0, true},
		{"empty", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClassification(tt.in)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("ParseClassification(%q) error = %v, want ErrInvalid %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want || got.String() != tt.in {
				t.Errorf("ParseClassification(%q) = %v (%d), want %v", tt.in, got, got, tt.want)
			}
			b, err := json.Marshal(got)
			if err != nil || string(b) != `"`+tt.in+`"` {
				t.Errorf("json.Marshal(%v) = %s, %v, want %q", got, b, err, tt.in)
			}
			var back Classification
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("json round trip of %v = %v, %v", got, back, err)
			}
		})
	}
	if !(Public < Internal && Internal < Confidential && Confidential < Restricted) {
		t.Errorf("levels out of order: %d %d %d %d", Public, Internal, Confidential, Restricted)
	}
	if _, err := json.Marshal(Classification(9)); err == nil {
		t.Errorf("json.Marshal(Classification(9)) succeeded, want an error")
	}
	var c Classification
	if err := json.Unmarshal([]byte(`2`), &c); err == nil {
		t.Errorf("json.Unmarshal(2) into Classification succeeded, want an error (names only)")
	}
	if got := Classification(7).String(); got != "classification(7)" {
		t.Errorf("Classification(7).String() = %q, want classification(7)", got)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []Format{FormatText, FormatMarkdown, FormatHTML} {
		if got, err := ParseFormat(f.String()); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	for _, s := range []string{"", "HTML", "htm", "md"} {
		if _, err := ParseFormat(s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not one of text, markdown, html") {
			t.Errorf("ParseFormat(%q): got %v, want an ErrInvalid naming the formats", s, err)
		}
	}
}
