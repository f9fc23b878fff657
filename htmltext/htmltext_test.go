package htmltext

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		name, in, want, title string
	}{
		{"empty", "", "", ""},
		{"plain text", "hello   world\n", "hello world\n", ""},
		{"title apart", "<title> The \n Guide </title><p>body</p>", "body\n", "The Guide"},
		{"first title only", "<title>one</title><title>two</title>x", "x\n", "one"},
		{"title in body is no body text", "<p>a</p><title>late</title><p>b</p>", "a\n\nb\n", "late"},
		{"headings of every level", "<h1>A</h1><h2>B</h2><h3>C</h3><h4>D</h4><h5>E</h5><h6>F</h6>",
			"# A\n\n## B\n\n### C\n\n#### D\n\n##### E\n\n###### F\n", ""},
		{"heading text flattened", "<h2> Install <em>it</em><br>now <div>here</div></h2>text", "## Install it now here\n\ntext\n", ""},
		{"heading ending in #", "<h2>Learn C#</h2>", "## Learn C# #\n", ""},
		{"empty heading left out", "<h2> </h2><p>x</p>", "x\n", ""},
		{"paragraphs and br", "<p>a<br>b</p><p>c</p>", "a\nb\n\nc\n", ""},
		{"br br is a blank line", "a<br><br>b", "a\n\nb\n", ""},
		{"div is a line", "a<div>b</div>c", "a\nb\nc\n", ""},
		{"inline elements join", "a<b>b</b><i> c</i>", "ab c\n", ""},
		{"entities decoded", "<p>&lt;tag&gt; &amp; &quot;q&quot; &eacute; &#x263A; &#0; &nbsp;x</p>", "<tag> & \"q\" é ☺ \ufffd \u00a0x\n", ""},
		{"text looking like markup escaped", "<p># one</p><p>```two</p><p>~~~three</p><p>a # b</p>", "\\# one\n\n\\```two\n\n\\~~~three\n\na # b\n", ""},
		{"pre verbatim", "<pre>\n  a  b\n\tc\n\n</pre>", "```\n  a  b\n\tc\n```\n", ""},
		{"pre with language", `<pre><code class="x language-go">x := 1</code></pre>`, "```go\nx := 1\n```\n", ""},
		{"bad language left out", `<pre class="language-a&b">x</pre>`, "```\nx\n```\n", ""},
		{"pre fence lines kept inside", "<pre>```\n~~~ x\n# comment</pre>", "```\n ```\n ~~~ x\n# comment\n```\n", ""},
		{"pre with markup", "<pre>a <b>bold</b><br>c<script>x</script></pre>", "```\na bold\nc\n```\n", ""},
		{"whitespace-only pre left out", "<pre>  \n </pre>x", "x\n", ""},
		{"inline code", "<p>run <code>go  test</code> now</p>", "run go test now\n", ""},
		{"multi-line code is a block", "<p>see</p><code>a\n  b</code>", "see\n\n```\na\n  b\n```\n", ""},
		{"listing and xmp", "<xmp><b>raw</b></xmp>", "```\n<b>raw</b>\n```\n", ""},
		{"dropped elements", "<script>s()</script><style>p{}</style><noscript>ns</noscript><template>t</template>" +
			"<nav>n</nav><iframe>i</iframe><select><option>o</select><button>b</button><textarea>ta</textarea>" +
			"<object>ob</object><video>v</video><audio>au</audio><canvas>c</canvas><svg><text>sv</text><title>st</title></svg>keep",
			"keep\n", ""},
		{"hidden elements", `<p hidden>h</p><p hidden="until-found">found</p><span aria-hidden="TRUE">a</span>` +
			`<span aria-hidden="false">shown</span><div style="color:red; DISPLAY : none">d</div><div style="visibility:hidden">v</div>` +
			`<aside role="complementary navigation">menu</aside><div role="navigation">m</div><dialog>dlg</dialog><dialog open>open</dialog>`,
			"found\n\nshown\nopen\n", ""},
		{"page header and footer dropped", "<header>banner</header><main><header>main head</header>text<footer>main foot</footer></main><footer>site</footer>",
			"main head\n\ntext\n\nmain foot\n", ""},
		{"article header kept", "<article><header><h1>T</h1></header><p>x</p></article>", "# T\n\nx\n", ""},
		{"script in math dropped", "<math><mi>x</mi><script>bad</script></math>", "x\n", ""},
		{"unordered list", "<ul><li>one</li><li>two</li></ul>", "- one\n- two\n", ""},
		{"ordered list with start", `<ol start="7"><li>a<li>b</ol><ol start="-2"><li>c</ol>`, "7. a\n8. b\n\n1. c\n", ""},
		{"nested lists", "<ul><li>a<ol><li>b<ul><li>c</li></ul></li></ol></li><li>d</li></ul>", "- a\n  1. b\n    - c\n- d\n", ""},
		{"list item continuation", "<ul><li><p>a</p><p>b</p></li></ul>", "- a\n\n  b\n", ""},
		{"empty item has no marker", "<ul><li></li><li>x</li></ul>", "- x\n", ""},
		{"stray li", "<li>x</li>", "- x\n", ""},
		{"heading and code in a list at column 0", "<ul><li><h3>H</h3><pre>c</pre>t</li></ul>", "### H\n\n```\nc\n```\n\n- t\n", ""},
		{"table rows", "<table><caption>Cap</caption><tr><th>A<th>B</tr><tr><td>1<td><td>3</tr><tr><td> <td></tr><tr><td><td>x</tr></table>",
			"Cap\nA | B\n1 | | 3\n| x\n", ""},
		{"cell blocks flattened", "<table><tr><td><p>a</p><p>b</p></td><td>c<br>d</td></tr></table>", "a b | c d\n", ""},
		{"layout table", "<table><tr><td><h2>S</h2><p>x</p></td><td>y</td></tr></table>", "## S\n\nx\n\ny\n", ""},
		{"nested table makes layout", "<table><tr><td><table><tr><td>a<td>b</table></td><td>c</td></tr></table>", "a | b\n\nc\n", ""},
		{"unclosed tags", "<p>a<p>b<ul><li>c<li>d</ul><h2>e<p>f", "a\n\nb\n\n- c\n- d\n\n## e f\n", ""}, // the parser puts the p in the h2
		{"misnested formatting", "<b>1<i>2</b>3</i><p>4", "123\n\n4\n", ""},
		{"bare angle brackets", "a < b > c <3 & d", "a < b > c <3 & d\n", ""},
		{"comment and doctype", "<!doctype html><!-- c -->x<!-- d", "x\n", ""},
		{"BOM dropped", "\ufeff<p>x</p>", "x\n", ""},
		{"NUL dropped in body", "a\x00b", "ab\n", ""},
		{"spec example: heading", "<h2>Holds &amp; releases</h2><p>A <b>PMT-771</b> hold.</p>", "## Holds & releases\n\nA PMT-771 hold.\n", ""},
		{"spec example: list", "<ul><li>a<ol><li>b</ol></ul>", "- a\n  1. b\n", ""},
		{"spec example: row", "<table><tr><td>a<td><td>c</tr></table>", "a | | c\n", ""},
		{"CR normalised", "<pre>a\r\nb\rc</pre>", "```\na\nb\nc\n```\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Convert(tt.in)
			if err != nil {
				t.Fatalf("Convert(%q): %v", tt.in, err)
			}
			if got.Text != tt.want || got.Title != tt.title {
				t.Errorf("Convert(%q)\ngot  %q title %q\nwant %q title %q", tt.in, got.Text, got.Title, tt.want, tt.title)
			}
		})
	}
}

