package corpus

import "errors"

// ErrNoSections is returned by [ConvertRendered] (and so reported by
// [ManPages] as a skipped page) when a rendered page has no section title: it
// did not render as a manual page.
var ErrNoSections = errors.New("rendered page has no section titles")

// ErrNoBody is returned by [ConvertRendered] when a rendered page has
// section titles but no body text with a token.
var ErrNoBody = errors.New("rendered page has no body text")

// ErrNotUTF8 is returned by [ConvertRendered] when the rendering is not valid
// UTF-8. Cordon refuses such text rather than repairing it.
var ErrNotUTF8 = errors.New("rendered page is not valid UTF-8")

// ErrOutputNotEmpty is returned by [ManPages] when the output directory
// already holds a generated corpus and Replace is not set: two runs must not
// mix their files.
var ErrOutputNotEmpty = errors.New("output directory already holds a corpus")

// ErrNoPages is returned by [ManPages] when the selected sections hold no
// page to convert (wrong --root, or every page excluded).
var ErrNoPages = errors.New("no manual pages selected")

// ErrInvalidOptions is returned by [ManPages] for options out of range.
var ErrInvalidOptions = errors.New("invalid corpus options")

// ErrKind is returned by [ParseKind] for an unknown query kind.
var ErrKind = errors.New("unknown query kind")

// ErrEmptyCorpus is returned by [Load] when a directory holds no "*.md" file.
var ErrEmptyCorpus = errors.New("corpus directory holds no .md documents")
