// Package plot draws the evaluation and benchmark charts (docs/quality.png,
// docs/benchmarks.png, docs/service.png) from saved runs, for 'cordon-lab
// plot'. It is the only package that imports the plotting library, so the
// 'cordon' binary that serves never links it.
package plot
