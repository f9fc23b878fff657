package analysis

// Field terms: a chunk's title and heading, searchable apart from its
// text. Each token of a chunk's field text (its document's title, then
// its section's heading; see [FieldText]) is a field term, FieldPrefix
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
// [FieldText] or [AppendFieldTerms] change.
const FieldsVersion = "fields-title-section-1"

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

// FieldText is the field text of a chunk of a document titled title, in
// the section named section: the title, a newline, then the section name,
// except that the section names "body" and "untitled" add nothing (a
// heading whose text is exactly one of them is not searchable as a
// field).
func FieldText(title, section string) string {
	if section == sectionBody || section == sectionUntitled {
		return title
	}
	if title == "" {
		return section
	}
	return title + "\n" + section
}

// AppendFieldTerms returns terms and tf followed by the field terms of
// text: FieldPrefix and each distinct token of text in order of first
// occurrence, with its count, then, when stemmer is not nil, FieldPrefix
// and each distinct stem term of those tokens, as [Stemmer.AppendStems]
// orders and counts them. The entries given are unchanged; a text without
// a token adds nothing.
func AppendFieldTerms(terms []string, tf []int32, text string, counter *Counter, stemmer *Stemmer) ([]string, []int32) {
	ft, fc := counter.Count(text)
	if len(ft) == 0 {
		return terms, tf
	}
	if stemmer != nil {
		ft, fc = stemmer.AppendStems(ft, fc)
	}
	for i, t := range ft {
		terms = append(terms, FieldPrefix+t)
		tf = append(tf, fc[i])
	}
	return terms, tf
}

// AppendFieldIDs is [AppendFieldTerms] over ids in v, as CountIDs gives
// them: the field terms are numbered in v too.
func (v *Vocabulary) AppendFieldIDs(ids, tf []int32, text string, counter *Counter, stemmer *Stemmer) ([]int32, []int32) {
	terms, tf := AppendFieldTerms(nil, tf, text, counter, stemmer)
	for _, t := range terms {
		ids = append(ids, v.id([]byte(t)))
	}
	return ids, tf
}