func TestConvertRefuses(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
		msg  string
	}{
		{"not UTF-8", "<p>caf\xe9</p>", ErrNotUTF8, "not valid UTF-8"},
		{"over the size limit", "<p>" + strings.Repeat("a", MaxBytes), ErrTooLarge, "limit is 10485760 bytes"},
		{"nested too deep", strings.Repeat("<div>", MaxDepth+1) + "x", ErrTooDeep, "nests more than 512"},
		{"text over the limit", strings.Repeat("<ul><li>", 9) + strings.Repeat("<li>x", 600_000), ErrTooLarge, "text converted from the html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert(tt.in)
			if !errors.Is(err, tt.want) || !errors.Is(err, cordontype.ErrInvalid) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want %v (and cordontype.ErrInvalid) saying %q", err, tt.want, tt.msg)
			}
		})
	}
}

// Nesting up to the parser's limit converts, and list indentation stops
// growing after maxIndentLevels.
func TestConvertDeepNesting(t *testing.T) {
	got, err := Convert(strings.Repeat("<div>", 400) + "deep" + strings.Repeat("</div>", 400))
	if err != nil || got.Text != "deep\n" {
		t.Fatalf("got %q, %v; want \"deep\\n\"", got.Text, err)
	}
	got, err = Convert(strings.Repeat("<ul><li>x", 200))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got.Text, "\n"), "\n")
	if len(lines) != 200 || lines[len(lines)-1] != strings.Repeat("  ", maxIndentLevels)+"- x" {
		t.Fatalf("got %d lines ending %q, want 200 ending in %d levels of indentation", len(lines), lines[len(lines)-1], maxIndentLevels)
	}
}

