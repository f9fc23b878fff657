package cli

import (
	"strings"
	"testing"
)

// TestAuditVerifyAllFlags: verify takes --tenant or --all, not both and
// not neither; --anchor is one tenant's head, so not with --all; head has
// no --all. A valid --all reaches the database.
func TestAuditVerifyAllFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"--all reaches the database", []string{"audit", "verify", "--all", "--database-url", deadURL}, ExitError, "database unavailable"},
		{"--all --json reaches the database", []string{"audit", "verify", "--all", "--json", "--require-keyed", "--database-url", deadURL}, ExitError, "database unavailable"},
		{"neither", []string{"audit", "verify", "--database-url", deadURL}, ExitUsage, "verify needs --tenant NAME or --all"},
		{"both", []string{"audit", "verify", "--all", "--tenant", "wholesale", "--database-url", deadURL}, ExitUsage, "--tenant NAME or --all, not both"},
		{"--all with --anchor", []string{"audit", "verify", "--all", "--anchor", "head.json", "--database-url", deadURL}, ExitUsage, "--anchor is one tenant's head"},
		{"head has no --all", []string{"audit", "head", "--all", "--database-url", deadURL}, ExitUsage, "flag provided but not defined: -all"},
		{"head needs --tenant", []string{"audit", "head", "--database-url", deadURL}, ExitUsage, "head needs --tenant NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLIEnv(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
		})
	}
}
