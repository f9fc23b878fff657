package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cordon-rag/cordon/internal/proccpu"
)

// cpuTimes is the CPU consumed so far by the bench process and by the
// PostgreSQL backends serving its database on this machine.
type cpuTimes struct {
	process time.Duration
	db      time.Duration
	dbSeen  bool // some backend of the database was found
}

// readCPU samples the process's CPU (getrusage, every thread) and, when
// database is not "", the CPU of the local backends whose process title is
// "postgres: USER DATABASE ..." (Linux /proc; a server on another host or
// in another PID namespace is not seen, and dbSeen stays false). A
// backend that exits between two samples takes its CPU with it; the
// systems keep their pools open while they are measured.
func readCPU(database string) cpuTimes {
	c := cpuTimes{process: proccpu.Self()}
	if database == "" {
		return c
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil || !isBackendOf(cmd, database) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if t, err := proccpu.Of(pid); err == nil {
			c.db += t
			c.dbSeen = true
		}
	}
	return c
}

// isBackendOf reports whether a /proc cmdline is a PostgreSQL backend's
// process title for database: "postgres: USER DATABASE HOST(PORT) STATE".
func isBackendOf(cmdline []byte, database string) bool {
	cmdline = bytes.TrimRight(cmdline, "\x00")
	rest, ok := bytes.CutPrefix(cmdline, []byte("postgres: "))
	if !ok {
		return false
	}
	f := bytes.Fields(rest)
	return len(f) >= 2 && string(f[1]) == database
}
