package corpus

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/cordon-rag/cordon/analysis"
)

// Kind names how a known-item query was made.
type Kind string

// The query kinds.
const (
	// KindName is the NAME line's description ([KnownItemQuery]).
	KindName Kind = "name"
	// KindBody is one sentence of the page's body, left in the page.
	KindBody Kind = "body"
	// KindOption is the first sentence of one option's description.
	KindOption Kind = "option"
	// KindHeldout is one body sentence (never the body query's) that the
	// evaluation cuts out of the page before indexing (the query's Remove).
	KindHeldout Kind = "heldout"
)

// Kinds lists every kind in output order.
var Kinds = []Kind{KindName, KindBody, KindOption, KindHeldout}

// ParseKind returns the kind named s, one of [Kinds] or [GoKinds].
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds, k) || slices.Contains(GoKinds, k) {
		return k, nil
	}
	return "", fmt.Errorf("%w: %q (want name, body, option or heldout; for Go documentation summary, signature or docheldout)", ErrKind, s)
}

// The splits: queries are "dev" (tune on them) or "test" (held out from
// tuning), by [SplitOf] their first relevant document.
const (
	SplitDev  = "dev"
	SplitTest = "test"
)

// SplitOf is a document's split: the low bit of the FNV-1a hash of its id,
// so every query of a document is in the same split, stable across corpora.
func SplitOf(docID string) string {
	h := fnv.New64a()
	h.Write([]byte(docID))
	if h.Sum64()&1 == 0 {
		return SplitDev
	}
	return SplitTest
}

// pick chooses one of n candidates for a document and kind, stably.
func pick(docID string, kind Kind, n int) int {
	h := fnv.New64a()
	h.Write([]byte(string(kind) + "\x00" + docID))
	return int(h.Sum64() % uint64(n))
}

// Sentence bounds: shorter says too little to be a known-item query, longer
// is more a passage than a query.
const (
	MinSentenceTokens = 6
	MaxSentenceTokens = 30
	// MinOptionTokens is the fewest tokens an option description query has.
	MinOptionTokens = 4
)

// bodyIndent is the indentation of body text in a rendered page (man's
// default left margin of 7 columns).
const bodyIndent = "       "

// passage is a candidate query: the exact text in the page and its
// whitespace-collapsed form (the query).
type passage struct {
	raw, text string
}

// sectionHeadingRE matches a section or subsection heading line.
var sectionHeadingRE = regexp.MustCompile(`^#{1,6} (.*)$`)

// skippedSections hold no prose a reader would search for: the name, the
// synopsis, and boilerplate (authors, copyright, where to report bugs,
// cross-references).
var skippedSections = map[string]bool{"NAME": true, "SYNOPSIS": true, "AUTHOR": true, "AUTHORS": true,
	"COPYRIGHT": true, "REPORTING BUGS": true, "SEE ALSO": true}

// block is a run of non-blank lines, with its byte offset in the text.
type block struct {
	section string
	lines   []string
	start   int
}

// blocks splits a page into blank-line-separated blocks outside headings,
// each tagged with its section.
func blocks(text string) []block {
	var out []block
	section := ""
	var cur *block
	off := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case sectionHeadingRE.MatchString(trimmed):
			section = strings.TrimSpace(sectionHeadingRE.FindStringSubmatch(trimmed)[1])
			cur = nil
		case strings.TrimSpace(trimmed) == "":
			cur = nil
		default:
			if cur == nil {
				out = append(out, block{section: section, start: off})
				cur = &out[len(out)-1]
			}
			cur.lines = append(cur.lines, trimmed)
		}
		off += len(line)
	}
	return out
}

func indentOf(line string) string { return line[:len(line)-len(strings.TrimLeft(line, " "))] }

// sentences splits a paragraph's raw text into sentences: each ends with
// '.', '!' or '?' followed by white space and an upper-case letter, or by the
// end of the paragraph.
func sentences(raw string) []string {
	var out []string
	start := 0
	rs := []rune(raw)
	pos := 0 // byte offset of rs[i]
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		size := len(string(r))
		if r == '.' || r == '!' || r == '?' {
			end := pos + size
			j := i + 1
			for j < len(rs) && unicode.IsSpace(rs[j]) {
				j++
			}
			if j == len(rs) || j > i+1 && unicode.IsUpper(rs[j]) {
				out = append(out, strings.TrimSpace(raw[start:end]))
				start = end
			}
		}
		pos += size
	}
	return out
}

// bodyPassages are a page's candidate body sentences: from prose paragraphs
// (every line at the body indentation) outside [skippedSections], starting
// with an upper-case letter, with 6 to 30 tokens.
func bodyPassages(text string) []passage {
	var out []passage
	for _, b := range blocks(text) {
		if skippedSections[b.section] {
			continue
		}
		prose := true
		for _, l := range b.lines {
			if indentOf(l) != bodyIndent {
				prose = false
				break
			}
		}
		if !prose {
			continue
		}
		raw := strings.Join(b.lines, "\n")
		for _, s := range sentences(raw) {
			if s == "" || !unicode.IsUpper([]rune(s)[0]) {
				continue
			}
			n := len(analysis.Tokenize(s))
			if n < MinSentenceTokens || n > MaxSentenceTokens {
				continue
			}
			out = append(out, passage{raw: s, text: strings.Join(strings.Fields(s), " ")})
		}
	}
	return out
}

