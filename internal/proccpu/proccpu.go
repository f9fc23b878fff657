// Package proccpu reads CPU time: this process's (getrusage) and another
// process's on the same Linux machine (/proc/PID/stat). The benchmarks use
// it to charge the CPU of a run to the bench and to PostgreSQL's backends.
package proccpu

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// Self is this process's user and system CPU time, every thread.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Of is the user and system CPU time of process pid, read from
// /proc/PID/stat (Linux; an error elsewhere, or when the process is gone
// or not visible from here).
func Of(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	d, ok := ParseStat(b)
	if !ok {
		return 0, fmt.Errorf("proccpu: /proc/%d/stat: unexpected format", pid)
	}
	return d, nil
}

// ParseStat parses utime and stime (fields 14 and 15) of a /proc/PID/stat.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses, so fields are counted after its last closing parenthesis.
func ParseStat(stat []byte) (time.Duration, bool) {
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
