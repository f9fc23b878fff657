package htmltext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/cordon-rag/cordon/cordontype"
)

// MaxBytes bounds the HTML [Convert] takes and the text it makes: the
// document text limit of SPEC section 2 (10 MiB).
const MaxBytes = cordontype.MaxTextBytes

// MaxDepth is the deepest nesting of open elements the parser
// (golang.org/x/net/html) accepts; deeper HTML is refused with
// [ErrTooDeep]. It also bounds the converter's recursion.
const MaxDepth = 512

// maxIndentLevels caps list indentation (2 spaces a level), so that deep
// nesting cannot multiply the output's size.
const maxIndentLevels = 8

// Result is a converted HTML document.
type Result struct {
	// Text is the text Cordon stores and chunks.
	Text string
	// Title is the text of the document's first <title>, whitespace
	// collapsed; "" when there is none.
	Title string
}

// Convert turns an HTML document into the text Cordon stores, by the rules
// of SPEC section 2, "HTML documents": headings become Markdown ATX
// headings of their level, code blocks are fenced and kept verbatim,
// scripts, styles, navigation and hidden elements are dropped. The same
// input always gives the same bytes. It refuses input over [MaxBytes]
// ([ErrTooLarge]), not valid UTF-8 ([ErrNotUTF8]), nested deeper than
// [MaxDepth] ([ErrTooDeep]) or costing the parser more than [MaxWork]
// ([ErrTooComplex]).
func Convert(src string) (Result, error) {
	return ConvertContext(context.Background(), src)
}

// ConvertContext is [Convert] stopping once ctx is done: then it returns
// ctx's error (wrapped), so a request's deadline bounds the conversion.
func ConvertContext(ctx context.Context, src string) (Result, error) {
	if len(src) > MaxBytes {
		return Result{}, refuse(ErrTooLarge, "html is %d bytes; the limit is %d bytes (10 MiB): split the document", len(src), MaxBytes)
	}
	if !utf8.ValidString(src) {
		return Result{}, refuse(ErrNotUTF8, "html is not valid UTF-8 (Cordon never repairs text: convert it first, e.g. iconv -f windows-1252 -t utf-8)")
	}
	src = strings.TrimPrefix(src, "\ufeff")
	if err := precheck(ctx, src); err != nil {
		return Result{}, stopped(err)
	}
	doc, err := html.Parse(&ctxReader{ctx: ctx, r: strings.NewReader(src)})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, stopped(ctx.Err())
		}
		// Otherwise the only error is the parser's limit on open
		// elements (it recovers its own panic into an error).
		return Result{}, refuse(ErrTooDeep, "html nests more than %d open elements (%s)", MaxDepth, err.Error())
	}
	c := &converter{ctx: ctx, layout: map[*html.Node]bool{}}
	c.markLayout(doc, false)
	c.walk(doc, false)
	c.flush()
	if c.err != nil {
		return Result{}, stopped(c.err)
	}
	if len(c.out) > 0 {
		c.out = append(c.out, '\n')
	}
	if c.tooLarge || len(c.out) > MaxBytes {
		return Result{}, refuse(ErrTooLarge, "the text converted from the html is over the limit of %d bytes (10 MiB): split the document", MaxBytes)
	}
	return Result{Text: string(c.out), Title: c.title}, nil
}

// stopped wraps a context's error; a refusal is returned as it is.
func stopped(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("convert html: %w", err)
	}
	return err
}

// ctxReader ends the parse once ctx is done: the parser reads its input a
// few KiB at a time, and returns a reader's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// convError is an error of [Convert]: its sentinel and
// [cordontype.ErrInvalid].
type convError struct {
	kind error
	msg  string
}

func (e *convError) Error() string   { return e.msg }
func (e *convError) Unwrap() []error { return []error{e.kind, cordontype.ErrInvalid} }