// optionPassages are a page's candidate option descriptions: a line that
// starts with '-' (the option) followed, more deeply indented, by its
// description; the candidate is the description's first sentence (or all of
// it), with at least 4 tokens and at most 30.
func optionPassages(text string) []passage {
	var out []passage
	for _, b := range blocks(text) {
		for i := 0; i+1 < len(b.lines); i++ {
			term, desc := b.lines[i], b.lines[i+1]
			if !strings.HasPrefix(strings.TrimSpace(term), "-") || len(indentOf(desc)) <= len(indentOf(term)) {
				continue
			}
			in := indentOf(desc)
			var lines []string
			for j := i + 1; j < len(b.lines) && indentOf(b.lines[j]) == in; j++ {
				lines = append(lines, b.lines[j])
			}
			ss := sentences(strings.Join(lines, "\n"))
			if len(ss) == 0 {
				continue
			}
			s := ss[0]
			n := len(analysis.Tokenize(s))
			if n < MinOptionTokens || n > MaxSentenceTokens {
				continue
			}
			out = append(out, passage{raw: s, text: strings.Join(strings.Fields(s), " ")})
		}
	}
	return out
}

// unique keeps, per document, the candidates whose text occurs once among
// all documents' candidates (a sentence two pages share names neither).
func unique(per [][]passage) [][]passage {
	count := make(map[string]int)
	for _, ps := range per {
		for _, p := range ps {
			count[p.text]++
		}
	}
	out := make([][]passage, len(per))
	for i, ps := range per {
		for _, p := range ps {
			if count[p.text] == 1 {
				out[i] = append(out[i], p)
			}
		}
	}
	return out
}

// Queries builds the known-item queries of the given kinds (all of [Kinds]
// when empty) for a corpus, kind by kind in [Kinds] then [GoKinds] order,
// each kind in document order;
// docs must be sorted by id (as [Load] returns them) for the set to be
// reproducible. name queries are [KnownItemQueries]; a body, option or
// held-out query is one passage per page, chosen by a hash of the page's id
// among the page's candidates that no other page has. Every query carries
// its id ("kind:doc_id"), kind and split ([SplitOf]). The Go documentation
// kinds make several queries per document ([GoKinds], [GoQueriesPerKind]).
func Queries(docs []Doc, kinds []Kind) ([]Query, []QuerySkip) {
	if len(kinds) == 0 {
		kinds = Kinds
	}
	var out []Query
	var skips []QuerySkip
	var body, opts [][]passage
	if slices.Contains(kinds, KindBody) || slices.Contains(kinds, KindHeldout) {
		body = make([][]passage, len(docs))
		for i, d := range docs {
			body[i] = bodyPassages(d.Text)
		}
		body = unique(body)
	}
	if slices.Contains(kinds, KindOption) {
		opts = make([][]passage, len(docs))
		for i, d := range docs {
			opts[i] = optionPassages(d.Text)
		}
		opts = unique(opts)
	}
	var goDocs []goPassages
	var where *occurrences
	if slices.ContainsFunc(kinds, func(k Kind) bool { return slices.Contains(GoKinds, k) }) {
		goDocs = make([]goPassages, len(docs))
		for i, d := range docs {
			goDocs[i] = goDocPassages(d.Text)
		}
		where = newOccurrences(docs)
	}
	one := func(k Kind, d Doc, p passage, remove bool) Query {
		q := Query{ID: string(k) + ":" + d.ID, Kind: k, Split: SplitOf(d.ID), Query: p.text, Relevant: []string{d.ID}}
		if remove {
			q.Remove = p.raw
		}
		return q
	}
	for _, k := range slices.Concat(Kinds, GoKinds) {
		if !slices.Contains(kinds, k) {
			continue
		}
		switch k {
		case KindSummary, KindSignature, KindDocHeldout:
			qs, sk := goQueries(docs, goDocs, k, where)
			out = append(out, qs...)
			skips = append(skips, sk...)
		case KindName:
			qs, sk := KnownItemQueries(docs)
			out = append(out, qs...)
			for _, s := range sk {
				skips = append(skips, QuerySkip{DocID: s.DocID, Reason: "name: " + s.Reason})
			}
		case KindBody, KindHeldout:
			for i, d := range docs {
				c := body[i]
				need := 1
				if k == KindHeldout {
					need = 2 // one for the body query, one to hold out
				}
				if len(c) < need {
					skips = append(skips, QuerySkip{DocID: d.ID, Reason: fmt.Sprintf("%s: fewer than %d body sentences of %d-%d tokens no other page has", k, need, MinSentenceTokens, MaxSentenceTokens)})
					continue
				}
				b := pick(d.ID, KindBody, len(c))
				if k == KindBody {
					out = append(out, one(k, d, c[b], false))
					continue
				}
				rest := slices.Delete(slices.Clone(c), b, b+1)
				out = append(out, one(k, d, rest[pick(d.ID, KindHeldout, len(rest))], true))
			}
		case KindOption:
			for i, d := range docs {
				c := opts[i]
				if len(c) == 0 {
					skips = append(skips, QuerySkip{DocID: d.ID, Reason: "option: no option description no other page has"})
					continue
				}
				out = append(out, one(k, d, c[pick(d.ID, KindOption, len(c))], false))
			}
		}
	}
	return out, skips
}
