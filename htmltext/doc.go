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
// The work is bounded: input over [MaxBytes] is refused before parsing,
// the parser refuses nesting over [MaxDepth] open elements (which also
// bounds its scans of the open-element stack and the converter's
// recursion), the tree is walked once (plus one pass that finds layout
// table rows), list indentation is capped, and the conversion stops as soon
// as its text is over [MaxBytes]. The output is deterministic: the same
// bytes in give the same bytes out.
package htmltext
