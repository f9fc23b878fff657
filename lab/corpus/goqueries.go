package corpus

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"index/suffixarray"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/cordon-rag/cordon/analysis"
)

// The query kinds of the Go documentation genre ([GoDocs]). A package is a
// long document, so each kind makes several queries per package, up to
// [GoQueriesPerKind] in all ([Queries]).
const (
	// KindSummary is the first sentence of one declaration's doc comment
	// ("Clone returns a fresh copy of s."), left in the document.
	KindSummary Kind = "summary"
	// KindSignature is one function's or method's declaration line
	// ("func Clone(s string) string"), left in the document.
	KindSignature Kind = "signature"
	// KindDocHeldout is one later sentence of a doc comment (never a
	// declaration's first), which the evaluation cuts out of the document
	// before indexing (the query's Remove).
	KindDocHeldout Kind = "docheldout"
)

// GoKinds lists the Go documentation kinds in output order, after [Kinds].
var GoKinds = []Kind{KindSummary, KindSignature, KindDocHeldout}

// GoQueriesPerKind is how many queries [Queries] makes of each Go kind when
// the corpus has that many candidates: several per package, spread evenly.
const GoQueriesPerKind = 600

// declHeadingRE matches the heading of a function, method or type in a
// rendered package ("### func Clone", "### func (b *Builder) Len",
// "### type Builder").
var declHeadingRE = regexp.MustCompile(`^### (func|type) `)

// goPassages are one package's candidates of each Go kind, in text order.
type goPassages struct {
	summary, signature, heldout []passage
}

// goDocPassages finds a rendered package's candidates: prose is a line at
// column 0 outside fenced code and headings (the renderer writes a
// paragraph per line); a declaration's first prose line gives its summary
// candidate (the first sentence) and the rest of its sentences are held-out
// candidates, as is every sentence of other prose. Sentences start with an
// upper-case letter and have 6 to 30 tokens; a held-out candidate must also
// occur exactly once in the document, so cutting it leaves none of it. A
// signature candidate is a function's declaration that fits on one line,
// with 4 to 30 tokens.
func goDocPassages(text string) goPassages {
	var out goPassages
	var (
		inFence, decl, funcDecl, sawFence bool
		fence                             []string
		paragraphs                        int
	)
	ok := func(s string, lo int) bool {
		if s == "" {
			return false
		}
		n := len(analysis.Tokenize(s))
		return n >= lo && n <= MaxSentenceTokens
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			if inFence && decl && funcDecl && !sawFence && len(fence) == 1 && ok(fence[0], MinOptionTokens) {
				out.signature = append(out.signature, passage{raw: fence[0], text: strings.Join(strings.Fields(fence[0]), " ")})
			}
			if inFence {
				sawFence = true
			}
			inFence, fence = !inFence, nil
		case inFence:
			fence = append(fence, line)
		case sectionHeadingRE.MatchString(line):
			m := declHeadingRE.FindStringSubmatch(line)
			decl, funcDecl, sawFence, paragraphs = m != nil, m != nil && m[1] == "func", false, 0
		case line == "" || unicode.IsSpace([]rune(line)[0]):
		default:
			for i, s := range sentences(line) {
				if !unicode.IsUpper([]rune(s)[0]) || !ok(s, MinSentenceTokens) {
					continue
				}
				p := passage{raw: s, text: strings.Join(strings.Fields(s), " ")}
				switch {
				case decl && paragraphs == 0 && i == 0:
					out.summary = append(out.summary, p)
				case strings.Count(text, s) == 1:
					out.heldout = append(out.heldout, p)
				}
			}
			paragraphs++
		}
	}
	return out
}

// occurrences finds where a passage occurs in a corpus: a suffix array
// over every document's text.
type occurrences struct {
	index  *suffixarray.Index
	starts []int // byte offset of each document's text in the index
}

func newOccurrences(docs []Doc) *occurrences {
	var b strings.Builder
	o := &occurrences{starts: make([]int, len(docs))}
	for i, d := range docs {
		o.starts[i] = b.Len()
		b.WriteString(d.Text)
		b.WriteByte(0) // no passage spans two documents
	}
	o.index = suffixarray.New([]byte(b.String()))
	return o
}

// elsewhere reports whether s occurs in a document other than docs[i].
func (o *occurrences) elsewhere(i int, s string) bool {
	for _, off := range o.index.Lookup([]byte(s), -1) {
		if j, _ := slices.BinarySearch(o.starts, off+1); j-1 != i {
			return true
		}
	}
	return false
}

// spread chooses up to total candidates over documents, round by round:
// every document's candidates are ordered by a hash of kind, doc id and
// text; round r takes every document's r-th, and the last round, when it
// cannot take all, the documents first in a hash of kind, doc id and r. It
// returns, per document, the chosen candidates' indexes in text order.
func spread(docs []Doc, cands [][]passage, kind Kind, total int) [][]int {
	hash := func(parts ...string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(string(kind) + "\x00" + strings.Join(parts, "\x00")))
		return h.Sum64()
	}
	order := make([][]int, len(docs))
	for i, d := range docs {
		for j := range cands[i] {
			order[i] = append(order[i], j)
		}
		slices.SortStableFunc(order[i], func(a, b int) int {
			return cmp.Compare(hash(d.ID, cands[i][a].text), hash(d.ID, cands[i][b].text))
		})
	}
	chosen := make([][]int, len(docs))
	left := total
	for r := 0; left > 0; r++ {
		var round []int
		for i := range docs {
			if len(order[i]) > r {
				round = append(round, i)
			}
		}
		if len(round) == 0 {
			break
		}
		if len(round) > left {
			slices.SortStableFunc(round, func(a, b int) int {
				return cmp.Compare(hash(docs[a].ID, strconv.Itoa(r)), hash(docs[b].ID, strconv.Itoa(r)))
			})
			round = round[:left]
		}
		for _, i := range round {
			chosen[i] = append(chosen[i], order[i][r])
		}
		left -= len(round)
	}
	for i := range chosen {
		slices.Sort(chosen[i])
	}
	return chosen
}

// goQueries makes the queries of one Go kind: [spread] over the documents'
// candidates that no other document has, each query's id
// "kind:doc_id#n" (n counting the document's queries of the kind from 1, in
// text order).
func goQueries(docs []Doc, all []goPassages, k Kind, where *occurrences) ([]Query, []QuerySkip) {
	per := make([][]passage, len(docs))
	for i, p := range all {
		switch k {
		case KindSummary:
			per[i] = p.summary
		case KindSignature:
			per[i] = p.signature
		case KindDocHeldout:
			per[i] = p.heldout
		}
	}
	per = unique(per)
	for i := range per {
		// A passage another document also holds (say, a method's comment
		// inside an interface's declaration) would make that one right
		// too.
		per[i] = slices.DeleteFunc(per[i], func(p passage) bool { return where.elsewhere(i, p.raw) })
	}
	var out []Query
	var skips []QuerySkip
	for i, idx := range spread(docs, per, k, GoQueriesPerKind) {
		d := docs[i]
		if len(per[i]) == 0 {
			skips = append(skips, QuerySkip{DocID: d.ID, Reason: fmt.Sprintf("%s: no candidate no other document has", k)})
			continue
		}
		for n, j := range idx {
			p := per[i][j]
			q := Query{ID: fmt.Sprintf("%s:%s#%d", k, d.ID, n+1), Kind: k, Split: SplitOf(d.ID), Query: p.text, Relevant: []string{d.ID}}
			if k == KindDocHeldout {
				q.Remove = p.raw
			}
			out = append(out, q)
		}
	}
	return out, skips
}
