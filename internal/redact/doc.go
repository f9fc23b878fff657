// Package redact hides a secret, such as a model provider's API key, in text
// a server sent back: an error answer's body, which the embedding and
// reranker clients put into their error messages and so into logs.
//
// A server that echoes the key rarely echoes it as it was sent. A JSON body
// escapes "/" as "\/" and may escape any character as "\u002b"; an echoed
// URL percent-encodes it ("%2F" or "%2f"); a message may quote it ("\"",
// "\\", "\x2f") or hold it in HTML ("&#47;", "&sol;"); a header dump may
// give it base64 (Basic credentials) or hex; and the encodings nest (a JSON
// string holding a percent-encoded URL, "%252F"). Replacing only the literal
// key leaves every one of these in the log.
//
// # How
//
// [Redactor.String] reads the text in layers. Layer 0 is the text itself;
// from each layer, three next layers decode, in one pass each, every escape
// of one kind it holds: JSON and C-style backslash escapes, percent
// escapes, HTML character references. Each decoded byte remembers which
// bytes of the original text it came from. One kind per layer, since a key
// may itself hold what reads as another kind's escape. In every layer it
// looks for the key, its hex (any case) and its base64 (standard and URL
// alphabets, padded or not, and at any alignment inside a longer base64
// text, such as that of "Bearer KEY"); each match hides the original bytes
// it came from, whole escapes included. A layer that decodes nothing is not
// followed further, and at most four nested encodings are decoded.
//
// If the text still holds the key in any of these forms once hidden (the
// key itself contains part of [Mask], so that the mask and its neighbours
// spell it again), the whole text is replaced by [Mask].
//
// Hide the whole text before cutting it short for a message: a key cut in
// two is not recognised.
package redact
