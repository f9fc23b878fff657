package chunk

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/cordon-rag/cordon/analysis"
)

// want is an expected piece: its section name and text. Offsets are checked
// by the span property (and explicitly where a test is about offsets).
type want struct {
	section string
	text    string
}

func split(t *testing.T, text string, opts Options) []Piece {
	t.Helper()
	got, err := Split(text, opts)
	if err != nil {
		t.Fatalf("Split(%q, %+v) error: %v", text, opts, err)
	}
	checkPieces(t, text, opts, got)
	return got
}

// checkPieces asserts what must hold of every split: the span property,
// Length as a token count, trimmed non-empty texts of at most MaxWords words,
// non-empty section names, pieces in document order, and at least one piece
// with a token whenever the text has one.
func checkPieces(t *testing.T, text string, opts Options, pieces []Piece) {
	t.Helper()
	runes := []rune(text)
	hasToken := false
	prevStart := -1
	for i, p := range pieces {
		if p.StartChar < 0 || p.EndChar > len(runes) || p.StartChar >= p.EndChar {
			t.Fatalf("piece %d of %q: span [%d, %d), want 0 <= start < end <= %d", i, text, p.StartChar, p.EndChar, len(runes))
		}
		if span := string(runes[p.StartChar:p.EndChar]); span != p.Text {
			t.Fatalf("piece %d of %q: runes[%d:%d] = %q, want the piece text %q", i, text, p.StartChar, p.EndChar, span, p.Text)
		}
		if n := len(analysis.Tokenize(p.Text)); p.Length != n {
			t.Fatalf("piece %d of %q: Length = %d, want len(Tokenize(text)) = %d", i, text, p.Length, n)
		}
		first, _ := utf8.DecodeRuneInString(p.Text)
		last, _ := utf8.DecodeLastRuneInString(p.Text)
		if unicode.IsSpace(first) || unicode.IsSpace(last) {
			t.Fatalf("piece %d of %q: text %q starts or ends with whitespace, want first word to last word", i, text, p.Text)
		}
		if n := len(strings.FieldsFunc(p.Text, unicode.IsSpace)); n > opts.MaxWords {
			t.Fatalf("piece %d of %q: %d words, want at most %d", i, text, n, opts.MaxWords)
		}
		if p.Section == "" || strings.TrimFunc(p.Section, unicode.IsSpace) != p.Section {
			t.Fatalf("piece %d of %q: section %q, want a non-empty trimmed name", i, text, p.Section)
		}
		if p.StartChar < prevStart {
			t.Fatalf("piece %d of %q starts at %d before piece %d at %d, want document order", i, text, p.StartChar, i-1, prevStart)
		}
		prevStart = p.StartChar
		if p.Length > 0 {
			hasToken = true
		}
	}
	if analysis.HasToken(text) && !hasToken {
		t.Fatalf("Split(%q) = %d pieces with no token, want at least one piece with a token", text, len(pieces))
	}
}

func comparePieces(t *testing.T, got []Piece, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d pieces %+v, want %d %+v", len(got), got, len(wants), wants)
	}
	for i, w := range wants {
		if got[i].Section != w.section || got[i].Text != w.text {
			t.Errorf("piece %d: got section %q text %q, want section %q text %q", i, got[i].Section, got[i].Text, w.section, w.text)
		}
	}
}

