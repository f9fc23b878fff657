// Package sysmem reads how much memory this process may use: the limit of
// its control group (cgroup v2 memory.max, cgroup v1
// memory.limit_in_bytes), else the machine's physical memory
// (/proc/meminfo MemTotal). The store's in-memory query path sizes its
// default budget from it.
package sysmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// Limit is the memory available to this process and where the figure
// came from.
type Limit struct {
	Bytes int64
	// Source names the file the figure was read from, e.g.
	// "cgroup v2 memory.max" or "/proc/meminfo MemTotal".
	Source string
}

// Read returns the memory available to this process: the tightest limit of
// its control group and its ancestors when one is set and below the
// physical memory, else the physical memory. It fails where neither can be
// read (not Linux).
func Read() (Limit, error) {
	return read(os.DirFS("/"))
}

// read is Read over fsys, the root file system (tests give a fake one).
func read(fsys fs.FS) (Limit, error) {
	total, err := memTotal(fsys)
	if err != nil {
		return Limit{}, err
	}
	best := Limit{Bytes: total, Source: "/proc/meminfo MemTotal"}
	if l, ok := cgroupLimit(fsys); ok && l.Bytes < best.Bytes {
		best = l
	}
	return best, nil
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal(fsys fs.FS) (int64, error) {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("physical memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("physical memory: no MemTotal in /proc/meminfo")
}

// cgroupLimit is the tightest memory limit of this process's control group
// and its ancestors, v2 first, then v1. ok is false when no limit is set
// (v2 "max", v1's near-2^63 "unlimited") or none can be read.
func cgroupLimit(fsys fs.FS) (Limit, bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return Limit{}, false
	}
	var v2, v1 string
	haveV2, haveV1 := false, false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, haveV2 = parts[2], true
		case hasController(parts[1], "memory"):
			v1, haveV1 = parts[2], true
		}
	}
	if haveV2 {
		// A pure v2 host mounts the hierarchy at /sys/fs/cgroup, a hybrid
		// one at /sys/fs/cgroup/unified.
		for _, root := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
			if l, ok := tightest(fsys, root, v2, "memory.max", "cgroup v2 memory.max"); ok {
				return l, true
			}
		}
	}
	if haveV1 {
		if l, ok := tightest(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "cgroup v1 memory.limit_in_bytes"); ok {
			return l, true
		}
	}
	return Limit{}, false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// tightest reads file in the group's directory under root and in each
// ancestor's up to root, and returns the smallest limit set. Inside a
// container the group's path often does not exist under the mount (the
// container sees its own group as the root), so the root's file counts
// too.
func tightest(fsys fs.FS, root, group, file, source string) (Limit, bool) {
	var best Limit
	found := false
	dir := path.Clean("/" + group)
	for {
		if v, ok := readLimit(fsys, path.Join(root, dir, file)); ok && (!found || v < best.Bytes) {
			best, found = Limit{Bytes: v, Source: source}, true
		}
		if dir == "/" {
			break
		}
		dir = path.Dir(dir)
	}
	return best, found
}

// unlimitedV1 is what cgroup v1 reports for no limit: 2^63-1 rounded down to
// a page. Anything at least this large is no limit.
const unlimitedV1 = 1 << 62

// readLimit parses a limit file: a byte count, or "max" (no limit).
func readLimit(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= unlimitedV1 {
		return 0, false
	}
	return v, true
}
