package cmdline

import "errors"

// ErrUsage marks an error as a usage error: [Main] prints it with a pointer
// to the command's help and exits with [ExitUsage]. Flag parsing and every
// flag group's validation wrap it.
var ErrUsage = errors.New("usage")
