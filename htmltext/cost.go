package htmltext

import (
	"context"
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MaxWork bounds the parser's work on one document, in the units of
// [Convert]'s pre-pass: the open elements the parser looks at, tag by tag
// (see "Hostile input" in the package documentation). golang.org/x/net/html
// scans its stack of open elements for many tags, so its cost grows as tags
// times depth; HTML over this budget is refused with [ErrTooComplex] before
// it is parsed. 64 Mi units, from measurements of 10 MiB pages: ordinary
// markup spends 3 Mi, tags held 50 deep 16-36 Mi, while paragraphs under
// 500 divs would spend 318 Mi, cells of 120 nested tables 246 Mi and list
// items 500 deep 1,256 Mi. A document just under the budget (0.5 MiB of
// list items 500 deep) parses in about the time of 10 MiB of ordinary
// markup.
const MaxWork = 64 << 20

// checkEvery is how many tokens (in the pre-pass) or nodes (in the
// conversion) pass between two looks at the context.
const checkEvery = 4096

// precheck is Convert's pre-pass: one linear run of the tokenizer (no tree)
// that follows the elements the parser will hold open, refusing the html
// when they would be more than MaxDepth or when the parser's work would be
// over MaxWork. It returns ctx's error once ctx is done.
//
// The stack it keeps mirrors the parser's stack of open elements from above:
// an element is taken off it only where the parser (the HTML5 tree
// construction rules) certainly takes it off too, and the elements the
// parser adds by itself (html, head, body, a table's tbody and tr, the
// formatting elements it reopens) are counted in. So its depth is at least
// the parser's for the markup it models; misnesting it does not model makes
// it count more, never less, except where the parser's own closing of an
// element it keeps open is missed, which the request deadline still bounds.
func precheck(ctx context.Context, src string) error {
	_, _, err := measure(ctx, src, MaxDepth, MaxWork)
	return err
}

// measure runs the pre-pass with the given limits, returning the work
// and the greatest depth found (so far, when it refuses).
func measure(ctx context.Context, src string, maxDepth int, maxWork int64) (work int64, depth int, err error) {
	z := html.NewTokenizer(strings.NewReader(src))
	var s openStack
	depth = s.depth()
	for n := 0; ; n++ {
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return work, depth, err
			}
		}
		z.AllowCDATA(s.foreignTop())
		switch z.Next() {
		case html.ErrorToken:
			// With a strings.Reader the only error is io.EOF.
			return work, depth, nil
		case html.TextToken:
			// The parser reopens formatting elements before text,
			// looking for each in its stack.
			s.scanned += 1 + s.depth()/pointerScan
		case html.StartTagToken:
			s.start(z, false)
		case html.SelfClosingTagToken:
			s.start(z, true)
		case html.EndTagToken:
			s.end(z)
		default:
			continue
		}
		d := s.depth()
		depth = max(depth, d)
		if d > maxDepth {
			return work, depth, refuse(ErrTooDeep, "html nests more than %d open elements", maxDepth)
		}
		work += int64(s.scanned)
		s.scanned = 0
		if work > maxWork {
			return work, depth, refuse(ErrTooComplex, "html holds too many tags nested too deep for its size (over %d units of parsing work, each tag costing the elements open around it): flatten or split the document", maxWork)
		}
	}
}

// Namespaces of open elements.
const (
	nsHTML = iota
	nsSVG
	nsMath
)

type open struct {
	a    atom.Atom
	name string // when a is 0
	ns   uint8
	// key is a formatting element's tag and attributes, which the parser
	// compares to reopen at most 3 alike ("Noah's Ark").
	key string
	// implied: a tbody, thead, tfoot or tr right inside its table (or a
	// tr in its section), standing for one the table's count has.
	implied bool
}

