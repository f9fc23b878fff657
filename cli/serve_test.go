package cli

import (
	"strings"
	"testing"
)

// TestServeLimitFlags: the policy limits and the per-tenant retrieve limit
// are checked before anything is opened, with errors that name the flag;
// valid values get past the flags (to the database, absent here) and are
// logged.
func TestServeLimitFlags(t *testing.T) {
	base := []string{"serve", "--audit-unkeyed", "--database-url", deadURL}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"top_n limit 0", []string{"--max-top-n", "0"}, nil, "--max-top-n 0: want 1 to 10000"},
		{"rerank_depth limit over the most", []string{"--max-rerank-depth", "10001"}, nil, "--max-rerank-depth 10001: want 1 to 10000"},
		{"limit limit negative", []string{"--max-limit", "-1"}, nil, "--max-limit -1: want 1 to 10000"},
		{"prf_docs limit from the environment", nil, map[string]string{"CORDON_MAX_PRF_DOCS": "many"}, `$CORDON_MAX_PRF_DOCS="many" is not an integer`},
		{"top_n limit below the service profile", []string{"--max-top-n", "49"}, nil,
			"--max-top-n 49 is below the service profile's top_n 50, which every request that sets no top_n takes"},
		{"prf_terms limit below the service profile", []string{"--max-prf-terms", "9"}, nil, "--max-prf-terms 9 is below the service profile's prf_terms 10"},
		{"tenant retrieves 0", []string{"--tenant-retrieves", "0"}, nil, "--tenant-retrieves 0: want 1 to 10000"},
		{"tenant queue below -1", []string{"--tenant-retrieve-queue", "-2"}, nil, "--tenant-retrieve-queue -2: want -1 (4 x --tenant-retrieves) or 0 to 100000"},
		// Refused before --migrate connects to the database.
		{"max conns negative", []string{"--max-conns", "-1", "--migrate"}, nil, "--max-conns -1 out of range"},
		{"replica lag negative", []string{"--replica-max-lag", "-1s", "--migrate"}, nil, "--replica-max-lag -1s must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}
			for k, v := range tt.env {
				env[k] = v
			}
			code, _, stderr := runCLIEnv(t, env, append(append([]string{}, base...), tt.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("got exit %d, stderr %q; want exit %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}
	env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret, "CORDON_MAX_PRF_TERMS": "20"}
	code, _, stderr := runCLIEnv(t, env, append(append([]string{}, base...), "--max-top-n", "300", "--tenant-retrieves", "3", "--tenant-retrieve-queue", "0")...)
	if code == ExitUsage {
		t.Fatalf("valid limits refused: %s", stderr)
	}
	for _, want := range []string{`"max_top_n":300`, `"max_prf_terms":20`, `"max_limit":400`, `"tenant_retrieves":3`, `"tenant_retrieve_queue":0`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the logged configuration lacks %s: %s", want, stderr)
		}
	}
	// The queue defaults to 4 x --tenant-retrieves.
	_, _, stderr = runCLIEnv(t, env, append(append([]string{}, base...), "--tenant-retrieves", "5")...)
	if !strings.Contains(stderr, `"tenant_retrieve_queue":20`) {
		t.Errorf("the logged configuration lacks the default queue of 4 x 5: %s", stderr)
	}
}