func refuse(kind error, format string, a ...any) error {
	return &convError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

// converter writes the text as lines. A line is built in line (inline text,
// whitespace collapsed) and written to out when a block ends; pending is
// the break owed before the next line: 1 a newline, 2 a blank line.
type converter struct {
	out     []byte
	line    []byte
	space   bool // a run of whitespace is owed before the next character of line
	pending int
	// flat > 0 inside a heading or a table row of one line: block breaks
	// are spaces there.
	flat int
	// marker is the list marker (with its indentation) owed before the
	// next line; indent is the indentation of the current item's other
	// lines.
	marker, indent string
	items          int          // list items open
	lists          []*listState // lists open, innermost last
	cells          int          // cells of the current one-line row so far
	chars          int          // non-whitespace bytes written to line, ever
	layout         map[*html.Node]bool
	title          string
	hasTitle       bool
	tooLarge       bool
	// ctx is looked at every checkEvery nodes walked; err is its error
	// once done, which stops the walk as tooLarge does.
	ctx   context.Context
	nodes int
	err   error
}

type listState struct {
	ordered bool
	next    int
}

// Elements that start and end a paragraph (a blank line) or a line.
var (
	paragraphs = map[atom.Atom]bool{
		atom.P: true, atom.Blockquote: true, atom.Figure: true, atom.Address: true, atom.Article: true,
		atom.Section: true, atom.Main: true, atom.Aside: true, atom.Header: true, atom.Footer: true,
		atom.Details: true, atom.Fieldset: true, atom.Form: true, atom.Hgroup: true, atom.Center: true,
		atom.Dl: true, atom.Hr: true, atom.Table: true, atom.Search: true,
	}
	lines = map[atom.Atom]bool{
		atom.Div: true, atom.Dt: true, atom.Dd: true, atom.Caption: true, atom.Figcaption: true,
		atom.Summary: true, atom.Legend: true, atom.Body: true, atom.Html: true, atom.Dialog: true,
		atom.Optgroup: true, atom.Frameset: true,
	}
	// dropped elements, with everything in them.
	droppedNames = map[string]bool{
		"script": true, "style": true, "noscript": true, "template": true, "nav": true, "iframe": true,
		"canvas": true, "object": true, "embed": true, "audio": true, "video": true, "select": true,
		"button": true, "textarea": true, "input": true, "datalist": true,
	}
	// sectioning elements keep their own <header> and <footer>.
	sectioning = map[atom.Atom]bool{atom.Article: true, atom.Aside: true, atom.Main: true, atom.Section: true}
	// structure in a table cell makes its row a layout row.
	structure = map[atom.Atom]bool{
		atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
		atom.Pre: true, atom.Listing: true, atom.Xmp: true, atom.Plaintext: true,
		atom.Ul: true, atom.Ol: true, atom.Menu: true, atom.Dl: true, atom.Table: true, atom.Blockquote: true,
	}
)

func isHTML(n *html.Node) bool { return n.Type == html.ElementNode && n.Namespace == "" }

// dropped reports whether element n and everything in it are left out;
// inSection says n is inside article, aside, main or section.
func dropped(n *html.Node, inSection bool) bool {
	if n.Namespace == "svg" || droppedNames[n.Data] && (n.Namespace == "" || n.Data == "script" || n.Data == "style") {
		return true
	}
	if n.Namespace != "" {
		return false
	}
	switch n.DataAtom {
	case atom.Header, atom.Footer:
		if !inSection {
			return true
		}
	case atom.Dialog:
		if !hasAttr(n, "open") {
			return true
		}
	}
	for _, a := range n.Attr {
		if a.Namespace != "" {
			continue
		}
		switch a.Key {
		case "hidden":
			if !strings.EqualFold(trimSpace(a.Val), "until-found") {
				return true
			}
		case "aria-hidden":
			if strings.EqualFold(trimSpace(a.Val), "true") {
				return true
			}
		case "role":
			for _, r := range strings.FieldsFunc(a.Val, isSpaceRune) {
				if strings.EqualFold(r, "navigation") {
					return true
				}
			}
		case "style":
			s := strings.ToLower(strings.Map(func(r rune) rune {
				if isSpaceRune(r) {
					return -1
				}
				return r
			}, a.Val))
			if strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") {
				return true
			}
		}
	}
	return false
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

// HTML's ASCII whitespace: space, tab, LF, FF, CR.
func isSpace(b byte) bool       { return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r' }
func isSpaceRune(r rune) bool   { return r < utf8.RuneSelf && isSpace(byte(r)) }
func trimSpace(s string) string { return strings.TrimFunc(s, isSpaceRune) }

// markLayout records the table rows that hold structure (a heading, a code
// block, a list, a table or a quotation) in a cell: layout rows, whose
// cells are blocks rather than one line. It reports whether n holds
// structure; one pass over the tree.
func (c *converter) markLayout(n *html.Node, inSection bool) bool {
	if n.Type == html.ElementNode && dropped(n, inSection) {
		return false
	}
	inSection = inSection || isHTML(n) && sectioning[n.DataAtom]
	found := false
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if c.markLayout(ch, inSection) {
			found = true
		}
	}
	if found && isHTML(n) && n.DataAtom == atom.Tr {
		c.layout[n] = true
	}
	return found || isHTML(n) && structure[n.DataAtom]
}

func (c *converter) children(n *html.Node, inSection bool) {
	for ch := n.FirstChild; ch != nil && !c.tooLarge && c.err == nil; ch = ch.NextSibling {
		if c.nodes++; c.nodes%checkEvery == 0 {
			c.err = c.ctx.Err()
		}
		c.walk(ch, inSection)
	}
}

func (c *converter) walk(n *html.Node, inSection bool) {
	switch n.Type {
	case html.TextNode:
		c.text(n.Data)
		return
	case html.DocumentNode:
		c.children(n, inSection)
		return
	case html.ElementNode:
	default:
		return // comments, doctypes
	}
	if dropped(n, inSection) {
		return
	}
	if !isHTML(n) {
		c.children(n, inSection) // MathML: its text, inline
		return
	}
	inSection = inSection || sectioning[n.DataAtom]
	switch a := n.DataAtom; a {
	case atom.Title:
		if !c.hasTitle {
			c.hasTitle = true
			c.title = collapse(string(collect(n, nil, inSection)))
		}
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		c.heading(n, int(n.Data[1]-'0'), inSection)
	case atom.Pre, atom.Listing, atom.Xmp, atom.Plaintext:
		info := fenceInfo(n)
		if info == "" {
			if ch := onlyElement(n); ch != nil && ch.DataAtom == atom.Code && ch.Namespace == "" {
				info = fenceInfo(ch)
			}
		}
		c.code(collect(n, nil, inSection), info)
	case atom.Code:
		text := collect(n, nil, inSection)
		if c.flat == 0 && bytes.IndexByte(text, '\n') >= 0 {
			c.code(text, fenceInfo(n))
		} else {
			c.text(string(text))
		}
	case atom.Br:
		c.br()
	case atom.Ul, atom.Ol, atom.Menu:
		c.list(n, a == atom.Ol, inSection)
	case atom.Li:
		c.item(n, inSection)
	case atom.Tr:
		c.row(n, inSection)
	case atom.Td, atom.Th:
		c.cell(n, inSection)
	default:
		switch {
		case paragraphs[a]:
			c.block(n, 2, inSection)
		case lines[a]:
			c.block(n, 1, inSection)
		default:
			c.children(n, inSection)
		}
	}
}

func (c *converter) block(n *html.Node, brk int, inSection bool) {
	c.brk(brk)
	c.children(n, inSection)
	c.brk(brk)
}

// text appends inline text, each run of whitespace one space, none at the
// start of a line.
func (c *converter) text(s string) {
	for i := 0; i < len(s); {
		if isSpace(s[i]) {
			if len(c.line) > 0 {
				c.space = true
			}
			i++
			continue
		}
		j := i + 1
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		if c.space && c.line[len(c.line)-1] != ' ' {
			c.line = append(c.line, ' ')
		}
		c.space = false
		c.line = append(c.line, s[i:j]...)
		c.chars += j - i
		i = j
	}
}

// brk ends the current line and owes n (1: a newline, 2: a blank line)
// before the next; in a flat block it is a space.
func (c *converter) brk(n int) {
	if c.flat > 0 {
		if len(c.line) > 0 {
			c.space = true
		}
		return
	}
	c.flush()
	c.pending = max(c.pending, n)
}

// br is <br>: it ends the line; one on an empty line owes a blank line.
func (c *converter) br() {
	switch {
	case c.flat > 0:
		c.brk(1)
	case len(c.line) > 0:
		c.brk(1)
	case len(c.out) > 0:
		c.pending = 2
	}
}

// sep writes the break owed before a line.
func (c *converter) sep() {
	if len(c.out) > 0 {
		if c.pending >= 2 {
			c.out = append(c.out, '\n', '\n')
		} else {
			c.out = append(c.out, '\n')
		}
	}
	c.pending = 0
}

// flush writes the current line, if any, with its list marker or
// indentation; a line that would read as a heading or a fence to the
// chunker (SPEC section 2) is escaped with a backslash.
func (c *converter) flush() {
	c.space = false
	if len(c.line) == 0 {
		return
	}
	c.sep()
	prefix := c.indent
	if c.marker != "" {
		prefix, c.marker = c.marker, ""
	}
	c.out = append(c.out, prefix...)
	if prefix == "" && chunkerMarkup(c.line) {
		c.out = append(c.out, '\\')
	}
	c.out = append(c.out, c.line...)
	c.line = c.line[:0]
	c.grew()
}

// grew stops the conversion once the text is over the limit.
func (c *converter) grew() {
	if len(c.out) > MaxBytes {
		c.tooLarge = true
	}
}

// chunkerMarkup reports whether a line starting at column 0 would be a
// heading candidate or a fence line to the chunker.
func chunkerMarkup(line []byte) bool {
	return len(line) > 0 && line[0] == '#' || bytes.HasPrefix(line, []byte("```")) || bytes.HasPrefix(line, []byte("~~~"))
}

// heading writes h1-h6 as a Markdown ATX heading line at column 0.
func (c *converter) heading(n *html.Node, level int, inSection bool) {
	if c.flat > 0 {
		c.children(n, inSection)
		return
	}
	c.brk(2)
	c.flat++
	c.children(n, inSection)
	c.flat--
	if len(c.line) > 0 {
		text := c.line
		c.line = nil
		c.space = false
		c.sep()
		c.out = append(c.out, strings.Repeat("#", level)...)
		c.out = append(c.out, ' ')
		c.out = append(c.out, text...)
		if text[len(text)-1] == '#' {
			// A closing sequence, so the chunker keeps the text's own '#'.
			c.out = append(c.out, " #"...)
		}
		c.line = text[:0]
		c.grew()
	}
	c.brk(2)
}

// code writes a code block: fenced with ``` (and the language, when
// known), its text verbatim but for trailing newlines and a space before
// any line that would close the fence. In a flat block it is inline text.
func (c *converter) code(text []byte, info string) {
	if c.flat > 0 {
		c.text(string(text))
		return
	}
	text = bytes.TrimRight(text, "\n")
	if len(bytes.TrimFunc(text, isSpaceRune)) == 0 {
		return
	}
	c.brk(2)
	c.sep()
	c.out = append(c.out, "```"...)
	c.out = append(c.out, info...)
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		c.out = append(c.out, '\n')
		if bytes.HasPrefix(line, []byte("```")) || bytes.HasPrefix(line, []byte("~~~")) {
			c.out = append(c.out, ' ')
		}
		c.out = append(c.out, line...)
	}
	c.out = append(c.out, "\n```"...)
	c.pending = 2
	c.grew()
}

