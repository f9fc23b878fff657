// Package topk keeps the k best of a stream of scores in a min-heap, whose
// root is the k-th best so far: the floor a ranking's candidates must reach
// to be among its top k.
package topk

// Offer keeps v among the k (>= 1) best scores of the min-heap h (its
// root the worst kept) and returns h.
func Offer(h []float64, k int, v float64) []float64 {
	i := len(h)
	switch {
	case i < k:
		h = append(h, v)
		for i > 0 && h[(i-1)/2] > h[i] {
			h[(i-1)/2], h[i] = h[i], h[(i-1)/2]
			i = (i - 1) / 2
		}
		return h
	case v <= h[0]:
		return h
	}
	h[0], i = v, 0
	for {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if l+1 < len(h) && h[l+1] < h[m] {
			m = l + 1
		}
		if m == i {
			return h
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
