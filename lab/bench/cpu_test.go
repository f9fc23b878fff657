package bench

import (
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	// A title with spaces and parentheses in the command name.
	stat := []byte("4242 (postgres: u (x) db) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 37 0 0 20 0 1 0 100 0 0")
	d, ok := statCPU(stat)
	if !ok || d != 2870*time.Millisecond {
		t.Fatalf("statCPU = %v, %v; want 2.87s", d, ok)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 500 0 0 0 -5 37"} {
		if _, ok := statCPU([]byte(bad)); ok {
			t.Errorf("statCPU(%q) accepted", bad)
		}
	}
}

func TestIsBackendOf(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"postgres: cordon bench_db 127.0.0.1(5432) idle\x00", true},
		{"postgres: cordon bench_db2 127.0.0.1(5432) idle", false},
		{"postgres: checkpointer ", false},
		{"/usr/lib/postgresql/15/bin/postgres\x00-D\x00/x\x00", false},
		{"bench_db", false},
	} {
		if got := isBackendOf([]byte(c.cmdline), "bench_db"); got != c.want {
			t.Errorf("isBackendOf(%q) = %v, want %v", c.cmdline, got, c.want)
		}
	}
}

func TestReadCPUProcess(t *testing.T) {
	a := readCPU("")
	x := 0
	for i := range 20_000_000 {
		x ^= i * i
	}
	b := readCPU("")
	if b.process <= a.process {
		t.Fatalf("process CPU did not grow: %v then %v (x=%d)", a.process, b.process, x)
	}
	if b.dbSeen {
		t.Fatalf("no database was named, yet backends were counted")
	}
}
