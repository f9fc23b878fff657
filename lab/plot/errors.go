package plot

import "errors"

// errUsage marks a usage error: [Main] prints the usage and exits with
// exitUsage.
var errUsage = errors.New("usage")