// openStack is the pre-pass's model of the parser's open elements.
type openStack struct {
	els []open
	// tables counts open table elements: the parser may add a tbody and a
	// tr under each. implied counts the open elements that stand for them.
	tables, implied int
	// reopen counts, by key, formatting elements taken off the stack by
	// something other than their end tag: the parser may reopen them
	// (up to 3 alike, 1 for a and nobr). reopened is their capped sum.
	reopen   map[string]int
	reopened int
	// count counts the open elements by name (html ones by atom, others
	// by namespace and name), so that looking for one that is not open
	// costs nothing; headings counts h1-h6.
	count    map[atom.Atom]int
	others   map[string]int
	headings int
	// scanned is the work of the current token: the open elements the
	// parser looks at for it (an eighth each for comparisons of pointers),
	// which bound the model's own work too.
	scanned int
}

// parserOwn counts the elements the parser opens without a tag: html and
// head or body.
const parserOwn = 2

func (s *openStack) depth() int {
	return len(s.els) - s.implied + 2*s.tables + s.reopened + parserOwn
}

func (s *openStack) foreignTop() bool {
	return len(s.els) > 0 && s.els[len(s.els)-1].ns != nsHTML && !integration(s.els[len(s.els)-1])
}

// integration reports whether the parser treats tags inside e as HTML.
func integration(e open) bool {
	switch e.ns {
	case nsSVG:
		return e.name == "foreignobject" || e.name == "desc" || e.name == "title"
	case nsMath:
		switch e.name {
		case "mi", "mo", "mn", "ms", "mtext", "annotation-xml":
			return true
		}
	}
	return false
}

func (s *openStack) push(e open) {
	if n := len(s.els); e.ns == nsHTML && n > 0 && s.els[n-1].ns == nsHTML && !s.els[n-1].implied {
		switch top := s.els[n-1].a; e.a {
		case atom.Tbody, atom.Thead, atom.Tfoot:
			e.implied = top == atom.Table
		case atom.Tr:
			e.implied = top == atom.Table || top == atom.Tbody || top == atom.Thead || top == atom.Tfoot
		}
	}
	s.els = append(s.els, e)
	s.counted(e, 1)
	if e.ns == nsHTML && e.a == atom.Table {
		s.tables++
	}
	if e.implied {
		s.implied++
	}
}

// popFrom takes els[i:] off the stack; end says els[i] is closed by its
// own end tag (so it is not reopened).
func (s *openStack) popFrom(i int, end bool) {
	for j := len(s.els) - 1; j >= i; j-- {
		e := s.els[j]
		s.counted(e, -1)
		if e.ns == nsHTML && e.a == atom.Table {
			s.tables--
		}
		if e.implied {
			s.implied--
		}
		if e.key != "" && !(end && j == i) {
			if s.reopen == nil {
				s.reopen = map[string]int{}
			}
			s.reopen[e.key]++
			if s.reopen[e.key] <= reopenCap(e.a) {
				s.reopened++
			}
		}
	}
	s.els = s.els[:i]
}

func (s *openStack) counted(e open, n int) {
	switch {
	case e.ns == nsHTML && e.a != 0:
		if s.count == nil {
			s.count = map[atom.Atom]int{}
		}
		s.count[e.a] += n
	default:
		if s.others == nil {
			s.others = map[string]int{}
		}
		s.others[othersKey(e)] += n
	}
	if e.ns == nsHTML && isHeading(e.a) {
		s.headings += n
	}
}

func othersKey(e open) string { return string(rune('0'+e.ns)) + e.a.String() + e.name }

func (s *openStack) open(e open) bool {
	switch {
	case e.ns == nsHTML && isHeading(e.a):
		return s.headings > 0
	case e.ns == nsHTML && e.a != 0:
		return s.count[e.a] > 0
	default:
		return s.others[othersKey(e)] > 0
	}
}

func reopenCap(a atom.Atom) int {
	if a == atom.A || a == atom.Nobr {
		return 1 // a new one closes the old
	}
	return 3
}

// find returns the index of the innermost open element named like e (any
// heading for a heading), or -1.
func (s *openStack) find(e open) int {
	if !s.open(e) {
		return -1
	}
	for i := len(s.els) - 1; i >= 0; i-- {
		s.scanned++
		o := s.els[i]
		if o.ns == e.ns && o.a == e.a && o.name == e.name || e.ns == nsHTML && o.ns == nsHTML && isHeading(e.a) && isHeading(o.a) {
			return i
		}
	}
	return -1
}