func TestSplitSections(t *testing.T) {
	def := DefaultOptions()
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"no headings is one body section", "just some text\nover lines", []want{{"body", "just some text\nover lines"}}},
		{"ATX closing hashes removed", "# a #\nbody a", []want{{"a", "body a"}}},
		{"closing hashes without a space are still removed by the regex", "# foo#\nx", []want{{"foo", "x"}}},
		{"inner hashes kept", "# a # b #\nx", []want{{"a # b", "x"}}},
		{"no space after hashes is not a heading", "#no\ntext", []want{{"body", "#no\ntext"}}},
		{"seven hashes is not a heading", "####### seven\nx", []want{{"body", "####### seven\nx"}}},
		{"six hashes is a heading", "###### six\nx", []want{{"six", "x"}}},
		{"tab after hashes", "#\tTab\nx", []want{{"Tab", "x"}}},
		{"empty heading is untitled", "# \nx", []want{{"untitled", "x"}}},
		{"heading of closing hashes only is untitled", "## ###\nx", []want{{"untitled", "x"}}},
		{"bare hash is not a heading", "#\nx", []want{{"body", "#\nx"}}},
		{"name trimmed of Unicode whitespace", "# \u00a0Name\u00a0\nx", []want{{"Name", "x"}}},
		{"no-break space after hashes is not a heading", "#\u00a0Name\nx", []want{{"body", "#\u00a0Name\nx"}}},
		{"inner whitespace of a name kept", "# a\tb  c\nx", []want{{"a\tb  c", "x"}}},
		{"heading inside backtick fence ignored", "```\n# not\n```\nafter", []want{{"body", "```\n# not\n```\nafter"}}},
		{"heading inside tilde fence ignored", "~~~\n# not\n~~~\n# yes\nz", []want{{"body", "~~~\n# not\n~~~"}, {"yes", "z"}}},
		{"any fence line toggles: tilde closes backtick", "```go\ncode\n~~~\n# h\nx", []want{{"body", "```go\ncode\n~~~"}, {"h", "x"}}},
		{"four backticks is a fence line", "````\n# not\n````\n# h\nx", []want{{"body", "````\n# not\n````"}, {"h", "x"}}},
		{"two backticks is not a fence", "``\n# h\nx", []want{{"body", "``"}, {"h", "x"}}},
		{"unclosed fence hides every later heading", "a\n```\n# h\nx", []want{{"body", "a\n```\n# h\nx"}}},
		{"indented heading is not a heading", " # not\nx", []want{{"body", "# not\nx"}}},
		{"indented fence is not a fence", "  ```\n# h\nx", []want{{"body", "```"}, {"h", "x"}}},
		{"CRLF heading lines", "# Title\r\nline one\r\n# Two \r\nline two\r\n", []want{{"Title", "line one"}, {"Two", "line two"}}},
		{"CRLF fence lines", "```\r\n# x\r\n```\r\n# y\r\nz", []want{{"body", "```\r\n# x\r\n```"}, {"y", "z"}}},
		{"only one trailing CR stripped, name trimmed", "# A\r\r\nx", []want{{"A", "x"}}},
		{"text before first heading is body", "pre amble\n# H\ntext", []want{{"body", "pre amble"}, {"H", "text"}}},
		{"whitespace-only section yields no chunks", "# A\n \n\t\n# B\nb", []want{{"B", "b"}}},
		{"heading at end without body", "x\n# end", []want{{"body", "x"}}},
		{"repeated section names", "# A\none\n# A\ntwo", []want{{"A", "one"}, {"A", "two"}}},
		{"punctuation-only section keeps a token-less chunk", "# A\n---\n# B\nword", []want{{"A", "---"}, {"B", "word"}}},
		{"headings only falls back to whole text", "# A\n# B\n", []want{{"body", "# A\n# B"}}},
		{"headings and punctuation fall back to whole text", "# A\n---\n# B", []want{{"body", "# A\n---\n# B"}}},
		{"fallback covers fence lines too", "```\n```\n# A", []want{{"body", "```\n```\n# A"}}},
		{"Unicode heading name", "# Überblick 東京\nText", []want{{"Überblick 東京", "Text"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comparePieces(t, split(t, tt.text, def), tt.want)
		})
	}
}

func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("w%d", i)
	}
	return strings.Join(w, " ")
}

