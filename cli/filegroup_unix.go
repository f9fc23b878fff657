//go:build unix

package cli

import (
	"os"
	"syscall"
)

// fileGroup is the group id owning a file.
func fileGroup(info os.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Gid), true
}
