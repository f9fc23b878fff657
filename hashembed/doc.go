// Package hashembed is Cordon's dense side (SPEC section 3): signed feature
// hashing of tokens into an integer count vector, and the exact-integer cosine.
//
// Each token is hashed with BLAKE2b-64 (unkeyed, 8-byte digest). Bytes 0-3 pick
// the dimension and byte 4 picks the sign; the two uses must be independent or
// the sign correlates with the bucket and collisions stop cancelling out in
// expectation. Without signs, unrelated texts would never score at or below 0.
//
// Vectors stay integer counts. The cosine is float64(dot) / (norm(q) * norm(d))
// with dot and the squared norms computed exactly in integers: that is what
// makes every store bit-identical.
package hashembed
