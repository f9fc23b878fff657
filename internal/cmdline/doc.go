// Package cmdline is what Cordon's two commands share: cordon, which serves
// and administers, and cordon-lab, which measures. It holds the command
// tree and its dispatch ([Main]), flags that may come before or after
// arguments ([ParseFlags]), and the flag groups both commands take: the
// database URL, the in-memory query path budget, the embedding provider and
// the model reranker.
package cmdline