func TestSplitWindows(t *testing.T) {
	ten := words(10)
	tests := []struct {
		name string
		text string
		opts Options
		want []want
	}{
		{"step 3", ten, Options{4, 1}, []want{{"body", "w0 w1 w2 w3"}, {"body", "w3 w4 w5 w6"}, {"body", "w6 w7 w8 w9"}}},
		{"step 2", ten, Options{4, 2}, []want{{"body", "w0 w1 w2 w3"}, {"body", "w2 w3 w4 w5"}, {"body", "w4 w5 w6 w7"}, {"body", "w6 w7 w8 w9"}}},
		{"no overlap, short last window", ten, Options{3, 0}, []want{{"body", "w0 w1 w2"}, {"body", "w3 w4 w5"}, {"body", "w6 w7 w8"}, {"body", "w9"}}},
		{"last window is the first that reaches the last word", ten, Options{7, 2}, []want{{"body", "w0 w1 w2 w3 w4 w5 w6"}, {"body", "w5 w6 w7 w8 w9"}}},
		{"step 4 ends exactly", ten, Options{6, 2}, []want{{"body", "w0 w1 w2 w3 w4 w5"}, {"body", "w4 w5 w6 w7 w8 w9"}}},
		{"step 1", ten, Options{4, 3}, []want{
			{"body", "w0 w1 w2 w3"}, {"body", "w1 w2 w3 w4"}, {"body", "w2 w3 w4 w5"}, {"body", "w3 w4 w5 w6"},
			{"body", "w4 w5 w6 w7"}, {"body", "w5 w6 w7 w8"}, {"body", "w6 w7 w8 w9"},
		}},
		{"exactly max words", ten, Options{10, 9}, []want{{"body", ten}}},
		{"fewer than max words", ten, Options{11, 0}, []want{{"body", ten}}},
		{"one word windows", "a b c", Options{1, 0}, []want{{"body", "a"}, {"body", "b"}, {"body", "c"}}},
		{"inner whitespace kept", "a  b\n\nc", Options{2, 0}, []want{{"body", "a  b"}, {"body", "c"}}},
		{"no-break space and line separator are whitespace", "a\u00a0b\u2028c", Options{2, 1}, []want{{"body", "a\u00a0b"}, {"body", "b\u2028c"}}},
		{"windows restart in each section", "# A\nw0 w1 w2\n# B\nw3", Options{2, 1}, []want{{"A", "w0 w1"}, {"A", "w1 w2"}, {"B", "w3"}}},
		{"punctuation is part of words", "x, y; z.", Options{2, 0}, []want{{"body", "x, y;"}, {"body", "z."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comparePieces(t, split(t, tt.text, tt.opts), tt.want)
		})
	}
}

func TestSplitDefaultWindows(t *testing.T) {
	// 450 words, 200-word windows, step 160: windows start at words 0, 160, 320.
	pieces := split(t, words(450), DefaultOptions())
	wantFirst := []string{"w0", "w160", "w320"}
	wantLast := []string{"w199", "w359", "w449"}
	if len(pieces) != 3 {
		t.Fatalf("got %d pieces, want 3", len(pieces))
	}
	for i, p := range pieces {
		f := strings.Fields(p.Text)
		if f[0] != wantFirst[i] || f[len(f)-1] != wantLast[i] {
			t.Errorf("piece %d: got words %s..%s, want %s..%s", i, f[0], f[len(f)-1], wantFirst[i], wantLast[i])
		}
	}
}

func TestSplitOffsets(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		opts   Options
		starts []int
		ends   []int
	}{
		{"repeated words resolve to their own occurrence", "a b a b a b", Options{2, 0}, []int{0, 4, 8}, []int{3, 7, 11}},
		{"offsets are code points, not bytes", "éé ü\n# Ü\nöö ä", Options{2, 0}, []int{0, 9}, []int{4, 13}},
		{"astral code points count once", "🙂 a\n# h\n🙂 b", Options{5, 0}, []int{0, 8}, []int{3, 11}},
		{"CRLF body offsets are document-global", "# T\r\nx y\r\n", Options{5, 0}, []int{5}, []int{8}},
		{"overlapping windows share a word", "  one two three", Options{2, 1}, []int{2, 6}, []int{9, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := split(t, tt.text, tt.opts)
			if len(got) != len(tt.starts) {
				t.Fatalf("got %d pieces %+v, want %d", len(got), got, len(tt.starts))
			}
			for i, p := range got {
				if p.StartChar != tt.starts[i] || p.EndChar != tt.ends[i] {
					t.Errorf("piece %d: got [%d, %d), want [%d, %d)", i, p.StartChar, p.EndChar, tt.starts[i], tt.ends[i])
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{"defaults", DefaultOptions(), false},
		{"one word no overlap", Options{1, 0}, false},
		{"overlap one below max", Options{5, 4}, false},
		{"zero max", Options{0, 0}, true},
		{"negative max", Options{-1, 0}, true},
		{"overlap equals max", Options{1, 1}, true},
		{"overlap above max", Options{5, 6}, true},
		{"negative overlap", Options{5, -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate(%+v) = %v, want error %v", tt.opts, err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("Validate(%+v) = %v, want it to wrap ErrInvalidOptions", tt.opts, err)
			}
			_, err = Split("some words", tt.opts)
			if (err != nil) != tt.wantErr || (tt.wantErr && !errors.Is(err, ErrInvalidOptions)) {
				t.Errorf("Split with %+v: got error %v, want ErrInvalidOptions %v", tt.opts, err, tt.wantErr)
			}
		})
	}
	if d := DefaultOptions(); d.MaxWords != 200 || d.OverlapWords != 40 {
		t.Errorf("DefaultOptions() = %+v, want {200 40}", d)
	}
}

// propertyTexts are awkward documents for the span and window properties.
var propertyTexts = []string{
	"a b a b a b a b a b a b",
	"payment payment payment\npayment hold payment",
	"# One\r\nalpha beta\r\ngamma\r\n# Two\r\n\r\ndelta epsilon zeta eta\r\n",
	"```\n# fenced\n```\n# Real\nbody text here\n~~~\n# also fenced\n~~~\nmore",
	"Ünïcödé façade naïve 東京 タワー ٣ e\u0301te ǅ",
	"no\u00a0break\u00a0spaces\u00a0here and\u2028line\u2029separators\u0085next",
	"\u3000ideographic\u3000space \u1680ogham",
	"🙂 emoji 🙂 words 🙂",
	"# A\n---\n# B\n***",
	"# only\n## headings\n",
	"pre\n# H1\n text \n## H2 ##\n\n\n   indented words   \n#no\n####### x",
	"  leading and trailing whitespace  \n\n",
	"x",
	"#\n##\n# \nword",
	"\r\n\r\n# CR\r\n\r\nwords\rwith\rbare\rCR\r\n",
}

var propertyOptions = []Options{{1, 0}, {2, 1}, {3, 0}, {3, 2}, {5, 2}, {200, 40}}

func TestSplitProperties(t *testing.T) {
	for i, text := range propertyTexts {
		for _, opts := range propertyOptions {
			t.Run(fmt.Sprintf("text%d/max%d_overlap%d", i, opts.MaxWords, opts.OverlapWords), func(t *testing.T) {
				got := split(t, text, opts)
				want := refSplit(text, opts)
				if len(got) != len(want) {
					t.Fatalf("got %d pieces %+v, want %d %+v", len(got), got, len(want), want)
				}
				for j := range want {
					if !samePiece(got[j], want[j]) {
						t.Errorf("piece %d: got %+v, want %+v", j, got[j], want[j])
					}
				}
			})
		}
	}
}

// refHeading is SPEC section 2's heading line, compiled independently.
var refHeading = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)

// refSplit is an independent statement of SPEC section 2's chunking, written
// differently from Split (lines by strings.Split, window count by formula), so
// the fuzzer can compare the two.
func refSplit(text string, opts Options) []Piece {
	text = string([]rune(text)) // invalid UTF-8 becomes U+FFFD, as Split sees it
	runes := []rune(text)
	type sec struct {
		name       string
		level      int
		path       []string
		start, end int
	}
	secs := []sec{{name: "body", start: 0}}
	inFence := false
	off := 0
	for _, line := range strings.Split(text, "\n") {
		lineStart := off
		off += utf8.RuneCountInString(line) + 1
		l := strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := refHeading.FindStringSubmatch(l); m != nil {
			secs[len(secs)-1].end = lineStart
			name := strings.TrimFunc(m[1], unicode.IsSpace)
			if name == "" {
				name = "untitled"
			}
			// The path, walking back: each earlier heading of a level below
			// every one met so far encloses this one.
			level := len(l) - len(strings.TrimLeft(l, "#"))
			var path []string
			for j, lim := len(secs)-1, level; j > 0; j-- {
				if secs[j].level < lim {
					path = append([]string{secs[j].name}, path...)
					lim = secs[j].level
				}
			}
			secs = append(secs, sec{name: name, level: level, path: path, start: min(off, len(runes))})
		}
	}
	secs[len(secs)-1].end = len(runes)

	window := func(name string, path []string, start, end int) []Piece {
		type word struct{ s, e int }
		var ws []word
		for i := start; i < end; i++ {
			if unicode.IsSpace(runes[i]) {
				continue
			}
			j := i
			for j < end && !unicode.IsSpace(runes[j]) {
				j++
			}
			ws = append(ws, word{i, j})
			i = j
		}
		n := len(ws)
		if n == 0 {
			return nil
		}
		step := opts.MaxWords - opts.OverlapWords
		count := 1
		if n > opts.MaxWords {
			count = 1 + (n-opts.MaxWords+step-1)/step
		}
		var out []Piece
		for k := 0; k < count; k++ {
			a := ws[k*step]
			b := ws[min(k*step+opts.MaxWords, n)-1]
			txt := string(runes[a.s:b.e])
			out = append(out, Piece{Section: name, Path: path, Text: txt, StartChar: a.s, EndChar: b.e, Length: len(analysis.Tokenize(txt))})
		}
		return out
	}
	var out []Piece
	for _, s := range secs {
		out = append(out, window(s.name, s.path, s.start, s.end)...)
	}
	for _, p := range out {
		if p.Length > 0 {
			return out
		}
	}
	return window("body", nil, 0, len(runes))
}

// samePiece reports whether a and b are equal, a nil Path only equal to a
// nil one.
func samePiece(a, b Piece) bool {
	return a.Section == b.Section && a.Text == b.Text && a.StartChar == b.StartChar && a.EndChar == b.EndChar &&
		a.Length == b.Length && slices.Equal(a.Path, b.Path) && (a.Path == nil) == (b.Path == nil)
}

func FuzzSplit(f *testing.F) {
	f.Add("# A\na\n## B\nb\n### C\nc\n## D\nd\n# E\ne", 3, 1)
	f.Add("### C\nc\n## B\nb\n#### D\nd\n# \n## x ##\ny", 4, 2)
	for _, s := range propertyTexts {
		f.Add(s, 3, 1)
	}
	f.Add("a b c d e f g", 200, 40)
	f.Add("# h\n\xff\xfe words", 2, 7)
	f.Add("```\r\n# x\r\n~~~\r\n# y\r\nz", -5, -3)
	f.Fuzz(func(t *testing.T, text string, maxWords, overlap int) {
		opts := Options{MaxWords: 1 + int(uint(maxWords)%64)}
		opts.OverlapWords = int(uint(overlap) % uint(opts.MaxWords))
		got, err := Split(text, opts)
		if err != nil {
			t.Fatalf("Split(%q, %+v) error: %v", text, opts, err)
		}
		checkPieces(t, string([]rune(text)), opts, got)
		want := refSplit(text, opts)
		if len(got) != len(want) {
			t.Fatalf("Split(%q, %+v) = %d pieces %+v, want %d %+v", text, opts, len(got), got, len(want), want)
		}
		for j := range want {
			if !samePiece(got[j], want[j]) {
				t.Fatalf("Split(%q, %+v) piece %d = %+v, want %+v", text, opts, j, got[j], want[j])
			}
		}
	})
}

func BenchmarkSplit(b *testing.B) {
	text := strings.Repeat("# Heading\n"+words(300)+"\n", 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Split(text, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSplitPath(t *testing.T) {
	def := DefaultOptions()
	tests := []struct {
		name string
		text string
		want [][]string // each piece's Path
	}{
		{"body has no path", "just text", [][]string{nil}},
		{"a first heading has no path", "pre\n# A\na", [][]string{nil, nil}},
		{"nested levels", "# A\na\n## B\nb\n### C\nc", [][]string{nil, {"A"}, {"A", "B"}}},
		{"a sibling closes its level", "# A\na\n## B\nb\n## C\nc", [][]string{nil, {"A"}, {"A"}}},
		{"a higher level closes every deeper one", "# A\na\n## B\nb\n### C\nc\n# D\nd\n## E\ne", [][]string{nil, {"A"}, {"A", "B"}, nil, {"D"}}},
		{"a skipped level is not invented", "# A\na\n### C\nc\n## B\nb", [][]string{nil, {"A"}, {"A"}}},
		{"a shallower heading closes a deeper one", "### C\nc\n## B\nb\n#### D\nd", [][]string{nil, nil, {"B"}}},
		{"headings without text still enclose", "# A\n## B\n### C\nc", [][]string{{"A", "B"}}},
		{"an empty heading encloses as untitled", "# \n## B\nb", [][]string{{"untitled"}}},
		{"fenced headings do not open", "# A\n```\n## X\n```\n## B\nb", [][]string{nil, {"A"}}},
		{"closing hashes do not change the level", "## A ##\na\n# B #\n## C\nc", [][]string{nil, {"B"}}},
		{"the fallback has no path", "# A\n## B\n", [][]string{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split(tt.text, def)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Split(%q) = %d pieces %+v, want %d", tt.text, len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				if !slices.Equal(got[i].Path, w) || (w == nil) != (got[i].Path == nil) {
					t.Errorf("piece %d (section %q): Path %q, want %q", i, got[i].Section, got[i].Path, w)
				}
			}
		})
	}
}
