package chunk

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/analysis"
)

// Chunking defaults from SPEC section 2: windows of 200 words overlapping by 40
// keep a policy clause and its context together while bounding chunk size.
const (
	DefaultMaxWords     = 200
	DefaultOverlapWords = 40
)

// Options sets the window size of the size-level split.
type Options struct {
	MaxWords     int
	OverlapWords int
}

// DefaultOptions returns the SPEC defaults (200 words, 40 overlap).
func DefaultOptions() Options {
	return Options{MaxWords: DefaultMaxWords, OverlapWords: DefaultOverlapWords}
}

// Validate checks 0 <= OverlapWords < MaxWords.
func (o Options) Validate() error {
	if o.MaxWords < 1 || o.OverlapWords < 0 || o.OverlapWords >= o.MaxWords {
		return fmt.Errorf("%w: need 0 <= overlap_words < max_words, got max_words=%d overlap_words=%d",
			ErrInvalidOptions, o.MaxWords, o.OverlapWords)
	}
	return nil
}

// Piece is one chunk of a document before it gets its id: its section name
// and the names of the sections enclosing it, its text, its code-point span
// in the document, and its token count.
type Piece struct {
	Section string
	// Path holds the names of the headings enclosing the piece's section,
	// outermost first, without the section's own name: nil for the section
	// "body" and for a heading with no enclosing heading. A heading of
	// level L (its number of '#') is enclosed by the nearest preceding
	// heading of each lower level, up to the nearest of level 1.
	Path      []string
	Text      string
	StartChar int
	EndChar   int
	Length    int
}

// The ATX heading of SPEC section 2, applied to one line without its "\n" and
// without a trailing "\r".
var headingRE = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)

// section is a named body span [start, end) in code points, with the
// names of the headings enclosing it (Piece.Path).
type section struct {
	name       string
	path       []string
	start, end int
}

// heading is an open heading while sections are split: its level (1-6)
// and section name.
type heading struct {
	level int
	name  string
}

// Split chunks text. The pieces come in document order; piece n becomes chunk
// "{doc_id}::{n}".
func Split(text string, opts Options) ([]Piece, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	runes := []rune(text)
	src := source{runes: runes}
	if len(text) <= math.MaxInt32 && utf8.ValidString(text) {
		// A piece's text is then a slice of text (no copy): offs[i] is the
		// byte offset of code point i. Invalid UTF-8 is re-encoded from
		// the code points instead (each invalid byte one U+FFFD).
		src.text = text
		src.offs = make([]int32, 0, len(runes)+1)
		for i := range text {
			src.offs = append(src.offs, int32(i))
		}
		src.offs = append(src.offs, int32(len(text)))
	}
	pieces := windows(src, sections(runes), opts)
	for _, p := range pieces {
		if p.Length > 0 {
			return pieces, nil
		}
	}
	// No chunk holds a token: window the whole text as one body section.
	return windows(src, []section{{name: "body", start: 0, end: len(runes)}}, opts), nil
}

// source is the text being split, as code points and, when it is valid
// UTF-8, as the string with the byte offset of each code point.
type source struct {
	runes []rune
	text  string
	offs  []int32
}

// span returns the text of code points [a, b).
func (s source) span(a, b int) string {
	if s.offs == nil {
		return string(s.runes[a:b])
	}
	return s.text[s.offs[a]:s.offs[b]]
}

// sections splits runes into sections at heading lines outside fences.
func sections(runes []rune) []section {
	var out []section
	var open []heading // the enclosing headings, levels increasing
	cur := section{name: "body", start: 0}
	inFence := false
	for ls := 0; ls < len(runes); {
		le := ls
		for le < len(runes) && runes[le] != '\n' {
			le++
		}
		next := le + 1 // start of the next line (past "\n")
		if le == len(runes) {
			next = le
		}
		line := runes[ls:le]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case hasPrefix(line, "```") || hasPrefix(line, "~~~"):
			inFence = !inFence
		case !inFence && len(line) > 0 && line[0] == '#':
			if m := headingRE.FindStringSubmatch(string(line)); m != nil {
				cur.end = ls
				out = append(out, cur)
				name := strings.TrimFunc(m[1], analysis.IsSpace)
				if name == "" {
					name = "untitled"
				}
				level := 0
				for level < len(line) && line[level] == '#' {
					level++
				}
				for len(open) > 0 && open[len(open)-1].level >= level {
					open = open[:len(open)-1]
				}
				cur = section{name: name, path: headingNames(open), start: next}
				open = append(open, heading{level: level, name: name})
			}
		}
		ls = next
		if le == len(runes) {
			break
		}
	}
	cur.end = len(runes)
	return append(out, cur)
}

// headingNames returns the names of open, outermost first, or nil when
// there is none.
func headingNames(open []heading) []string {
	if len(open) == 0 {
		return nil
	}
	names := make([]string, len(open))
	for i, h := range open {
		names[i] = h.name
	}
	return names
}

func hasPrefix(line []rune, p string) bool {
	if len(line) < len(p) {
		return false
	}
	for i, r := range p {
		if line[i] != r {
			return false
		}
	}
	return true
}

// windows splits each section body into word windows.
func windows(src source, secs []section, opts Options) []Piece {
	runes := src.runes
	step := opts.MaxWords - opts.OverlapWords
	var out []Piece
	var starts, ends []int
	for _, s := range secs {
		starts, ends = starts[:0], ends[:0]
		for i := s.start; i < s.end; {
			if analysis.IsSpace(runes[i]) {
				i++
				continue
			}
			j := i
			for j < s.end && !analysis.IsSpace(runes[j]) {
				j++
			}
			starts = append(starts, i)
			ends = append(ends, j)
			i = j
		}
		n := len(starts)
		for w := 0; n > 0; w += step {
			last := min(w+opts.MaxWords, n) - 1
			text := src.span(starts[w], ends[last])
			out = append(out, Piece{
				Section:   s.name,
				Path:      s.path,
				Text:      text,
				StartChar: starts[w],
				EndChar:   ends[last],
				Length:    analysis.CountTokens(text),
			})
			if last == n-1 {
				break
			}
		}
	}
	return out
}
