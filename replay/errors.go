package replay

import "errors"

// The replay package's sentinel errors. A step's bad input is never one of
// them: it becomes that step's {"op": ..., "error": ...} line.

// ErrScript is returned by [Run] when the script is not a JSON object with a
// "steps" list.
var ErrScript = errors.New("unreadable replay script")
