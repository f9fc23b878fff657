// Package labcli implements the cordon-lab command line: the tools that
// measure Cordon (eval, corpus, bench) and draw its charts (plot), kept out
// of the serving binary so that cordon links none of the lab packages.
// cmd/cordon-lab only wires the process and calls [Main], which the tests
// call directly.
package labcli
