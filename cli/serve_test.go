package cli

import (
	"strings"
	"testing"
)

// TestServeLimitFlags: the policy limits, the chunk id cap and the
// per-tenant request limits (by their names and their old names) are checked before anything is opened, with errors that name the flag;
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
		{"tenant requests negative", []string{"--tenant-requests", "-1"}, nil, "--tenant-requests -1: want 0 (half the database pool) or 1 to 10000"},
		{"tenant requests by the old name", []string{"--tenant-retrieves", "-1"}, nil, "--tenant-requests -1: want 0"},
		{"tenant requests from the environment", nil, map[string]string{"CORDON_TENANT_REQUESTS": "-3"}, "--tenant-requests -3: want 0"},
		{"tenant requests holding the whole pool", []string{"--tenant-requests", "8", "--max-conns", "8"}, nil,
			"--tenant-requests 8 would let one tenant hold the whole database pool of 8 connections: give at most 7"},
		{"tenant queue below -1", []string{"--tenant-queue", "-2"}, nil, "--tenant-queue -2: want -1 (4 x --tenant-requests) or 0 to 100000"},
		{"tenant queue by the old name", []string{"--tenant-retrieve-queue", "-2"}, nil, "--tenant-queue -2: want -1"},
		{"chunk ids 0", []string{"--max-chunk-ids", "0"}, nil, "--max-chunk-ids 0: want 1 to 1000"},
		{"chunk ids over the store's", []string{"--max-chunk-ids", "1001"}, nil, "--max-chunk-ids 1001: want 1 to 1000"},
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
	code, _, stderr := runCLIEnv(t, env, append(append([]string{}, base...), "--max-top-n", "300", "--tenant-requests", "3", "--tenant-queue", "0", "--max-chunk-ids", "200")...)
	if code == ExitUsage {
		t.Fatalf("valid limits refused: %s", stderr)
	}
	for _, want := range []string{`"max_top_n":300`, `"max_prf_terms":20`, `"max_limit":400`, `"tenant_requests":3`, `"tenant_queue":0`, `"max_chunk_ids":200`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the logged configuration lacks %s: %s", want, stderr)
		}
	}
	tests2 := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		// The queue defaults to 4 x --tenant-requests.
		{"queue of 4 x the requests", []string{"--tenant-requests", "5"}, nil, []string{`"tenant_requests":5`, `"tenant_queue":20`}},
		// Without --tenant-requests the server takes half the pool, known
		// once the store is open, and four times that waiting.
		{"defaults", nil, nil, []string{`"tenant_requests":0`, `"tenant_queue":-1`, `"max_chunk_ids":1000`}},
		{"old names", []string{"--tenant-retrieves", "2", "--tenant-retrieve-queue", "7"}, nil, []string{`"tenant_requests":2`, `"tenant_queue":7`}},
		{"old environment", nil, map[string]string{"CORDON_TENANT_RETRIEVES": "4"}, []string{`"tenant_requests":4`, `"tenant_queue":16`}},
		{"new environment over old", nil, map[string]string{"CORDON_TENANT_RETRIEVES": "4", "CORDON_TENANT_REQUESTS": "6"}, []string{`"tenant_requests":6`}},
	}
	for _, tt := range tests2 {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"CORDON_JWT_HS256_SECRET": testSecret}
			for k, v := range tt.env {
				env[k] = v
			}
			_, _, stderr := runCLIEnv(t, env, append(append([]string{}, base...), tt.args...)...)
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("the logged configuration lacks %s: %s", want, stderr)
				}
			}
		})
	}
}
