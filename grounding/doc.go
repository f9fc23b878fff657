// Package grounding checks that every claim of an answer maps to a retrieved
// span (SPEC section 6), or names the claims that do not.
//
// The check is lexical: a claim is supported by the retrieved chunk (in rank
// order, earliest on ties) that holds the largest share of the claim's distinct
// tokens, when that share is > 0 and >= the threshold. A correct paraphrase can
// fail it; an invented claim cannot pass it by luck of phrasing alone.
package grounding
