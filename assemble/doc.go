// Package assemble builds a model's context from retrieved chunks within a
// token budget (SPEC section 7).
//
// Blocks are rendered stable-first (instructions, tool schema, policy) so that
// a provider's prefix cache can reuse them, then one block per chunk in rank
// order, then the question. The budget is checked against the rendered text,
// headers and separators included, and the lowest-ranked chunk is dropped until
// it fits: budgeting the pieces instead over-fills every time. The question is
// never truncated; when the fixed blocks alone do not fit, [Context] fails.
package assemble