// collect appends the text of n's subtree verbatim (a <br> is a newline),
// leaving out dropped elements and titles.
func collect(n *html.Node, buf []byte, inSection bool) []byte {
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		switch ch.Type {
		case html.TextNode:
			buf = append(buf, ch.Data...)
		case html.ElementNode:
			if dropped(ch, inSection) || isHTML(ch) && ch.DataAtom == atom.Title {
				continue
			}
			if isHTML(ch) && ch.DataAtom == atom.Br {
				buf = append(buf, '\n')
				continue
			}
			buf = collect(ch, buf, inSection || isHTML(ch) && sectioning[ch.DataAtom])
		}
	}
	return buf
}

// collapse makes each run of whitespace one space and trims the ends.
func collapse(s string) string {
	return strings.Join(strings.FieldsFunc(s, isSpaceRune), " ")
}

// fenceInfo is X of the first class "language-X" or "lang-X" of n, X 1-32
// bytes of A-Z a-z 0-9 _ + # . -; else "".
func fenceInfo(n *html.Node) string {
	for _, cl := range strings.FieldsFunc(attr(n, "class"), isSpaceRune) {
		x, ok := strings.CutPrefix(cl, "language-")
		if !ok {
			x, ok = strings.CutPrefix(cl, "lang-")
		}
		if !ok {
			continue
		}
		if len(x) == 0 || len(x) > 32 || strings.IndexFunc(x, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_+#.-", r))
		}) >= 0 {
			return ""
		}
		return x
	}
	return ""
}

