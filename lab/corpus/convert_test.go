package corpus

import (
	"errors"
	"strings"
	"testing"
)

// bold and under render text the way groff's tty device overstrikes it.
func bold(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
		b.WriteByte('\b')
		b.WriteRune(r)
	}
	return b.String()
}

func under(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString("_\b")
		b.WriteRune(r)
	}
	return b.String()
}

func TestConvertRendered(t *testing.T) {
	tests := []struct {
		name     string
		rendered string
		want     string
	}{
		{
			name: "overstruck page",
			rendered: "LS(1)                User Commands                LS(1)\n\n\n\n" +
				bold("NAME") + "\n       ls \u2010 list directory contents\n\n\n" +
				bold("DESCRIPTION") + "\n       " + bold("-a") + ", " + under("FILE") + "   \n" +
				"   " + bold("Sorting entries") + "\n       text \u2212\u2212all\n#col0 text\n```\n\n" +
				"GNU coreutils 9.1        September 2022        LS(1)\n",
			want: "# NAME\n       ls - list directory contents\n\n# DESCRIPTION\n       -a, FILE\n\n" +
				"## Sorting entries\n       text --all\n #col0 text\n ```\n",
		},
		{
			name:     "no formatting left: column-0 lines are section titles",
			rendered: "X(8)   System   X(8)\n\nNAME\n       x - do a thing\n   Not a subsection\nSEE ALSO\n       y(1)\n\nsomewhere 2024   X(8)\n",
			want:     "# NAME\n       x - do a thing\n   Not a subsection\n\n# SEE ALSO\n       y(1)\n",
		},
		{
			name: "right-aligned footer is dropped, a body line ending in (1) is kept",
			rendered: "FOO(1)     General Commands Manual     FOO(1)\n\n" + bold("SEE ALSO") + "\n       ls(1)\n\n" +
				strings.Repeat(" ", 60) + "FOO(1)\n",
			want: "# SEE ALSO\n       ls(1)\n",
		},
		{
			name:     "ANSI SGR codes are removed",
			rendered: bold("NAME") + "\n       \x1b[1mx\x1b[0m - y z\n",
			want:     "# NAME\n       x - y z\n",
		},
		{
			name:     "a bold line at the body indent is text",
			rendered: bold("OPTIONS") + "\n       " + bold("--all") + "\n              show all\n",
			want:     "# OPTIONS\n       --all\n              show all\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConvertRendered([]byte(tt.rendered))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestConvertRenderedErrors(t *testing.T) {
	if _, err := ConvertRendered([]byte("       only body text\n")); !errors.Is(err, ErrNoSections) {
		t.Errorf("body only: got %v, want ErrNoSections", err)
	}
	if _, err := ConvertRendered([]byte("")); !errors.Is(err, ErrNoSections) {
		t.Errorf("empty: got %v, want ErrNoSections", err)
	}
	if _, err := ConvertRendered([]byte("garbage\n")); !errors.Is(err, ErrNoBody) {
		t.Errorf("a title and no body: got %v, want ErrNoBody", err)
	}
	if _, err := ConvertRendered([]byte("NAME\n  \xff\n")); !errors.Is(err, ErrNotUTF8) {
		t.Errorf("bad UTF-8: got %v, want ErrNotUTF8", err)
	}
}
