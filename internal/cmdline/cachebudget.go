package cmdline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cordon-rag/cordon/internal/sysmem"
)

// cacheFraction: by default the in-memory query path may hold
// 1/cacheFraction of the memory this process may use (its control group's
// limit, else the machine's memory). A quarter leaves the rest to the Go
// runtime's headroom (the garbage collector lets the heap grow to about
// twice its live size), request buffers, and other processes of the host
// or pod.
const cacheFraction = 4

// CacheAuto is the budget flags' default value.
const CacheAuto = "auto"

// CacheBudget resolves a budget flag: "auto" (or empty) is 1/cacheFraction
// of the memory this process may use (0 where that is unknown: not Linux),
// a number is taken as is (in units of unit bytes: 1 for --cache-bytes,
// 1 MiB for --cache-mib), and 0 turns the in-memory path off. rule says how
// the budget was chosen, for the logs.
func CacheBudget(flagName, value string, unit int64) (budget int64, rule string, err error) {
	v := strings.TrimSpace(value)
	if v == "" || v == CacheAuto {
		l, err := sysmem.Read()
		if err != nil {
			// Not Linux: no figure to take a share of. Ranking in SQL is
			// slower, never wrong, so the command still runs.
			return 0, fmt.Sprintf("auto: off, the memory available is unknown (%v); pass %s to set a budget", err, flagName), nil
		}
		return l.Bytes / cacheFraction, fmt.Sprintf("auto: 1/%d of %d bytes (%s)", cacheFraction, l.Bytes, l.Source), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/unit {
		return 0, "", fmt.Errorf("%w: %s %q: want %q or a number >= 0", ErrUsage, flagName, value, CacheAuto)
	}
	if n == 0 {
		return 0, "off: every query is ranked in SQL", nil
	}
	return n * unit, "set by " + flagName, nil
}