// onlyElement returns n's only child element when it has no other
// children but whitespace text.
func onlyElement(n *html.Node) *html.Node {
	var only *html.Node
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		switch {
		case ch.Type == html.ElementNode && only == nil:
			only = ch
		case ch.Type == html.TextNode && trimSpace(ch.Data) == "":
		case ch.Type == html.CommentNode:
		default:
			return nil
		}
	}
	return only
}

// list is ul, ol or menu: a paragraph, or lines inside a list item.
func (c *converter) list(n *html.Node, ordered bool, inSection bool) {
	if c.flat > 0 {
		c.children(n, inSection)
		return
	}
	brk := 2
	if c.items > 0 {
		brk = 1
	}
	c.brk(brk)
	l := &listState{ordered: ordered, next: 1}
	if ordered {
		if s := trimSpace(attr(n, "start")); s != "" && len(s) <= 9 && strings.Trim(s, "0123456789") == "" {
			l.next, _ = strconv.Atoi(s)
		}
	}
	c.lists = append(c.lists, l)
	c.children(n, inSection)
	c.lists = c.lists[:len(c.lists)-1]
	c.brk(brk)
}

// item is li: its first line gets the marker ("- ", or "N. " in an ol),
// its other lines the indentation; 2 spaces a level of nesting, at most
// maxIndentLevels.
func (c *converter) item(n *html.Node, inSection bool) {
	if c.flat > 0 {
		c.block(n, 1, inSection)
		return
	}
	c.brk(1)
	marker := "- "
	if len(c.lists) > 0 {
		if l := c.lists[len(c.lists)-1]; l.ordered {
			marker = strconv.Itoa(l.next) + ". "
			l.next++
		}
	}
	pad := strings.Repeat("  ", min(c.items, maxIndentLevels))
	saved := c.indent
	c.marker, c.indent = pad+marker, pad+"  "
	c.items++
	c.children(n, inSection)
	c.items--
	c.brk(1)
	c.marker, c.indent = "", saved
}

// row is tr: one line of its cells' text joined by " | ", or, for a layout
// row, its cells one after another as blocks.
func (c *converter) row(n *html.Node, inSection bool) {
	if c.layout[n] && c.flat == 0 {
		c.block(n, 1, inSection)
		return
	}
	c.brk(1)
	start, chars, cells := len(c.line), c.chars, c.cells
	c.cells = 0
	c.flat++
	c.children(n, inSection)
	c.flat--
	c.cells = cells
	if c.chars == chars {
		c.line = c.line[:start] // no text in any cell
	}
	c.brk(1)
}

// cell is td or th: in a one-line row, its text after " | " (but the
// first); else a block.
func (c *converter) cell(n *html.Node, inSection bool) {
	if c.flat == 0 {
		c.block(n, 2, inSection)
		return
	}
	if c.cells > 0 {
		if len(c.line) > 0 {
			c.line = append(c.line, ' ')
		}
		c.line = append(c.line, '|')
		c.space = true
	}
	c.cells++
	c.children(n, inSection)
}
