package analysis

// PairMatcher finds which of a token sequence's adjacent pairs occur
// adjacent in a text, in the same order, without building the text's token
// list: each token of the text is looked up as it is scanned, and the scan
// stops once every pair was found. A PairMatcher is for one goroutine.
type PairMatcher struct {
	slot  map[string]uint32 // distinct token -> slot
	pair  map[uint64]int    // slot pair (a<<32 | b) -> index in found
	found []bool            // per distinct pair, for the text being scanned
	buf   []byte
}

// NewPairMatcher returns a PairMatcher for the distinct adjacent pairs
// (tokens[i-1], tokens[i]) of tokens: n tokens give at most n-1 pairs, and
// (a, b) and (b, a) are two.
func NewPairMatcher(tokens []string) *PairMatcher {
	m := &PairMatcher{slot: make(map[string]uint32, len(tokens)), pair: make(map[uint64]int, max(len(tokens)-1, 0))}
	prev := uint32(0)
	for i, t := range tokens {
		j, ok := m.slot[t]
		if !ok {
			j = uint32(len(m.slot))
			m.slot[t] = j
		}
		if i > 0 {
			k := uint64(prev)<<32 | uint64(j)
			if _, ok := m.pair[k]; !ok {
				m.pair[k] = len(m.pair)
			}
		}
		prev = j
	}
	m.found = make([]bool, len(m.pair))
	m.buf = make([]byte, 0, 32)
	return m
}

// Pairs is the number of distinct pairs.
func (m *PairMatcher) Pairs() int { return len(m.pair) }

// Count scans s and returns how many of the distinct pairs occur in it as
// adjacent tokens, in order.
func (m *PairMatcher) Count(s string) int {
	clear(m.found)
	left := len(m.found)
	if left == 0 {
		return 0
	}
	const none = ^uint64(0)
	prev := none
	scanTokens(s, m.buf, func(tok []byte) bool {
		j, ok := m.slot[string(tok)]
		if !ok {
			prev = none
			return true
		}
		if prev != none {
			if p, ok := m.pair[prev<<32|uint64(j)]; ok && !m.found[p] {
				m.found[p] = true
				left--
			}
		}
		prev = uint64(j)
		return left > 0
	})
	return len(m.found) - left
}
