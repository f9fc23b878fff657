package htmltext

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

var update = flag.Bool("update", false, "rewrite testdata/ordinary.golden from the current conversion")

// guidePage is an ordinary page: head, navigation, headings, code, a
// list, a table, links and emphasis.
const guidePage = `<html><head><title>Guide</title><script>var x = 1;</script></head><body><nav><a href="/">Home</a></nav>
<main><h1>Settlement</h1><p>The <b>netting</b> window closes at 17:00 &amp; holds need dual approval.</p>
<pre><code class="language-sh">cordon ingest --tenant x docs/</code></pre>
<ul><li>one</li><li>two <a href="#">link</a></li></ul><table><tr><td>a</td><td>b</td></tr></table></main></body></html>
`

// ordinaryPages are documents a writer may well send, up to the size
// limit and 50 elements deep; each must convert as it always has.
func ordinaryPages() []struct{ name, in string } {
	repeat := func(prefix, unit, suffix string, size int) string {
		return prefix + strings.Repeat(unit, (size-len(prefix)-len(suffix))/len(unit)) + suffix
	}
	deep := func(n int, open, close string) (string, string) {
		return strings.Repeat(open, n), strings.Repeat(close, n)
	}
	d50, e50 := deep(50, `<div class="wrap">`, "</div>")
	d30, e30 := deep(30, "<section><div>", "</div></section>")
	l12, f12 := deep(12, "<ul><li>level", "</li></ul>")
	var mixed strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&mixed, `<article id="a%d"><header><h2>Part %d</h2></header><p>Text <em>%d</em> with <a href="/p/%d">a link</a>, <code>code</code> and <span class="x">spans</span>.</p>`+
			`<dl><dt>term<dd>definition<dt>other<dd>more</dl><ol start="%d"><li>first<li>second<ul><li>inner</ul></ol>`+
			`<table><thead><tr><th>k<th>v<tbody><tr><td>%d<td><b>bold</b></table>`+
			`<p>Unclosed <b>bold <i>and italic</i></b></p><p>continues<blockquote>quoted<p>para</blockquote>`+
			`<svg viewBox="0 0 10 10"><title>icon</title><g><rect width="1"/></g></svg><math><mi>x</mi><mo>=</mo><mn>%d</mn></math>`+
			`<select><option>a<option>b</select><font face="x">old</font> <center>centred</center></article>`+"\n", i, i, i, i, i, i, i)
	}
	return []struct{ name, in string }{
		{"guide pages, 9 MiB", repeat("", guidePage, "", 9<<20)},
		{"paragraphs 50 deep, 2 MiB", repeat(d50, "<p>Some text of a <b>paragraph</b>, <i>set</i> here.</p>\n", e50, 2<<20)},
		{"unclosed tags 50 deep, 2 MiB", repeat(d50, "<p>text <b>bold</b>\n<li>item <i>x</i> <td>cell\n", e50, 2<<20)},
		{"sections 60 deep, 1 MiB", repeat(d30, "<h3>Title</h3><p>para <a href=x>link</a></p><ul><li>x</li></ul>\n", e30, 1<<20)},
		{"lists 12 deep, 1 MiB", repeat(l12, "<li>item <em>x</em></li>\n", f12, 1<<20)},
		{"data table, 4 MiB", repeat("<table><tr><th>a<th>b<th>c\n", "<tr><td>1</td><td>22</td><td>333</td></tr>\n", "</table>", 4<<20)},
		{"sloppy table, 2 MiB", repeat("<table>", "<tr><td>1<td>22<td>333\n", "", 2<<20)},
		{"mixed markup", mixed.String()},
	}
}

// Ordinary documents, deep or large, convert to the same bytes as before
// the parsing work was bounded (testdata/ordinary.golden holds each
// output's length and SHA-256; -update rewrites it).
func TestConvertOrdinaryPages(t *testing.T) {
	golden := filepath.Join("testdata", "ordinary.golden")
	var got strings.Builder
	for _, p := range ordinaryPages() {
		res, err := Convert(p.in)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		sum := sha256.Sum256([]byte(res.Text + "\x00" + res.Title))
		fmt.Fprintf(&got, "%s\t%d\t%d\t%s\n", p.name, len(p.in), len(res.Text), hex.EncodeToString(sum[:]))
	}
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("got\n%s\nwant\n%s", got.String(), want)
	}
}

// treeDepth is the depth of the tree the parser builds from src (the
// document node 0, its html element 1).
func treeDepth(t *testing.T, src string) int {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	var depth func(n *html.Node, d int) int
	depth = func(n *html.Node, d int) int {
		m := d
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type == html.ElementNode {
				m = max(m, depth(ch, d+1))
			}
		}
		return m
	}
	return depth(doc, 0)
}
