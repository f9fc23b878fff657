// Package replay runs replay scripts (SPEC section 9): the one format Cordon
// uses for golden tests, differential tests between stores, conformance and bug
// reports.
//
// A script is a JSON object {"config": {...}, "steps": [...]}. [Run] applies
// each step to a [Store] and writes one JSON object per step (JSON Lines). A
// step with bad input writes {"op": ..., "error": "..."} and the replay goes on;
// only a script that cannot be parsed at all is an error of Run.
//
// # Strictness
//
// Steps and their nested objects reject unknown fields (a misspelt
// "max_stale_tick" must not silently switch a freshness contract off), integer
// fields accept JSON integers only (2.0 is rejected), and null stands for an
// absent optional field. Unknown fields at the top level of the script are
// ignored so that scripts may carry a "description".
//
// # Limits
//
// A step's policy is validated against the contract's ranges only. The HTTP
// service's cost limits (top_n 200 and the others, [retrieval.Limits]) are
// the service's, applied when it reads a request: a replay is an operator's
// tool and gives the upstream contract's results, top_n 100000 included.
package replay
