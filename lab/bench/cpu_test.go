package bench

import "testing"

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

func TestReadCPU(t *testing.T) {
	if c := readCPU(""); c.process <= 0 || c.dbSeen {
		t.Fatalf("readCPU without a database = %+v, want this process's CPU and no backends", c)
	}
}
