package htmltext

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// Markers the fuzzer appends inside a script and a style element.
const (
	scriptMarker = "zqscriptmarkerzq"
	styleMarker  = "zqstylemarkerzq"
)

// heading is the chunker's heading line (SPEC section 2).
var heading = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)

// FuzzHTML checks, for any input: no panic; an error is one of the
// package's (and only for input that is not UTF-8, too large, too deep or
// too complex);
// the output is valid UTF-8 without U+0000 or CR outside code blocks, ends
// in one newline, and is the same on a second run; the text of script and
// style elements never reaches it; to the chunker, its fences are balanced
// and every heading line is one the converter wrote (level, one space, text
// that does not start with whitespace); and a code block is verbatim: the
// output put back into a <pre> comes out as one code block holding it.
func FuzzHTML(f *testing.F) {
	for _, s := range []string{
		"", "<p>x", "<h2>a#</h2>", "<pre>```\n# x</pre>", "<ul><li>a<ol><li>b</ol></ul>",
		"<table><tr><td>a<td><h1>b</h1></table>", "<plaintext><script>", "<xmp>", "<title>",
		"<svg><script>", "<math><script>", "<!--", "<textarea>", "<p># x<br>```y", "<code>a\nb</code>",
		"<b><i><p></b>x", "&#0;&#xD800;&amp", "<div hidden>x</div><nav>y</nav>", "<header><main><header>h</header></main>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		doc := in + "<script>" + scriptMarker + "</script><style>" + styleMarker + "</style>"
		got, err := Convert(doc)
		if err != nil {
			if !errors.Is(err, ErrNotUTF8) && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrTooComplex) {
				t.Fatalf("Convert(%q): unexpected error %v", doc, err)
			}
			if errors.Is(err, ErrNotUTF8) != !utf8.ValidString(doc) {
				t.Fatalf("Convert(%q): %v, but valid UTF-8 is %v", doc, err, utf8.ValidString(doc))
			}
			return
		}
		// The pre-pass's model holds at least the elements the parser does.
		if _, depth, err := measure(context.Background(), strings.TrimPrefix(doc, "\ufeff"), MaxDepth, MaxWork); err == nil {
			if d := treeDepth(t, strings.TrimPrefix(doc, "\ufeff")); depth < d {
				t.Fatalf("Convert(%q): pre-pass depth %d, below the tree's %d", doc, depth, d)
			}
		}
		again, _ := Convert(doc)
		if again != got {
			t.Fatalf("Convert(%q) not deterministic: %q then %q", doc, got.Text, again.Text)
		}
		checkText(t, doc, got)
		if markerOnlyInRawText(doc) && (strings.Contains(got.Text, scriptMarker) || strings.Contains(got.Text, styleMarker)) {
			t.Fatalf("Convert(%q) = %q holds script or style text", doc, got.Text)
		}

		// Code blocks are verbatim: the output in a <pre> is one code block
		// holding it (trailing newlines trimmed, fence-like lines
		// prefixed with a space).
		if strings.TrimFunc(got.Text, isSpaceRune) == "" {
			return
		}
		inPre, err := Convert("<pre>\n" + html.EscapeString(got.Text) + "</pre>")
		if err != nil {
			t.Fatalf("the output in a <pre>: %v", err)
		}
		var want strings.Builder
		want.WriteString("```")
		for _, line := range strings.Split(strings.TrimRight(got.Text, "\n"), "\n") {
			want.WriteByte('\n')
			if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
				want.WriteByte(' ')
			}
			want.WriteString(line)
		}
		want.WriteString("\n```\n")
		if inPre.Text != want.String() {
			t.Fatalf("the output %q in a <pre> gave %q, want %q", got.Text, inPre.Text, want.String())
		}
	})
}

// checkText checks the output's invariants as the chunker sees them.
func checkText(t *testing.T, doc string, got Result) {
	t.Helper()
	text := got.Text
	if !utf8.ValidString(text) || !utf8.ValidString(got.Title) || strings.ContainsRune(text, 0) || strings.ContainsRune(got.Title, 0) {
		t.Fatalf("Convert(%q) = %q, title %q: invalid UTF-8 or U+0000", doc, text, got.Title)
	}
	if got.Title != strings.TrimFunc(got.Title, isSpaceRune) {
		t.Fatalf("Convert(%q): title %q not trimmed", doc, got.Title)
	}
	if text == "" {
		return
	}
	if !strings.HasSuffix(text, "\n") || strings.HasSuffix(text, "\n\n") || strings.HasPrefix(text, "\n") {
		t.Fatalf("Convert(%q) = %q: want one newline at the end and none at the start", doc, text)
	}
	inFence := false
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.ContainsAny(line, "\r\t\f") || strings.HasSuffix(line, " ") {
			t.Fatalf("Convert(%q): line %q outside code has uncollapsed whitespace", doc, line)
		}
		if strings.HasPrefix(line, "#") {
			m := heading.FindStringSubmatch(line)
			level := strings.IndexFunc(line, func(r rune) bool { return r != '#' })
			if m == nil || level > 6 || line[level] != ' ' || m[1] == "" || isSpace(line[level+1]) {
				t.Fatalf("Convert(%q): line %q reads as a heading the converter did not write", doc, line)
			}
		}
	}
	if inFence {
		t.Fatalf("Convert(%q) = %q: a fence is left open", doc, text)
	}
}

// markerOnlyInRawText reports whether the markers appear in the parsed tree
// only as text of script or style elements (the fuzzer's prefix can make
// them text elsewhere: an unclosed <xmp> or <plaintext> shows them).
func markerOnlyInRawText(doc string) bool {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		return false
	}
	ok := true
	var walk func(n *html.Node, inRaw bool)
	walk = func(n *html.Node, inRaw bool) {
		if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style") {
			inRaw = true
		}
		if !inRaw && (strings.Contains(n.Data, scriptMarker) || strings.Contains(n.Data, styleMarker)) && n.Type == html.TextNode {
			ok = false
		}
		for _, a := range n.Attr {
			if strings.Contains(a.Val, scriptMarker) || strings.Contains(a.Val, styleMarker) {
				ok = false
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, inRaw)
		}
	}
	walk(root, false)
	return ok
}