func TestConvertHugeAttributes(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	in := `<p class="` + big + `" style="` + big + `" title='` + big + `'>text</p><pre class="language-` + big + `">c</pre>`
	got, err := Convert(in)
	if err != nil || got.Text != "text\n\n```\nc\n```\n" {
		t.Fatalf("got %.80q, %v", got.Text, err)
	}
}

// Headings become the chunker's sections, with their text as the section
// name; text that only looks like a heading does not.
func TestConvertSections(t *testing.T) {
	got, err := Convert(`<title>T</title><p>intro words</p><h1>Payments</h1><p># not one</p>
		<h2>Holds &amp; releases</h2><pre># shell comment
run it</pre><p>after code</p>`)
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := chunk.Split(got.Text, chunk.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, p := range pieces {
		sections = append(sections, p.Section)
	}
	if want := []string{"body", "Payments", "Holds & releases"}; !slices.Equal(sections, want) {
		t.Fatalf("sections %q, want %q (text %q)", sections, want, got.Text)
	}
}

// The same input always gives the same bytes.
func TestConvertDeterministic(t *testing.T) {
	in := `<table><tr><td>a<td>b</table><ul><li>x<ol><li>y</ol></ul><h2>h</h2><pre>p</pre>`
	first, err := Convert(in)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got, _ := Convert(in); got != first {
			t.Fatalf("got %q, then %q", first.Text, got.Text)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	page := `<html><head><title>Guide</title><script>var x = 1;</script></head><body><nav><a href="/">Home</a></nav>
<main><h1>Settlement</h1><p>The <b>netting</b> window closes at 17:00 &amp; holds need dual approval.</p>
<pre><code class="language-sh">cordon ingest --tenant x docs/</code></pre>
<ul><li>one</li><li>two <a href="#">link</a></li></ul><table><tr><td>a</td><td>b</td></tr></table></main></body></html>`
	in := strings.Repeat(page, 200)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConvertHostile converts 10 MiB patterns that would be slow for a
// converter or parser with work quadratic in nesting or in the active
// formatting list; each must stay linear (compare their MB/s with
// BenchmarkConvert's).
func BenchmarkConvertHostile(b *testing.B) {
	// fill repeats unit after prefix up to just under MaxBytes.
	fill := func(prefix, unit string) string {
		return prefix + strings.Repeat(unit, (MaxBytes-len(prefix)-1024)/len(unit))
	}
	for _, tt := range []struct{ name, in string }{
		{"nested formatting", fill("", "<b id=1><i class=2>x")},
		{"reopened formatting", fill("", "<div><b id=x></div>")},
		{"deep then wide", fill(strings.Repeat("<div>", 500), "<p>x")},
		{"code in code", fill(strings.Repeat("<code>", 500), "a\n")},
		{"nested tables", fill(strings.Repeat("<table><tr><td>", 120), "<td>x")},
		{"lists", fill(strings.Repeat("<ul><li>", 250), "<li>x")},
		{"attributes", fill("", `<p a=1 b=2 c=3 d=4 e=5 f=6 style="display:block">`)},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.in)))
			var err error
			for b.Loop() {
				_, err = Convert(tt.in)
			}
			if err != nil {
				b.Logf("refused: %v", err)
			}
		})
	}
}
