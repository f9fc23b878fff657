// Package chunk splits a document into citable chunks, sections first and size
// second (SPEC section 2).
//
// # Sections
//
// A Markdown ATX heading at column 0, outside fenced code, starts a section; the
// heading line itself is not chunk text. Text before the first heading is the
// section "body". Splitting by structure first is the design: a size-first
// split has already destroyed the boundaries a section-aware citation needs.
// A section also records its path, the names of the headings enclosing it
// (a heading of level L closes every open heading of level L or deeper;
// see Piece.Path).
//
// # Windows
//
// Inside a section, words (maximal runs of non-whitespace) are grouped into
// windows of MaxWords words that start every MaxWords-OverlapWords words; the
// last window is the first that reaches the section's last word.
//
// # Spans
//
// Every chunk carries document-global code-point offsets, so
// []rune(text)[StartChar:EndChar] is exactly the chunk's text. Offsets come
// from one pass over the text, so a repeated word always resolves to its own
// occurrence.
//
// # Fallback
//
// If no chunk would contain a token (say, a document of headings only), the
// whole text is windowed as one "body" section with no heading or fence
// detection: an accepted document is never silently unretrievable.
package chunk
