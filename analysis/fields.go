package analysis

import (
	"math"
	"strings"
)

// Field terms: a chunk's title and headings, searchable apart from its
// text. Each token of a chunk's field text (its document's title, then
// the headings enclosing its section and its section's own; see
// [FieldText]) is a field term, FieldPrefix
// followed by the token, and, under the English analyzer, each of its stem
// terms is one too (FieldPrefix followed by the stem term). A field term
// is a term like any other for the postings and the statistics, but adds
// nothing to a chunk's length, so a query that asks for none ranks as if
// there were none.

// FieldPrefix starts every field term. It is not a token rune and differs
// from StemPrefix, so no token and no stem term is ever a field term.
const FieldPrefix = "#"

// FieldsVersion names the field terms' rules; a tenant that indexes field
// terms records it in its tokenizer version ([Version]). Bump it when
// [FieldText], [HeadingText] or [AppendNormFieldTerms] change. Under it a
// field term's frequency is length-normalised ([FieldTF]).
const FieldsVersion = "fields-title-path-3"

// FieldsPathVersion names the rules before field frequencies were
// length-normalised: the field text of [FieldText], each field term's
// frequency its count there. A tenant indexed under them keeps them until
// it is re-indexed.
const FieldsPathVersion = "fields-title-path-2"

// FieldsSectionVersion names the rules before section paths: the field
// text held the title and the section's own heading only
// ([SectionFieldText]), each field term's frequency its count. A tenant
// indexed under them keeps them until it is re-indexed.
const FieldsSectionVersion = "fields-title-section-1"

// FieldScale and FieldRefLength make a field term's frequency under
// [FieldsVersion] ([FieldTF]): FieldScale times its count in a field of
// FieldRefLength tokens. A query divides field frequencies by FieldScale
// (a power of two, so the division is exact).
const (
	FieldScale     = 16
	FieldRefLength = 4
)

// FieldTF is the frequency under [FieldsVersion] of a term that occurs
// count times in a field of n tokens (n >= 1): count * FieldScale *
// FieldRefLength / n, rounded half up, in integers, and at least 1. An
// occurrence then counts FieldRefLength / n, so a word of a one-word
// title counts more than one of a long title (BM25F's per-field length
// normalisation, against a fixed length rather than the field's average,
// so that no chunk's frequency depends on other chunks). A chunk has two
// fields, its title and its headings ([AppendNormFieldTerms]), each
// normalised by its own length.
func FieldTF(count, n int32) int32 {
	tf := (int64(count)*FieldScale*FieldRefLength + int64(n)/2) / int64(n)
	if tf < 1 {
		return 1
	}
	if tf > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(tf)
}

// Section names a chunk has without a heading of its own: text before the
// first heading is the section "body", a heading with no text the section
// "untitled" (SPEC section 2). Neither is a heading's text, so neither is
// field text.
const (
	sectionBody     = "body"
	sectionUntitled = "untitled"
)

// IsFieldTerm reports whether term is a field term.
func IsFieldTerm(term string) bool { return len(term) > 0 && term[0] == FieldPrefix[0] }

// PathSep separates the names of a stored section path (see [JoinPath]).
// A heading is one line, so no name holds it.
const PathSep = "\n"

// JoinPath is a section path (chunk.Piece.Path: the names of the headings
// enclosing a section, outermost first) as one string, the names joined
// by PathSep; "" when there is none.
func JoinPath(path []string) string { return strings.Join(path, PathSep) }

// FieldText is the field text of a chunk of a document titled title, in
// the section named section, enclosed by the headings of path (a
// [JoinPath] string, "" for none): the title, then each name of path,
// then the section's name, joined by newlines, where an empty title adds
// nothing and neither does a name that is exactly "body" or "untitled"
// (so a heading whose text is one of them is not searchable as a field)
// or that equals the title under [strings.EqualFold] (a Markdown
// document's first heading is often its title, which then counts once).
func FieldText(title, path, section string) string { return fieldText(title, path, section, true) }

// HeadingText is the headings' part of [FieldText]: each name of path,
// then the section's name, joined by newlines, that FieldText adds after
// the title ("" for none).
func HeadingText(title, path, section string) string {
	return fieldText(title, path, section, false)
}

func fieldText(title, path, section string, withTitle bool) string {
	if path == "" && !fieldName(section, title) {
		if withTitle {
			return title // the common case, without building
		}
		return ""
	}
	var b strings.Builder
	b.Grow(len(title) + len(path) + len(section) + 2)
	if withTitle {
		b.WriteString(title)
	}
	add := func(name string) {
		if fieldName(name, title) {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(name)
		}
	}
	for name := range strings.SplitSeq(path, PathSep) {
		add(name) // "" of an empty path adds nothing
	}
	add(section)
	return b.String()
}

// fieldName reports whether FieldText adds a heading's name to a title's:
// a heading's text ([headingName]) that is not the title.
func fieldName(name, title string) bool {
	return headingName(name) && (title == "" || !strings.EqualFold(name, title))
}

// SectionFieldText is the field text under [FieldsSectionVersion]: the
// title, a newline, then the section name, except that the section names
// "body" and "untitled" add nothing and an empty title adds no newline.
func SectionFieldText(title, section string) string {
	if !headingName(section) {
		return title
	}
	if title == "" {
		return section
	}
	return title + "\n" + section
}

// headingName reports whether a section name is a heading's text: not
// "body" or "untitled", which name sections without one, nor empty.
func headingName(name string) bool {
	return name != "" && name != sectionBody && name != sectionUntitled
}

