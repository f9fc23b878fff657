package memindex

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cordon-rag/cordon/cordontype"
)

// slotChunk is what a slot keeps of its chunk beside the per-slot arrays
// that hold the rest (docOf, class, barrier, asOf, length) and the index's
// tenant: 40 bytes and the packed text's (see PackText), where a
// cordontype.Chunk takes 144 and four strings of its own. chunk rebuilds
// the Chunk for a hit.
type slotChunk struct {
	text string // packed
	ref  int64  // index.PreparedChunk.Ref
	// The chunk's id is its document's id, "::" and ord, as
	// index.Prepare names chunks; a chunk named otherwise, or whose
	// offsets or tenant do not fit, is kept whole in Index.odd.
	ord        int32
	section    int32 // in Index.sections
	start, end int32
}

// setChunk records chunk c (its text already dropped, or not; packed
// when x.packedIn is set) of stored row ref in slot s, and returns the
// bytes it holds beyond its slotChunk. An odd chunk keeps its text packed
// too.
func (x *Index) setChunk(s int32, c *cordontype.Chunk, ref int64) int64 {
	if len(x.slotChunks) == 0 {
		x.tenant = c.Tenant // an index holds one tenant's chunks
	}
	text := c.Text
	if !x.packedIn {
		text = PackText(text)
	}
	ord, ok := chunkOrd(c.ChunkID, c.DocID)
	if !ok || c.Tenant != x.tenant || c.StartChar < 0 || c.StartChar > math.MaxInt32 || c.EndChar < 0 || c.EndChar > math.MaxInt32 ||
		int64(c.Length) != int64(x.length[s]) {
		if x.odd == nil {
			x.odd = make(map[int32]*cordontype.Chunk)
		}
		cc := *c
		cc.Text = text
		x.odd[s] = &cc
		x.acct.odd = max(x.acct.odd, len(x.odd))
		x.slotChunks = append(x.slotChunks, slotChunk{ref: ref})
		return chunkHeld(&cc) + allocSize(chunkSize)
	}
	x.slotChunks = append(x.slotChunks, slotChunk{text: text, ref: ref, ord: ord, section: x.internSection(c.Section),
		start: int32(c.StartChar), end: int32(c.EndChar)})
	return strBytes(text)
}

// chunkOrd returns n when id is docID + "::" + strconv.Itoa(n) for an n
// that fits an int32 and is not negative.
func chunkOrd(id, docID string) (int32, bool) {
	rest, ok := strings.CutPrefix(id, docID)
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutPrefix(rest, "::"); !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return int32(n), true
}

// internSection returns the number of section name sec, numbering it when
// new. Sections stay numbered until a compaction.
func (x *Index) internSection(sec string) int32 {
	if id, ok := x.sectionIDs[sec]; ok {
		return id
	}
	if x.sectionIDs == nil {
		x.sectionIDs = make(map[string]int32)
	}
	id := int32(len(x.sections))
	x.sections = append(x.sections, sec)
	x.sectionIDs[sec] = id
	x.acct.held += strBytes(sec)
	x.acct.sections = max(x.acct.sections, len(x.sectionIDs))
	return id
}

// dropChunk forgets slot s's chunk (removed) and returns the bytes that
// frees beyond its slotChunk.
func (x *Index) dropChunk(s int32) int64 {
	if c, ok := x.odd[s]; ok {
		delete(x.odd, s)
		return chunkHeld(c) + allocSize(chunkSize)
	}
	n := strBytes(x.slotChunks[s].text)
	x.slotChunks[s] = slotChunk{}
	return n
}

// chunk rebuilds slot s's chunk.
func (x *Index) chunk(s int32) cordontype.Chunk {
	c := x.packedChunk(s)
	c.Text = UnpackText(c.Text)
	return c
}

// packedChunk is chunk with the text as the slot keeps it, packed.
func (x *Index) packedChunk(s int32) cordontype.Chunk {
	if c, ok := x.odd[s]; ok {
		cc := *c
		cc.Barriers = slices.Clone(c.Barriers)
		return cc
	}
	sc := &x.slotChunks[s]
	doc := x.docNames[x.docOf[s]]
	return cordontype.Chunk{
		ChunkID: doc + "::" + strconv.Itoa(int(sc.ord)), DocID: doc, Tenant: x.tenant, Section: x.sections[sc.section],
		Text: sc.text, StartChar: int(sc.start), EndChar: int(sc.end), Length: int(x.length[s]),
		Classification: cordontype.Classification(x.class[s]), Barriers: slices.Clone(x.sets[x.barrier[s]]), AsOfTick: x.asOf[s],
	}
}

// chunkIDAfter reports whether slot a's chunk id sorts after slot b's, as
// strings, without building them.
func (x *Index) chunkIDAfter(a, b int32) bool {
	va, vb := x.idView(a), x.idView(b)
	return compareIDs(&va, &vb) > 0
}

// idView is a chunk id as its document's id and its suffix ("::" and the
// ordinal's digits), or, for an odd chunk, as the id itself.
type idView struct {
	doc string
	suf [12]byte
	n   int // bytes of suf
}

func (x *Index) idView(s int32) idView {
	if c, ok := x.odd[s]; ok {
		return idView{doc: c.ChunkID}
	}
	v := idView{doc: x.docNames[x.docOf[s]]}
	v.n = len(strconv.AppendInt(append(v.suf[:0], "::"...), int64(x.slotChunks[s].ord), 10))
	return v
}

func (v *idView) len() int { return len(v.doc) + v.n }

func (v *idView) at(i int) byte {
	if i < len(v.doc) {
		return v.doc[i]
	}
	return v.suf[i-len(v.doc)]
}

// compareIDs compares two ids as strings.Compare compares them built.
func compareIDs(a, b *idView) int {
	n := min(len(a.doc), len(b.doc))
	if c := strings.Compare(a.doc[:n], b.doc[:n]); c != 0 {
		return c
	}
	la, lb := a.len(), b.len()
	for i := n; i < min(la, lb); i++ {
		if ca, cb := a.at(i), b.at(i); ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(la, lb)
}
