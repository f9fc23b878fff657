package postgres

import (
	"fmt"

	"github.com/cordon-rag/cordon/index/memindex"
)

// The cache charges its budget what each index counts of its own memory
// (memindex.Index.Bytes): a load, or the changes applied to a cached index,
// first reserve an estimate per document as it is added (docBytes, with its
// new terms' dictionary entries), so that the budget bounds the index while
// it grows, and are then settled to the index's count, which is exact
// enough to hold the charge within 20% of the live heap however the corpus
// is made (TestLoadChargeWithinLiveHeap).

// settleBuild trades reserved, the bytes reserved for x as a load built it
// (not yet charged to keep), for x's own count, reserving the difference
// when the count is the larger. n is the count; the error wraps errTooBig
// when there was no room for it, and nothing is held then.
func (c *cache) settleBuild(keep *cachedTenant, x *memindex.Index, reserved int64) (n int64, err error) {
	n = x.Bytes()
	if n <= reserved {
		c.release(reserved - n)
		return n, nil
	}
	if !c.reserve(keep, n-reserved, false) {
		c.release(reserved)
		return n, fmt.Errorf("an index of %d bytes, %d reserved: %w", n, reserved, errTooBig)
	}
	return n, nil
}

// settle charges ct its index's own count of its bytes in place of what
// was reserved for the changes just applied (ct's lock is held). It is
// false when the count is larger and no room can be made for it.
func (c *cache) settle(ct *cachedTenant) bool {
	n := ct.x.Bytes()
	c.mu.Lock()
	if d := n - ct.bytes; d <= 0 {
		c.used += d
		ct.bytes = n
		c.mu.Unlock()
		return true
	}
	d := n - ct.bytes
	c.mu.Unlock()
	return c.reserve(ct, d, true)
}
