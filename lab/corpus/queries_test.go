package corpus

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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
		{ID: "name:man/1/a", Kind: KindName, Split: SplitOf("man/1/a"), Query: "print the date", Relevant: []string{"man/1/a", "man/1/c"}},
		{ID: "name:man/1/b", Kind: KindName, Split: SplitOf("man/1/b"), Query: "show a calendar", Relevant: []string{"man/1/b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if len(skips) != 1 || skips[0].DocID != "man/1/d" {
		t.Errorf("skips: got %+v, want man/1/d", skips)
	}
}

func TestQueriesKinds(t *testing.T) {
	page := func(name, extra string) string {
		return "# NAME\n       " + name + " - do a particular thing well\n\n# DESCRIPTION\n" +
			"       The " + name + " tool reads every input line and writes it back out. It keeps the\n" +
			"       order of lines as " + name + " found them in the input. Short one.\n\n" +
			"       Options are read before any file named on the command line by " + name + ".\n\n" +
			"# OPTIONS\n       -v, --verbose\n              Print what " + name + " does to standard error as it goes.\n" + extra
	}
	docs := []Doc{{ID: "man/1/alpha", Text: page("alpha", "")}, {ID: "man/1/beta", Text: page("beta", "")}}
	got, skips := Queries(docs, nil)
	again, _ := Queries(docs, nil)
	if !reflect.DeepEqual(got, again) {
		t.Fatal("Queries is not deterministic")
	}
	kinds := map[Kind]int{}
	for _, q := range got {
		kinds[q.Kind]++
		if q.ID != string(q.Kind)+":"+q.Relevant[0] || q.Split != SplitOf(q.Relevant[0]) {
			t.Errorf("%+v: id or split wrong", q)
		}
		switch q.Kind {
		case KindHeldout:
			if q.Remove == "" || !strings.Contains(docs[slices.IndexFunc(docs, func(d Doc) bool { return d.ID == q.Relevant[0] })].Text, q.Remove) {
				t.Errorf("held-out %+v: remove is not a passage of its page", q)
			}
		case KindOption:
			if !strings.HasPrefix(q.Query, "Print what") {
				t.Errorf("option query %q, want the description", q.Query)
			}
		}
		if q.Kind != KindHeldout && q.Remove != "" {
			t.Errorf("%+v: only held-out queries remove text", q)
		}
	}
	if kinds[KindName] != 1 || kinds[KindBody] != 2 || kinds[KindOption] != 2 || kinds[KindHeldout] != 2 {
		t.Errorf("got kinds %v, want one name query (the pages share their description) and 2 of each other kind (skips %v)", kinds, skips)
	}
	var body, held string
	for _, q := range got {
		if q.Relevant[0] == "man/1/alpha" && q.Kind == KindBody {
			body = q.Query
		}
		if q.Relevant[0] == "man/1/alpha" && q.Kind == KindHeldout {
			held = q.Query
		}
	}
	if body == held || body == "" {
		t.Errorf("body %q and held-out %q must be distinct sentences", body, held)
	}
	if _, err := ParseKind("title"); !errors.Is(err, ErrKind) {
		t.Errorf("ParseKind(title): got %v", err)
	}
}

func TestSplitOf(t *testing.T) {
	dev := 0
	for i := range 1000 {
		if SplitOf(fmt.Sprintf("man/1/page%d", i)) == SplitDev {
			dev++
		}
	}
	if dev < 450 || dev > 550 {
		t.Errorf("%d of 1000 in dev, want about half", dev)
	}
	// Pinned: the committed query files' splits depend on this hash; a
	// change would move queries between dev and test.
	for id, want := range map[string]string{"man/1/ls": "test", "man/1/cat": "dev", "man/8/mount": "dev"} {
		if got := SplitOf(id); string(got) != want {
			t.Errorf("SplitOf(%q) = %q, want %q", id, got, want)
		}
	}
}
