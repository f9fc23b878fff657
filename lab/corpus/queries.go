package corpus

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cordon-rag/cordon/analysis"
)

// MinQueryTokens is the fewest tokens a known-item query keeps after the
// page's names are removed; a shorter description ("X - X") says nothing a
// reader would search for.
const MinQueryTokens = 2

// Query is one known-item query: its id, kind and split, its text, the
// documents that answer it, and for a held-out query the exact passage to cut
// out of its document before indexing.
type Query struct {
	ID       string   `json:"id"`
	Kind     Kind     `json:"kind"`
	Split    string   `json:"split"`
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
	Remove   string   `json:"remove,omitempty"`
}

// QuerySkip is a document that yielded no query, and why.
type QuerySkip struct {
	DocID  string
	Reason string
}

// nameSeparators split a NAME line into names and description, tried in
// order: man(7) asks for "\-", rendered " - "; some pages use dashes.
var nameSeparators = []string{" - ", " -- ", " \u2014 ", " \u2013 "}

// nameHeadingRE finds the NAME section's heading line.
var nameHeadingRE = regexp.MustCompile(`(?m)^# NAME[ \t]*$`)

// nextHeadingRE finds the heading that ends a section.
var nextHeadingRE = regexp.MustCompile(`(?m)^#{1,6} `)

// NameLine returns the text of a converted page's NAME section with its
// whitespace collapsed ("ls - list directory contents"), or "" when the page
// has none.
func NameLine(markdown string) string {
	loc := nameHeadingRE.FindStringIndex(markdown)
	if loc == nil {
		return ""
	}
	body := markdown[loc[1]:]
	if end := nextHeadingRE.FindStringIndex(body); end != nil {
		body = body[:end[0]]
	}
	return strings.Join(strings.Fields(body), " ")
}

// KnownItemQuery builds the query for one page from its NAME line: the
// description after the separator, tokenized with Cordon's tokenizer, without
// any token of the page's names (those before the separator, and the page
// name of its doc id). It returns the query and "" or "" and why there is
// none.
func KnownItemQuery(docID, markdown string) (query, reason string) {
	line := NameLine(markdown)
	if line == "" {
		return "", "no NAME section"
	}
	names, desc, ok := "", "", false
	for _, sep := range nameSeparators {
		if names, desc, ok = strings.Cut(line, sep); ok {
			break
		}
	}
	if !ok {
		return "", "NAME line has no ' - ' separator"
	}
	drop := make(map[string]bool)
	for _, t := range analysis.Tokenize(names + " " + path.Base(docID)) {
		drop[t] = true
	}
	var kept []string
	for _, t := range analysis.Tokenize(desc) {
		if !drop[t] {
			kept = append(kept, t)
		}
	}
	if len(kept) < MinQueryTokens {
		return "", "fewer than 2 tokens left once the page's names are removed"
	}
	return strings.Join(kept, " "), ""
}

// KnownItemQueries builds the known-item query set of a corpus: one query per
// distinct description, relevant to every document that gives it (a page and
// its look-alikes, such as two versions of the same tool, are equally right
// answers). Queries come in the order of their first document; docs must be
// sorted by id (as [Load] returns them) for the set to be reproducible.
func KnownItemQueries(docs []Doc) ([]Query, []QuerySkip) {
	var out []Query
	var skips []QuerySkip
	at := make(map[string]int)
	for _, d := range docs {
		q, reason := KnownItemQuery(d.ID, d.Text)
		if q == "" {
			skips = append(skips, QuerySkip{DocID: d.ID, Reason: reason})
			continue
		}
		if i, ok := at[q]; ok {
			out[i].Relevant = append(out[i].Relevant, d.ID)
			continue
		}
		at[q] = len(out)
		out = append(out, Query{Kind: KindName, Query: q, Relevant: []string{d.ID}})
	}
	for i := range out {
		slices.Sort(out[i].Relevant)
		out[i].ID = string(KindName) + ":" + out[i].Relevant[0]
		out[i].Split = SplitOf(out[i].Relevant[0])
	}
	return out, skips
}
