// Command cordon-plot draws Cordon's evaluation and benchmark charts from
// saved runs; see [plot.Main].
package main

import (
	"os"

	"github.com/cordon-rag/cordon/lab/plot"
)

func main() { os.Exit(plot.Main(os.Args[1:], os.Stdout, os.Stderr)) }
