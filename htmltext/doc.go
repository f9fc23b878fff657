// Package htmltext converts an HTML document into the text Cordon stores
// (SPEC section 2, "HTML documents"), so that a web page is chunked by its
// own structure: h1-h6 become Markdown ATX headings of their level, which
// the chunker makes sections; code blocks are fenced and kept verbatim;
// paragraphs, list items, table rows and line breaks become lines; scripts,
// styles, navigation, page headers and footers, form controls and hidden
// elements are left out. The document's <title> is returned apart, for a
// document given no title.
//
// # Parsing
//
// The HTML is parsed by golang.org/x/net/html, which implements the HTML5
// parsing algorithm: what [Convert] sees is the tree a browser builds, with
// its repairs of unclosed and misnested tags. Character references are
// decoded by the parser.
//
// # Hostile input
//
// The work is bounded: input over [MaxBytes] is refused before parsing;
// the tree is walked once (plus one pass that finds layout table rows),
// list indentation is capped, and the conversion stops as soon as its text
// is over [MaxBytes]. The output is deterministic: the same bytes in give
// the same bytes out.
//
// The parser's own cost is the part an input can inflate: for many tags it
// scans its stack of open elements, so 10 MiB of tags held 500 elements
// deep costs it minutes. Before parsing, [Convert] runs the tokenizer alone
// (linear, no tree) over the input, keeping a model of the parser's stack:
// an element leaves it only where the HTML5 tree construction rules
// certainly close it, and the elements the parser adds by itself (html,
// head or body, a table's tbody and tr, formatting elements it reopens,
// at most three alike) are counted in. For every token it adds up the open
// elements the parser may look at, and refuses HTML whose model is ever
// deeper than [MaxDepth] ([ErrTooDeep]) or whose sum is over [MaxWork]
// ([ErrTooComplex]): such input is refused in a fraction of a second,
// allocating a few MiB, and what passes parses in about the time of
// ordinary markup of the same size limit. The model is an upper bound for
// the markup it knows; misnesting it does not know makes it count more.
// Should input crafted against the model still parse slowly, the context
// of [ConvertContext] stops the pre-pass, the parse (which reads its input
// a few KiB at a time) and the walk alike: the server passes each request's
// deadline.
package htmltext
