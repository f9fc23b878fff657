// Command cordon is Cordon's command line: replay scripts, the worked demo,
// migrations and tenant administration. See 'cordon --help'.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cordon-rag/cordon/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}
