package bm25

// idfLogDigest is the FNV-style digest of Log over every IDF argument with
// N <= 2000, recorded on amd64 where each value also equals math.Log.
const idfLogDigest uint64 = 0xc9b543d7feda243e
