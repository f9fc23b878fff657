package htmltext

import "errors"

// Errors [Convert] and [ConvertContext] return, each wrapped with what was found. They wrap
// [cordontype.ErrInvalid]: a document that cannot be converted is bad
// input (a client error), never a failure of the system.
var (
	// ErrTooLarge: the HTML, or the text converted from it, is over
	// [MaxBytes].
	ErrTooLarge = errors.New("html is too large")
	// ErrTooDeep: the HTML nests more than [MaxDepth] open elements, the
	// parser's own limit (found by the pre-pass, or by the parser).
	ErrTooDeep = errors.New("html nests too deep")
	// ErrTooComplex: parsing the HTML would cost more than [MaxWork]:
	// many tags, each inside many open elements.
	ErrTooComplex = errors.New("html is too complex")
	// ErrNotUTF8: the HTML is not valid UTF-8. Cordon never repairs text:
	// convert the file first (iconv -f windows-1252 -t utf-8).
	ErrNotUTF8 = errors.New("html is not valid UTF-8")
)
