// Package embed is Cordon's seam for dense embedding models: a tenant's
// model [Spec] (recorded with its index), the [Embedder] interface that
// providers implement, and the integer quantization that keeps dense scores
// exact and byte-identical across stores and architectures.
//
// The default model, [Hash], is SPEC section 3's signed feature hashing
// (package hashembed): its vectors are integer counts already and it needs no
// provider. Any other model's float vectors are quantized once, document
// vectors at write time and a query's vector once per query, to int8 range
// integers by [Quantize]; stores keep only those integers and score them with
// exact integer dot products and SPEC's cosine formula.
package embed
