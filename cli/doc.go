// Package cli implements the cordon command line. cmd/cordon only wires the
// process (signals, exit code) and calls [Main], which end-to-end tests call
// directly.
package cli