// clear reports whether no element above index i stops the parser from
// closing els[i], by stop.
func (s *openStack) clear(i int, stop func(open) bool) bool {
	for _, o := range s.els[i+1:] {
		s.scanned++
		if stop(o) {
			return false
		}
	}
	return true
}

func isHeading(a atom.Atom) bool {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// pointerScan: the parser's walks of its stack comparing pointers (looking
// for an element, as it does before text and tags to reopen formatting
// elements) cost about an eighth of its scope checks, which look up each
// element's name in sets (measured with BenchmarkConvertHostile).
const pointerScan = 8

func (s *openStack) start(z *html.Tokenizer, selfClosing bool) {
	s.scanned += 1 + s.depth()/pointerScan + s.reopened
	name, hasAttr := z.TagName()
	e := element(name)
	var attrs []string
	if hasAttr && formatting[e.a] {
		for more := true; more; {
			var k, v []byte
			k, v, more = z.TagAttr()
			attrs = append(attrs, string(k)+"="+string(v))
		}
	}
	if s.foreignTop() && !breakout(e, attrs) {
		// A foreign element: its text is never raw, and /> closes it.
		z.NextIsNotRawText()
		if !selfClosing {
			s.push(open{ns: s.els[len(s.els)-1].ns, name: string(name)})
		}
		return
	}
	if s.foreignTop() {
		// A breakout: the parser closes the foreign elements.
		i := len(s.els)
		for i > 0 && s.els[i-1].ns != nsHTML && !integration(s.els[i-1]) {
			i--
		}
		s.popFrom(i, false)
	}
	switch e.a {
	case atom.Svg, atom.Math:
		if selfClosing {
			return
		}
		e.ns = nsSVG
		if e.a == atom.Math {
			e.ns = nsMath
		}
		e.a, e.name = 0, string(name)
		s.push(e)
		return
	case atom.Html, atom.Head, atom.Body:
		return // at most one each, counted in parserOwn
	case atom.Li:
		s.closeItem(atom.Li, atom.Li)
	case atom.Dd, atom.Dt:
		s.closeItem(atom.Dd, atom.Dt)
	case atom.Option, atom.Optgroup:
		if n := len(s.els); n > 0 && s.els[n-1].ns == nsHTML && s.els[n-1].a == atom.Option {
			s.popFrom(n-1, false)
		}
	case atom.Td, atom.Th, atom.Tr, atom.Tbody, atom.Thead, atom.Tfoot:
		s.closeCell(e.a)
	case atom.A, atom.Nobr:
		// The parser closes an open one (when nothing special is in
		// the way, the adoption agency pops to it).
		if i := s.find(e); i >= 0 && s.clear(i, special) {
			s.popFrom(i, false)
		}
	}
	if closesP[e.a] || e.a == atom.Button {
		// The parser looks for a p in button scope: to the bottom of its
		// stack when none is open.
		if !s.open(open{a: atom.P}) {
			s.scanned += s.depth()
		}
	}
	if closesP[e.a] {
		if i := s.find(open{a: atom.P}); i >= 0 && s.clear(i, buttonScope) {
			s.popFrom(i, false)
		}
		if n := len(s.els); isHeading(e.a) && n > 0 && s.els[n-1].ns == nsHTML && isHeading(s.els[n-1].a) {
			s.popFrom(n-1, false)
		}
	}
	if void[e.a] {
		return
	}
	if formatting[e.a] {
		// The key the parser's "Noah's Ark" compares: tag and attributes
		// (in any order). A new a or nobr closes the old, whatever its
		// attributes.
		e.key = e.a.String()
		if len(attrs) > 0 && e.a != atom.A && e.a != atom.Nobr {
			slices.Sort(attrs)
			e.key += "\x00" + strings.Join(attrs, "\x00")
		}
	}
	s.push(e)
}

// closeItem is a li, dd or dt start tag closing the innermost open one of
// a or b, when only address, div, p and elements that are not special are
// in the way.
func (s *openStack) closeItem(a, b atom.Atom) {
	for i := len(s.els) - 1; i >= 0; i-- {
		s.scanned++
		o := s.els[i]
		if o.ns == nsHTML && (o.a == a || o.a == b) {
			s.popFrom(i, false)
			return
		}
		if special(o) && !(o.ns == nsHTML && (o.a == atom.Address || o.a == atom.Div || o.a == atom.P)) {
			return
		}
	}
}

// closeCell is a table part's start tag closing the open cell, row or
// section it follows (in table scope).
func (s *openStack) closeCell(a atom.Atom) {
	var closes []atom.Atom
	switch a {
	case atom.Td, atom.Th:
		closes = []atom.Atom{atom.Td, atom.Th}
	case atom.Tr:
		closes = []atom.Atom{atom.Tr, atom.Td, atom.Th}
	default:
		closes = []atom.Atom{atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Td, atom.Th}
	}
	for _, c := range closes {
		for i := len(s.els) - 1; i >= 0; i-- {
			s.scanned++
			o := s.els[i]
			if o.ns != nsHTML {
				continue
			}
			if o.a == c {
				s.popFrom(i, false)
				return
			}
			if tableScope(o) {
				break
			}
		}
	}
}

func (s *openStack) end(z *html.Tokenizer) {
	s.scanned += 1 + s.depth()/pointerScan
	name, _ := z.TagName()
	e := element(name)
	if n := len(s.els); n > 0 && s.els[n-1].ns != nsHTML {
		// The parser closes the innermost foreign element of that name
		// when only foreign elements are above it.
		for i := len(s.els) - 1; i >= 0 && s.els[i].ns != nsHTML; i-- {
			s.scanned++
			if s.els[i].name == string(name) {
				s.popFrom(i, true)
				return
			}
		}
	}
	switch e.a {
	case atom.Html, atom.Head, atom.Body, atom.Br:
		return
	}
	i := s.find(e)
	if i < 0 {
		// The parser looks for it through its stack, in vain.
		s.scanned += s.depth()
		// A formatting end tag with none open removes one the parser
		// would reopen; counted only for those without attributes (which
		// one it removes is not known otherwise).
		if n := s.reopen[e.a.String()]; formatting[e.a] && n > 0 {
			s.reopen[e.a.String()]--
			if n <= reopenCap(e.a) {
				s.reopened--
			}
		}
		return
	}
	var stop func(open) bool
	switch {
	case i == len(s.els)-1:
		s.popFrom(i, true)
		return
	case e.a == atom.P:
		stop = buttonScope
	case e.a == atom.Li:
		stop = listItemScope
	case e.a == atom.Select:
		stop = selectScope
	case tableEnd[e.a]:
		stop = tableScope
	case scopedEnd[e.a] || isHeading(e.a):
		stop = defaultScope
	case !special(e):
		stop = special // formatting elements and any other
	default:
		return // other special elements: only when innermost
	}
	if s.clear(i, stop) {
		s.popFrom(i, true)
	}
}

// element is an html element named name (lower case, from the
// tokenizer).
func element(name []byte) open {
	e := open{a: atom.Lookup(name)}
	if e.a == 0 {
		e.name = string(name)
	}
	return e
}

// breakout reports whether a start tag in foreign content closes it (a
// font only with color, face or size).
func breakout(e open, attrs []string) bool {
	if e.a == atom.Font {
		for _, kv := range attrs {
			switch k, _, _ := strings.Cut(kv, "="); k {
			case "color", "face", "size":
				return true
			}
		}
		return false
	}
	return breakouts[e.a]
}

// The parser's element sets (golang.org/x/net/html, after the HTML
// standard's tree construction).
var (
	breakouts = atoms(atom.B, atom.Big, atom.Blockquote, atom.Body, atom.Br, atom.Center, atom.Code, atom.Dd, atom.Div,
		atom.Dl, atom.Dt, atom.Em, atom.Embed, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Head, atom.Hr,
		atom.I, atom.Img, atom.Li, atom.Listing, atom.Menu, atom.Meta, atom.Nobr, atom.Ol, atom.P, atom.Pre, atom.Ruby,
		atom.S, atom.Small, atom.Span, atom.Strong, atom.Strike, atom.Sub, atom.Sup, atom.Table, atom.Tt, atom.U, atom.Ul,
		atom.Var)
	specials = atoms(atom.Address, atom.Applet, atom.Area, atom.Article, atom.Aside, atom.Base, atom.Basefont,
		atom.Bgsound, atom.Blockquote, atom.Body, atom.Br, atom.Button, atom.Caption, atom.Center, atom.Col,
		atom.Colgroup, atom.Dd, atom.Details, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Embed, atom.Fieldset,
		atom.Figcaption, atom.Figure, atom.Footer, atom.Form, atom.Frame, atom.Frameset, atom.H1, atom.H2, atom.H3,
		atom.H4, atom.H5, atom.H6, atom.Head, atom.Header, atom.Hgroup, atom.Hr, atom.Html, atom.Iframe, atom.Img,
		atom.Input, atom.Keygen, atom.Li, atom.Link, atom.Listing, atom.Main, atom.Marquee, atom.Menu, atom.Meta,
		atom.Nav, atom.Noembed, atom.Noframes, atom.Noscript, atom.Object, atom.Ol, atom.P, atom.Param,
		atom.Plaintext, atom.Pre, atom.Script, atom.Section, atom.Select, atom.Source, atom.Style, atom.Summary,
		atom.Table, atom.Tbody, atom.Td, atom.Template, atom.Textarea, atom.Tfoot, atom.Th, atom.Thead, atom.Title,
		atom.Tr, atom.Track, atom.Ul, atom.Wbr, atom.Xmp)
	formatting = atoms(atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.Nobr, atom.S,
		atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U)
	void = atoms(atom.Area, atom.Base, atom.Basefont, atom.Bgsound, atom.Br, atom.Col, atom.Embed, atom.Frame,
		atom.Hr, atom.Image, atom.Img, atom.Input, atom.Keygen, atom.Link, atom.Meta, atom.Param, atom.Source,
		atom.Track, atom.Wbr)
	// closesP: start tags that close an open p in button scope.
	closesP = atoms(atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details,
		atom.Dialog, atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer,
		atom.Header, atom.Hgroup, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Search, atom.Section,
		atom.Summary, atom.Ul, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Pre, atom.Listing,
		atom.Form, atom.Li, atom.Dd, atom.Dt, atom.Plaintext, atom.Hr, atom.Xmp)
	// scopedEnd: end tags that close their element in default scope.
	scopedEnd = atoms(atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Button, atom.Center,
		atom.Details, atom.Dialog, atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure,
		atom.Footer, atom.Header, atom.Hgroup, atom.Listing, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.Pre,
		atom.Search, atom.Section, atom.Summary, atom.Ul, atom.Applet, atom.Marquee, atom.Object, atom.Dd, atom.Dt)
	// tableEnd: end tags that close their element in table scope.
	tableEnd = atoms(atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr, atom.Td, atom.Th, atom.Caption)
)

func atoms(as ...atom.Atom) map[atom.Atom]bool {
	m := make(map[atom.Atom]bool, len(as))
	for _, a := range as {
		m[a] = true
	}
	return m
}

func special(o open) bool {
	switch o.ns {
	case nsHTML:
		return specials[o.a]
	case nsSVG:
		return o.name == "foreignobject" || o.name == "desc" || o.name == "title"
	default:
		switch o.name {
		case "mi", "mo", "mn", "ms", "mtext", "annotation-xml":
			return true
		}
		return false
	}
}

func defaultScope(o open) bool {
	if o.ns == nsHTML {
		switch o.a {
		case atom.Applet, atom.Caption, atom.Html, atom.Table, atom.Td, atom.Th, atom.Marquee, atom.Object,
			atom.Template, atom.Select:
			return true
		}
		return false
	}
	return special(o)
}

func buttonScope(o open) bool {
	return defaultScope(o) || o.ns == nsHTML && o.a == atom.Button
}

func listItemScope(o open) bool {
	return defaultScope(o) || o.ns == nsHTML && (o.a == atom.Ol || o.a == atom.Ul)
}

func selectScope(o open) bool {
	return !(o.ns == nsHTML && (o.a == atom.Option || o.a == atom.Optgroup))
}

func tableScope(o open) bool {
	return o.ns == nsHTML && (o.a == atom.Html || o.a == atom.Table || o.a == atom.Template)
}
