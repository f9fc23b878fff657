package postgres

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoFullTextSearchMachinery: Cordon's BM25 is its own postings table;
// the store and its migrations never use tsvector, tsquery or ts_rank.
func TestNoFullTextSearchMachinery(t *testing.T) {
	banned := regexp.MustCompile(`(?i)\b(tsvector|tsquery|ts_rank(_cd)?|to_tsvector|plainto_tsquery)\b`)
	var files []string
	for _, pattern := range []string{"*.go", "../../migrations/*.sql"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %d files to check", len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code := strings.TrimSpace(line)
			if strings.HasPrefix(code, "//") || strings.HasPrefix(code, "--") {
				continue // prose may say what the store does not use
			}
			if m := banned.FindString(code); m != "" {
				t.Errorf("%s:%d uses %q: BM25 must come from the postings table", f, i+1, m)
			}
		}
	}
}

func TestSchemaName(t *testing.T) {
	tests := []struct {
		name, tenant, want string
		ok                 bool
	}{
		{"plain", "wholesale", "cordon_t_wholesale", true},
		{"reserved word", "public", "cordon_t_public", true},
		{"max length", "a234567890123456789012345678901234567890", "cordon_t_a234567890123456789012345678901234567890", true},
		{"quote", `a"b`, "", false},
		{"upper", "Retail", "", false},
		{"too long", "a2345678901234567890123456789012345678901", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SchemaName(tt.tenant)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("SchemaName(%q) = %q, %v; want %q, ok=%v", tt.tenant, got, err, tt.want, tt.ok)
			}
			if tt.ok && len(got) > 63 {
				t.Errorf("schema name %q is longer than PostgreSQL's 63-byte identifiers", got)
			}
		})
	}
}
