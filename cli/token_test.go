package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/server"
)

// TestTokenClearanceWarning: a reader token minted without --clearance is
// still public (never widened), and says so on stderr naming --clearance;
// a token with --clearance, or without the reader role, mints quietly.
func TestTokenClearanceWarning(t *testing.T) {
	env := map[string]string{"CORDON_JWT_HS256_SECRET": strings.Repeat("s", server.MinHS256SecretLen)}
	tests := []struct {
		name          string
		args          []string
		wantClearance string
		wantWarning   bool
	}{
		{"reader without --clearance", []string{"--sub", "alice", "--tenant", "wholesale", "--role", "reader"}, "public", true},
		{"reader among roles", []string{"--sub", "alice", "--tenant", "wholesale", "--role", "writer,reader"}, "public", true},
		{"reader with --clearance internal", []string{"--sub", "alice", "--tenant", "wholesale", "--clearance", "internal", "--role", "reader"}, "internal", false},
		{"reader with --clearance public", []string{"--sub", "alice", "--tenant", "wholesale", "--role", "reader", "--clearance", "public"}, "public", false},
		{"writer", []string{"--sub", "bot", "--tenant", "wholesale", "--role", "writer"}, "public", false},
		{"admin", []string{"--sub", "ops", "--role", "admin"}, "public", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLIEnv(t, env, append([]string{"token"}, tt.args...)...)
			if code != ExitOK {
				t.Fatalf("cordon token: exit %d: %s", code, stderr)
			}
			v, err := server.NewVerifier(context.Background(), server.AuthConfig{HS256Secret: env["CORDON_JWT_HS256_SECRET"]})
			if err != nil {
				t.Fatal(err)
			}
			id, err := v.Verify(strings.TrimSpace(stdout))
			if err != nil {
				t.Fatalf("the minted token does not verify: %v", err)
			}
			if got := id.Clearance.String(); got != tt.wantClearance {
				t.Errorf("clearance %s, want %s", got, tt.wantClearance)
			}
			warned := strings.Contains(stderr, "warning: no --clearance") && strings.Contains(stderr, "--clearance internal")
			if warned != tt.wantWarning || (!tt.wantWarning && stderr != "") {
				t.Errorf("stderr %q, want a warning naming --clearance: %v", stderr, tt.wantWarning)
			}
		})
	}
}
