// Command cordon-lab measures Cordon: retrieval quality (eval), evaluation
// corpora (corpus) and speed against SQL baselines (bench). See
// 'cordon-lab --help'; the service is cmd/cordon.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cordon-rag/cordon/lab/bench"
	"github.com/cordon-rag/cordon/lab/labcli"
)

func main() {
	// 'cordon-lab bench' runs the http system's server in a process of its
	// own: this executable again, which serves instead of running a command.
	bench.ServeChildIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := labcli.Main(ctx, labcli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}
