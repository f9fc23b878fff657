//go:build !unix

package cli

import "os"

// fileGroup is not known off Unix.
func fileGroup(os.FileInfo) (int, bool) { return 0, false }
