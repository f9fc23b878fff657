package corpus

import (
	"reflect"
	"testing"
)

func TestKnownItemQuery(t *testing.T) {
	tests := []struct {
		name, id, md, want, reason string
	}{
		{"simple", "man/1/ls", "# NAME\n       ls - list directory contents\n\n# SYNOPSIS\n       ls\n", "list directory contents", ""},
		{"several names, wrapped line", "man/1/gzip", "# NAME\n       gzip, gunzip, zcat - compress or expand\n       files\n", "compress or expand files", ""},
		{"hyphenated name removed token by token", "man/1/git-commit", "# NAME\n       git-commit - Record changes to the repository\n", "record changes to the repository", ""},
		{"doc id name removed too", "man/8/foo", "# NAME\n       bar - foo the bar quickly\n", "the quickly", ""},
		{"nothing left", "man/1/yes", "# NAME\n       yes - yes\n", "", "fewer than 2 tokens left once the page's names are removed"},
		{"no separator", "man/1/x", "# NAME\n       x, list things\n", "", "NAME line has no ' - ' separator"},
		{"no NAME", "man/1/x", "# SYNOPSIS\n       x - y z\n", "", "no NAME section"},
		{"em dash", "man/1/x", "# NAME\n       x \u2014 make a thing\n", "make a thing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := KnownItemQuery(tt.id, tt.md)
			if got != tt.want || reason != tt.reason {
				t.Errorf("got (%q, %q), want (%q, %q)", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestKnownItemQueries(t *testing.T) {
	docs := []Doc{
		{ID: "man/1/a", Text: "# NAME\n       a - print the date\n"},
		{ID: "man/1/b", Text: "# NAME\n       b - show a calendar\n"},
		{ID: "man/1/c", Text: "# NAME\n       c - print the date\n"},
		{ID: "man/1/d", Text: "# SYNOPSIS\n       d\n"},
	}
	got, skips := KnownItemQueries(docs)
	want := []Query{
		{Query: "print the date", Relevant: []string{"man/1/a", "man/1/c"}},
		{Query: "show a calendar", Relevant: []string{"man/1/b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if len(skips) != 1 || skips[0].DocID != "man/1/d" {
		t.Errorf("skips: got %+v, want man/1/d", skips)
	}
}
