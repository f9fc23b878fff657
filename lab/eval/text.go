package eval

import (
	"regexp"
	"strings"
)

// Strategy says how a document's text reaches the chunker.
type Strategy string

// The chunking strategies of the bake-off.
const (
	// Structured feeds the text as is: headings start sections (SPEC 2).
	Structured Strategy = "structure"
	// Flat neutralises headings and fences first, so the chunker sees one
	// "body" section and cuts fixed-size windows that ignore structure.
	// Heading words stay in the text, as a structure-blind chunker keeps them.
	Flat Strategy = "fixed"
)

// headingRE is SPEC section 2's ATX heading, for one line without "\n" and
// without a trailing "\r".
var headingRE = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)

func isFence(line string) bool {
	return strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~")
}

// FlattenStructure indents by one space every line that the chunker would
// read as a heading or a fence (any line starting at column 0 with '#',
// "```" or "~~~"), so that chunk.Split sees a document with one section,
// "body", and the same words. Nothing else changes.
func FlattenStructure(text string) string {
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	b.Grow(len(text) + 64)
	for _, l := range lines {
		if strings.HasPrefix(l, "#") || isFence(l) {
			b.WriteByte(' ')
		}
		b.WriteString(l)
	}
	return b.String()
}

// DropSections removes every section whose name (the heading's text, trimmed,
// as SPEC section 2 defines it) is in names: its heading line and its body,
// up to the next heading of any level. Headings and fences are recognised
// exactly as the chunker recognises them. It is how an evaluation holds out a
// section, such as a man page's NAME line, that the queries were built from.
func DropSections(text string, names []string) string {
	if len(names) == 0 {
		return text
	}
	drop := make(map[string]bool, len(names))
	for _, n := range names {
		drop[n] = true
	}
	var b strings.Builder
	b.Grow(len(text))
	inFence, dropping := false, false
	for _, l := range strings.SplitAfter(text, "\n") {
		line := strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
		switch {
		case isFence(line):
			inFence = !inFence
		case !inFence && strings.HasPrefix(line, "#"):
			if m := headingRE.FindStringSubmatch(line); m != nil {
				name := strings.TrimSpace(m[1])
				if name == "" {
					name = "untitled"
				}
				dropping = drop[name]
			}
		}
		if !dropping {
			b.WriteString(l)
		}
	}
	return b.String()
}