// AppendFieldTerms returns terms and tf followed by the field terms of
// text under the rules before [FieldsVersion]: FieldPrefix and each
// distinct token of text in order of first occurrence, with its count,
// then, when stemmer is not nil, FieldPrefix and each distinct stem term
// of those tokens, as [Stemmer.AppendStems] orders and counts them. The
// entries given are unchanged; a text without a token adds nothing.
func AppendFieldTerms(terms []string, tf []int32, text string, counter *Counter, stemmer *Stemmer) ([]string, []int32) {
	ft, fc := fieldTokens(text, counter, stemmer)
	for i, t := range ft {
		terms = append(terms, FieldPrefix+t)
		tf = append(tf, fc[i])
	}
	return terms, tf
}

// AppendNormFieldTerms returns terms and tf followed by the field terms
// of a chunk under [FieldsVersion], whose title field is title and whose
// headings field is headings ([HeadingText]): the field terms
// AppendFieldTerms gives for FieldText (the title, a newline, the
// headings), in its order, but each term's frequency the sum, over the
// two fields where it occurs, of FieldTF(its count there, the field's
// number of tokens).
func AppendNormFieldTerms(terms []string, tf []int32, title, headings string, counter *Counter, stemmer *Stemmer) ([]string, []int32) {
	ft, fc := normFieldTokens(title, headings, counter, stemmer)
	for i, t := range ft {
		terms = append(terms, FieldPrefix+t)
		tf = append(tf, fc[i])
	}
	return terms, tf
}

// fieldTokens are the terms whose field terms text gives, unprefixed,
// with their counts: its distinct tokens, then, with a stemmer, their
// stem terms.
func fieldTokens(text string, counter *Counter, stemmer *Stemmer) ([]string, []int32) {
	ft, fc := counter.Count(text)
	if len(ft) > 0 && stemmer != nil {
		ft, fc = stemmer.AppendStems(ft, fc)
	}
	return ft, fc
}

// normFieldTokens are [AppendNormFieldTerms]' terms, unprefixed, with
// their frequencies. The title's tokens come first, then the headings'
// others, then the title's stem terms, then the headings' others: the
// order AppendStems gives the tokens of the title and the headings in
// turn.
func normFieldTokens(title, headings string, counter *Counter, stemmer *Stemmer) ([]string, []int32) {
	tt, tc := counter.Count(title)
	ht, hc := counter.Count(headings)
	if len(ht) == 0 {
		return normField(tt, tc, stemmer) // the common case: a title alone
	}
	if len(tt) == 0 {
		return normField(ht, hc, stemmer)
	}
	nt, nh := len(tt), len(ht) // distinct tokens, before the stems
	tn, hn := sumTF(tc), sumTF(hc)
	if stemmer != nil {
		tt, tc = stemmer.AppendStems(tt, tc)
		ht, hc = stemmer.AppendStems(ht, hc)
	}
	at := make(map[string]int, len(tt)+len(ht))
	var ft []string
	var fc []int32
	add := func(t string, c, n int32) {
		if k, ok := at[t]; ok {
			fc[k] += FieldTF(c, n)
			return
		}
		at[t] = len(ft)
		ft = append(ft, t)
		fc = append(fc, FieldTF(c, n))
	}
	for i := range nt {
		add(tt[i], tc[i], tn)
	}
	for i := range nh {
		add(ht[i], hc[i], hn)
	}
	for i := nt; i < len(tt); i++ {
		add(tt[i], tc[i], tn)
	}
	for i := nh; i < len(ht); i++ {
		add(ht[i], hc[i], hn)
	}
	return ft, fc
}

// normField is one field's terms and their frequencies: its distinct
// tokens, with a stemmer their stem terms, each FieldTF of its count.
func normField(ft []string, fc []int32, stemmer *Stemmer) ([]string, []int32) {
	if len(ft) == 0 {
		return nil, nil
	}
	n := sumTF(fc)
	if stemmer != nil {
		ft, fc = stemmer.AppendStems(ft, fc)
	}
	for i, c := range fc {
		fc[i] = FieldTF(c, n)
	}
	return ft, fc
}

// sumTF is a text's number of tokens: the sum of its distinct tokens'
// counts.
func sumTF(tf []int32) int32 {
	var n int32
	for _, c := range tf {
		n += c
	}
	return n
}

// AppendFieldIDs is [AppendFieldTerms] over ids in v, as CountIDs gives
// them: the field terms are numbered in v too. A field term's string is
// built only when v first meets it.
func (v *Vocabulary) AppendFieldIDs(ids, tf []int32, text string, counter *Counter, stemmer *Stemmer) ([]int32, []int32) {
	ft, fc := fieldTokens(text, counter, stemmer)
	return v.appendFieldIDs(ids, tf, ft, fc)
}

// AppendNormFieldIDs is [AppendNormFieldTerms] over ids in v, as
// [Vocabulary.AppendFieldIDs] is AppendFieldTerms.
func (v *Vocabulary) AppendNormFieldIDs(ids, tf []int32, title, headings string, counter *Counter, stemmer *Stemmer) ([]int32, []int32) {
	ft, fc := normFieldTokens(title, headings, counter, stemmer)
	return v.appendFieldIDs(ids, tf, ft, fc)
}

func (v *Vocabulary) appendFieldIDs(ids, tf []int32, ft []string, fc []int32) ([]int32, []int32) {
	buf := v.fieldBuf
	for i, t := range ft {
		buf = append(append(buf[:0], FieldPrefix...), t...)
		ids = append(ids, v.id(buf))
		tf = append(tf, fc[i])
	}
	v.fieldBuf = buf
	return ids, tf
}
