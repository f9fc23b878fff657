package cordontype

import "fmt"

// Format is how a document's text arrives. Text and Markdown are stored as
// given (the chunker reads Markdown headings in either); HTML is converted
// first (package htmltext; SPEC section 2, "HTML documents").
type Format int

// The document formats.
const (
	FormatText     Format = 0
	FormatMarkdown Format = 1
	FormatHTML     Format = 2
)

var formatNames = [...]string{"text", "markdown", "html"}

// String returns the format's name ("text", "markdown", "html").
func (f Format) String() string {
	if f < FormatText || f > FormatHTML {
		return fmt.Sprintf("format(%d)", int(f))
	}
	return formatNames[f]
}

// ParseFormat maps a format name to its Format; names are lower-case.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if s == n {
			return Format(i), nil
		}
	}
	return 0, invalid(fmt.Sprintf("format %q is not one of text, markdown, html", s))
}
