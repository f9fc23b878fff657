package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// cpuTimes is the CPU consumed so far by the bench process and by the
// PostgreSQL backends serving its database on this machine.
type cpuTimes struct {
	process time.Duration
	db      time.Duration
	dbSeen  bool // some backend of the database was found
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// readCPU samples the process's CPU (getrusage, every thread) and, when
// database is not "", the CPU of the local backends whose process title is
// "postgres: USER DATABASE ..." (Linux /proc; a server on another host or
// in another PID namespace is not seen, and dbSeen stays false). A
// backend that exits between two samples takes its CPU with it; the
// systems keep their pools open while they are measured.
func readCPU(database string) cpuTimes {
	var c cpuTimes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if database == "" {
		return c
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(d + "/cmdline")
		if err != nil || !isBackendOf(cmd, database) {
			continue
		}
		st, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		if t, ok := statCPU(st); ok {
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

// statCPU parses utime and stime (fields 14 and 15) of /proc/PID/stat. The
// command name (field 2) is in parentheses and may hold spaces, so fields
// are counted after its closing parenthesis.
func statCPU(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	// f[0] is field 3 (state), so utime (14) is f[11] and stime (15) f[12].
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return 0, false
	}
	return time.Duration(u+s) * time.Second / clockTicks, true
}
