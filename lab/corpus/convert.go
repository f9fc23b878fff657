package corpus

import (
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/analysis"
)

// subsectionIndent is where man(7)'s .SS titles start in groff's tty output:
// three columns in from the page margin (section titles start at column 0,
// body text at 7).
const subsectionIndent = 3

// rightAlignedIndent is the least indent of a footer that holds only its
// right part; body text is indented 7 to 14 columns, a little more in lists.
const rightAlignedIndent = 24

// maxSubsectionTitle bounds a "##" title: a bold line at the subsection
// indent that is longer than this is body text, not a title.
const maxSubsectionTitle = 80

// headerFooterRE matches man's running header and footer,
// "LS(1)   User Commands   LS(1)" and "GNU coreutils 9.1   2022   LS(1)":
// both end with the page's "TITLE(SECTION)".
var headerFooterRE = regexp.MustCompile(`\(\S+\)$`)

// ttyHyphens are the characters groff's utf8 device substitutes for the
// hyphens and minus signs the page's author typed as '-'. They are mapped
// back, so "--verbose" in a query matches "--verbose" in the page.
var ttyHyphens = strings.NewReplacer("\u2010", "-", "\u2011", "-", "\u2212", "-")

// ttyLine is one rendered line with its formatting removed.
type ttyLine struct {
	text    string // plain text, trailing whitespace removed
	indent  int    // leading spaces (tabs count as one)
	allBold bool   // every non-space character was overstruck bold
}

// ConvertRendered converts one manual page as rendered by groff's tty device
// (overstrike bold "X\bX" and underline "_\bX", possibly ANSI SGR codes) into
// Markdown: section titles (bold, at column 0) become "# " headings,
// subsection titles (bold, at column 3) become "## " headings, the running
// header and footer are dropped, runs of blank lines become one, and body
// text is kept as rendered. A body line that would itself read as a Markdown
// heading or code fence at column 0 is indented by one space, so the chunker
// never mistakes page text for structure.
//
// When the rendering holds no bold at all (formatting was lost on the way),
// every non-blank line at column 0 is taken as a section title.
//
// It returns [ErrNoSections] when the page has no section title,
// [ErrNoBody] when no body line holds a token (a file that was not a manual
// page can render as a lone title line), and [ErrNotUTF8] when the rendering
// is not valid UTF-8.
func ConvertRendered(rendered []byte) (string, error) {
	if !utf8.Valid(rendered) {
		return "", ErrNotUTF8
	}
	raw := strings.Split(strings.ReplaceAll(string(rendered), "\r\n", "\n"), "\n")
	lines := make([]ttyLine, len(raw))
	anyBold := false
	for i, l := range raw {
		lines[i] = decodeTTY(l)
		if lines[i].allBold {
			anyBold = true
		}
	}
	lines = dropHeaderFooter(lines)

	var b strings.Builder
	pendingBlank := false
	wroteAny := false
	sections := 0
	bodyToken := false
	for _, l := range lines {
		if l.text == "" {
			pendingBlank = wroteAny
			continue
		}
		level := 0
		switch {
		case l.indent == 0 && (l.allBold || !anyBold):
			level = 1
		case anyBold && l.indent == subsectionIndent && l.allBold &&
			utf8.RuneCountInString(strings.TrimSpace(l.text)) <= maxSubsectionTitle:
			level = 2
		}
		if level > 0 {
			if wroteAny {
				b.WriteString("\n")
			}
			b.WriteString(strings.Repeat("#", level))
			b.WriteString(" ")
			b.WriteString(strings.Join(strings.Fields(l.text), " "))
			b.WriteString("\n")
			sections++
			wroteAny, pendingBlank = true, false
			continue
		}
		if pendingBlank {
			b.WriteString("\n")
		}
		text := l.text
		if l.indent == 0 && (strings.HasPrefix(text, "#") || strings.HasPrefix(text, "```") || strings.HasPrefix(text, "~~~")) {
			text = " " + text
		}
		b.WriteString(text)
		b.WriteString("\n")
		wroteAny, pendingBlank = true, false
		bodyToken = bodyToken || analysis.HasToken(text)
	}
	if sections == 0 {
		return "", ErrNoSections
	}
	if !bodyToken {
		return "", ErrNoBody
	}
	return b.String(), nil
}

// decodeTTY removes overstrike and ANSI escapes from one rendered line and
// records whether its visible text is all bold.
func decodeTTY(line string) ttyLine {
	rs := []rune(line)
	out := make([]rune, 0, len(rs))
	bold := make([]bool, 0, len(rs))
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\x1b':
			// CSI: ESC [ parameters final-byte(0x40-0x7e).
			if i+1 < len(rs) && rs[i+1] == '[' {
				i += 2
				for i < len(rs) && (rs[i] < 0x40 || rs[i] > 0x7e) {
					i++
				}
			}
		case r == '\b':
			// "a\bb" shows b; a == b is bold, '_' under b is underline.
			if len(out) > 0 && i+1 < len(rs) {
				prev := out[len(out)-1]
				next := rs[i+1]
				out[len(out)-1] = next
				bold[len(bold)-1] = bold[len(bold)-1] || prev == next
				i++
			}
		case r == '\t':
			out = append(out, ' ')
			bold = append(bold, false)
		case r < 0x20 || r == 0x7f:
			// other control characters carry no text
		default:
			out = append(out, r)
			bold = append(bold, false)
		}
	}
	// Trim trailing whitespace.
	n := len(out)
	for n > 0 && unicode.IsSpace(out[n-1]) {
		n--
	}
	out, bold = out[:n], bold[:n]
	l := ttyLine{text: ttyHyphens.Replace(string(out))}
	for l.indent < len(out) && out[l.indent] == ' ' {
		l.indent++
	}
	visible := 0
	l.allBold = true
	for i, r := range out {
		if unicode.IsSpace(r) {
			continue
		}
		visible++
		if !bold[i] {
			l.allBold = false
		}
	}
	if visible == 0 {
		l.allBold = false
	}
	return l
}

// dropHeaderFooter removes the running header (the first non-blank line) and
// footer (the last non-blank line) when they look like man's "TITLE(SECTION)"
// lines and are not themselves section titles.
func dropHeaderFooter(lines []ttyLine) []ttyLine {
	// The header always starts at column 0 with the page's TITLE(SECTION).
	// The footer starts at column 0 too, unless its left and centre parts
	// are empty and only TITLE(SECTION) is left, right-aligned: far beyond
	// any body indent.
	running := func(l ttyLine, minIndent int) bool {
		return (l.indent == 0 || l.indent >= minIndent) && !l.allBold && headerFooterRE.MatchString(l.text)
	}
	first, last := -1, -1
	for i, l := range lines {
		if l.text != "" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return lines
	}
	out := lines
	if last > first && running(lines[last], rightAlignedIndent) {
		out = out[:last]
	}
	if running(lines[first], math.MaxInt) {
		out = out[first+1:]
	}
	return out
}
