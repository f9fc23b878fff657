package localmodel

import "errors"

var (
	// ErrNotInstalled is returned by [Available] and [Start] when Node.js,
	// server.mjs or the model's npm packages are missing or at the wrong
	// version. The wrapping error names what is missing and the command
	// that installs it.
	ErrNotInstalled = errors.New("local embedding model not installed")

	// ErrNotReady is returned by [Start] when the server exits, or does not
	// report that it is listening within [Options.StartTimeout]. The wrapping
	// error carries the end of the server's standard error.
	ErrNotReady = errors.New("local embedding model server did not become ready")

	// ErrBadOptions is returned by [Start] for an [Options] value out of range.
	ErrBadOptions = errors.New("invalid local model options")
)
