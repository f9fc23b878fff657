package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/htmltext"
)

func settings(maxWords, overlap int) Settings {
	s := DefaultSettings()
	s.Chunking = chunk.Options{MaxWords: maxWords, OverlapWords: overlap}
	return s
}

var prepareTexts = []string{
	"Payment payment PMT-771 hold. Hold release.",
	"# Holds\r\nPMT-771 is on hold.\r\n# Release\r\nTwo approvals, two approvals.\r\n",
	"```\n# fenced\n```\n# Real\nbody text here and here and here",
	"Ünïcödé\u00a0façade\u2028naïve 東京 e\u0301te ǅ ٣ words words words",
	"# A\n# B\n",
	"pre amble\n# H\n\n# Empty\n   \n# Last\nlast words",
	"# Install\n## Linux\n### Debian\napt words\n## Windows\nwinget words\n# body\n## untitled\n## Last payment\npayments",
	strings.Repeat("lorem ipsum dolor ", 40),
}

// TestPrepareSectionPath: a chunk's field terms count the title, every
// heading enclosing its section and its own, with length-normalised
// frequencies; under the field rules before them they are counts, and
// under those without section paths (analysis.FieldsSectionVersion) the
// enclosing headings count for nothing, though the chunk keeps its path.
func TestPrepareSectionPath(t *testing.T) {
	d := cordontype.Document{Tenant: "t", DocID: "d", Title: "Guide", Classification: cordontype.Public, Barriers: []string{},
		Text: "# Install\n## Linux packages\n### Debian\napt words\n## Windows\nwinget words\n# guide\nmore words"}
	for _, c := range []struct {
		rules  string
		wantTF int32      // tf(#~guid) in the last chunk
		want   [][]string // each chunk's field terms
	}{
		{"", 64, [][]string{ // "Guide": one token
			{"#guide", "#install", "#linux", "#packages", "#debian", "#~guid", "#~instal", "#~linux", "#~packag", "#~debian"},
			{"#guide", "#install", "#windows", "#~guid", "#~instal", "#~window"},
			{"#guide", "#~guid"},
		}},
		{analysis.FieldsPathVersion, 1, [][]string{
			{"#guide", "#install", "#linux", "#packages", "#debian", "#~guid", "#~instal", "#~linux", "#~packag", "#~debian"},
			{"#guide", "#install", "#windows", "#~guid", "#~instal", "#~window"},
			{"#guide", "#~guid"}, // a heading equal to the title counts once
		}},
		{analysis.FieldsSectionVersion, 2, [][]string{
			{"#guide", "#debian", "#~guid", "#~debian"},
			{"#guide", "#windows", "#~guid", "#~window"},
			{"#guide", "#~guid"}, // tf 2: the title and the heading
		}},
	} {
		s := DefaultSettings()
		s.FieldRules = c.rules
		got, err := Prepare(&d, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d chunks, want 3", len(got))
		}
		if tf := got[2].TF[len(got[2].TF)-1]; tf != c.wantTF {
			t.Errorf("rules %q: tf(#~guid) = %d, want %d", c.rules, tf, c.wantTF)
		}
		// The first chunk's headings field has 4 tokens: "#install" counts
		// 64/4 under the current rules, "#guide" 64 (its title field has 1).
		i, j := slices.Index(got[0].Terms, "#install"), slices.Index(got[0].Terms, "#guide")
		if c.rules == "" && (i < 0 || j < 0 || got[0].TF[i] != 16 || got[0].TF[j] != 64) || c.rules != "" && (j < 0 || got[0].TF[j] != 1) {
			t.Errorf("rules %q: chunk 0 field terms %q tf %v", c.rules, got[0].Terms, got[0].TF)
		}
		for i, pc := range got {
			var fields []string
			for _, term := range pc.Terms {
				if analysis.IsFieldTerm(term) {
					fields = append(fields, term)
				}
			}
			if !slices.Equal(fields, c.want[i]) {
				t.Errorf("rules %q, chunk %d: field terms %q, want %q", c.rules, i, fields, c.want[i])
			}
		}
		if want := analysis.JoinPath([]string{"Install", "Linux packages"}); got[0].Path != want || got[1].Path != "Install" {
			t.Errorf("paths %q, %q, want %q, %q", got[0].Path, got[1].Path, want, "Install")
		}
		if want := analysis.RulesVersion(analysis.AnalyzerEnglish, c.rules); s.TokenizerVersion() != want {
			t.Errorf("rules %q: version %q, want %q", c.rules, s.TokenizerVersion(), want)
		}
	}
}

// TestPrepareProperties checks, for awkward documents and window sizes, the
// span property, ids {doc_id}::{n}, inherited fields, term frequencies in
// first-occurrence order and the count vector.
func TestPrepareProperties(t *testing.T) {
	for i, text := range prepareTexts {
		for _, opts := range []chunk.Options{{MaxWords: 3, OverlapWords: 1}, {MaxWords: 200, OverlapWords: 40}, {MaxWords: 1, OverlapWords: 0}} {
			t.Run(fmt.Sprintf("text%d/max%d", i, opts.MaxWords), func(t *testing.T) {
				d := cordontype.Document{Tenant: "wholesale", DocID: "pay/001:x.y_z-1", Text: text, Classification: cordontype.Internal,
					Barriers: []string{"z", "a", "z"}, AsOfTick: 42, Title: "Cross-border payments: a last resort"}
				got, err := Prepare(&d, settings(opts.MaxWords, opts.OverlapWords))
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				if len(got) == 0 {
					t.Fatalf("Prepare gave no chunks")
				}
				runes := []rune(text)
				for n, pc := range got {
					c := pc.Chunk
					if want := fmt.Sprintf("pay/001:x.y_z-1::%d", n); c.ChunkID != want {
						t.Errorf("chunk %d id = %q, want %q", n, c.ChunkID, want)
					}
					if span := string(runes[c.StartChar:c.EndChar]); span != c.Text {
						t.Errorf("chunk %d: runes[%d:%d] = %q, want %q", n, c.StartChar, c.EndChar, span, c.Text)
					}
					toks := analysis.Tokenize(c.Text)
					if c.Length != len(toks) {
						t.Errorf("chunk %d length = %d, want %d", n, c.Length, len(toks))
					}
					if c.DocID != d.DocID || c.Tenant != "wholesale" || c.Classification != cordontype.Internal || c.AsOfTick != 42 ||
						!slices.Equal(c.Barriers, []string{"a", "z"}) {
						t.Errorf("chunk %d inherits %+v, want the document's fields with barriers [a z]", n, c)
					}
					pieces, err := chunk.Split(text, opts)
					if err != nil {
						t.Fatal(err)
					}
					if want := analysis.JoinPath(pieces[n].Path); pc.Path != want {
						t.Errorf("chunk %d path = %q, want %q", n, pc.Path, want)
					}
					set := analysis.TokenSet(c.Text)
					if !slices.Equal(pc.Terms[:min(len(set), len(pc.Terms))], set) {
						t.Errorf("chunk %d terms = %q, want %q first", n, pc.Terms, set)
					}
					for j, term := range pc.Terms {
						want := int32(0)
						of := toks
						count := func(of []string, term string) (n int32) {
							for _, tok := range of {
								// A stem term counts every token with its stem.
								if st, _ := analysis.Stem(tok); tok == term || st == term {
									n++
								}
							}
							return n
						}
						if analysis.IsFieldTerm(term) {
							// A field term counts the title's and the
							// headings' tokens, each field length-normalised:
							// 64 per occurrence in a field of one token,
							// rounded half up.
							term = term[len(analysis.FieldPrefix):]
							for _, field := range []string{d.Title, analysis.HeadingText(d.Title, pc.Path, c.Section)} {
								if of := analysis.Tokenize(field); count(of, term) > 0 {
									want += int32((int(count(of, term))*64 + len(of)/2) / len(of))
								}
							}
						} else {
							want = count(of, term)
						}
						if pc.TF[j] != want {
							t.Errorf("chunk %d tf(%q) = %d, want %d", n, term, pc.TF[j], want)
						}
					}
					if want := hashembed.Vector(toks, hashembed.DefaultDims); !slices.Equal(pc.Vector, want) {
						t.Errorf("chunk %d vector differs from hashembed.Vector of its tokens", n)
					}
					if pc.NormSq != hashembed.NormSq(pc.Vector) {
						t.Errorf("chunk %d normSq = %d, want %d", n, pc.NormSq, hashembed.NormSq(pc.Vector))
					}
				}
			})
		}
	}
}

func TestPrepareRejects(t *testing.T) {
	good := cordontype.Document{Tenant: "t", DocID: "d", Text: "hold", Classification: cordontype.Public}
	tests := []struct {
		name    string
		edit    func(d *cordontype.Document)
		s       Settings
		wantErr error
	}{
		{"no token", func(d *cordontype.Document) { d.Text = "..." }, DefaultSettings(), cordontype.ErrInvalid},
		{"invalid UTF-8", func(d *cordontype.Document) { d.Text = "a\xc3" }, DefaultSettings(), cordontype.ErrInvalid},
		{"bad tenant", func(d *cordontype.Document) { d.Tenant = "T" }, DefaultSettings(), cordontype.ErrInvalid},
		{"bad chunking options", nil, settings(3, 3), chunk.ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good
			if tt.edit != nil {
				tt.edit(&d)
			}
			if _, err := Prepare(&d, tt.s); !errors.Is(err, tt.wantErr) {
				t.Errorf("Prepare error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestPrepareTermFrequencies(t *testing.T) {
	for _, tt := range []struct {
		analyzer string
		terms    []string
		tf       []int32
	}{
		{analysis.AnalyzerExact, []string{"hold", "pmt", "771", "holds", "holding"}, []int32{3, 2, 1, 1, 1}},
		// The tokens first, then one stem term a stem, counting every
		// form; 771 has none.
		{analysis.AnalyzerEnglish, []string{"hold", "pmt", "771", "holds", "holding", "~hold", "~pmt"}, []int32{3, 2, 1, 1, 1, 5, 2}},
	} {
		d := cordontype.Document{Tenant: "t", DocID: "d", Text: "Hold hold, PMT-771 HOLD pmt holds holding", Classification: cordontype.Public}
		s := DefaultSettings()
		s.Analyzer = tt.analyzer
		got, err := Prepare(&d, s)
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		if len(got) != 1 {
			t.Fatalf("got %d chunks, want 1", len(got))
		}
		if !slices.Equal(got[0].Terms, tt.terms) {
			t.Errorf("%s: terms = %q, want %q", tt.analyzer, got[0].Terms, tt.terms)
		}
		if !slices.Equal(got[0].TF, tt.tf) {
			t.Errorf("%s: tf = %v, want %v", tt.analyzer, got[0].TF, tt.tf)
		}
		if got[0].Chunk.Length != 8 {
			t.Errorf("%s: length %d, want 8 (tokens only)", tt.analyzer, got[0].Chunk.Length)
		}
	}
	// The hashed vector is the tokens' under either analyzer.
	d := cordontype.Document{Tenant: "t", DocID: "d", Text: "contribution contributes", Classification: cordontype.Public}
	exact, english := DefaultSettings(), DefaultSettings()
	exact.Analyzer = analysis.AnalyzerExact
	a, errA := Prepare(&d, exact)
	b, errB := Prepare(&d, english)
	if errA != nil || errB != nil || !slices.Equal(a[0].Vector, b[0].Vector) {
		t.Fatalf("vectors differ by analyzer: %v %v (%v, %v)", a[0].Vector, b[0].Vector, errA, errB)
	}
}

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(s *Settings)
		wantErr error
	}{
		{"defaults", nil, nil},
		{"dims 0", func(s *Settings) { s.Dims = 0 }, hashembed.ErrInvalidDims},
		{"dims 16001", func(s *Settings) { s.Dims = 16001 }, hashembed.ErrInvalidDims},
		{"k1 negative", func(s *Settings) { s.BM25.K1 = -1 }, bm25.ErrInvalidParams},
		{"b above 1", func(s *Settings) { s.BM25.B = 2 }, bm25.ErrInvalidParams},
		{"overlap equals max", func(s *Settings) { s.Chunking.OverlapWords = s.Chunking.MaxWords }, chunk.ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSettings()
			if tt.edit != nil {
				tt.edit(&s)
			}
			err := s.Validate()
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("Validate() = %v, want %v", err, tt.wantErr)
			}
		})
	}
	d := DefaultSettings()
	if d.Dims != 256 || d.BM25.K1 != 1.5 || d.BM25.B != 0.75 || d.Chunking.MaxWords != 200 || d.Chunking.OverlapWords != 40 {
		t.Errorf("DefaultSettings() = %+v, want dims 256, k1 1.5, b 0.75, 200/40", d)
	}
}

func TestFloat32s(t *testing.T) {
	in := []int32{0, 1, -1, MaxCount, -MaxCount}
	got := Float32s(in)
	for i, x := range in {
		if int32(got[i]) != x {
			t.Errorf("Float32s[%d] = %v, want %d exactly", i, got[i], x)
		}
	}
}

// TestVectorizeHashingIsPrepare checks that chunks prepared under another
// model (as a tenant re-embedding to hashing writes them) get from
// Vectorize the very vectors Prepare gives under hashing, and that chunks
// Prepare already gave a vector keep it without a call to the registry.
func TestVectorizeHashingIsPrepare(t *testing.T) {
	hashed := settings(3, 1)
	model := hashed
	model.Model = "some-model"
	for i, text := range prepareTexts {
		t.Run(fmt.Sprintf("text%d", i), func(t *testing.T) {
			d := cordontype.Document{Tenant: "wholesale", DocID: "d", Text: text, Classification: cordontype.Internal}
			want, err := Prepare(&d, hashed)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Prepare(&d, model)
			if err != nil {
				t.Fatal(err)
			}
			if err := Vectorize(context.Background(), nil, hashed.Spec(), got); err != nil {
				t.Fatalf("Vectorize: %v", err)
			}
			for n := range want {
				if !slices.Equal(got[n].Vector, want[n].Vector) || got[n].NormSq != want[n].NormSq {
					t.Errorf("chunk %d: got %v (%d), want %v (%d)", n, got[n].Vector, got[n].NormSq, want[n].Vector, want[n].NormSq)
				}
			}
			// A registry serving no model would fail any call for one.
			if err := Vectorize(context.Background(), nil, model.Spec(), want); err != nil {
				t.Errorf("Vectorize of chunks with vectors: %v, want no call", err)
			}
		})
	}
}

// BenchmarkPrepareAnalyzers measures Prepare of prose-like documents under
// each analyzer: the English one stems each distinct word once a document
// and adds a stem term a distinct stem (terms/chunk reports how many terms
// a chunk carries, postings included).
func BenchmarkPrepareAnalyzers(b *testing.B) {
	words := strings.Fields(`mutations contribute to tumour growth in most patients the contribution of a mutation
		to growth was provided by the cohort providers provided samples analysis analyses analysed cells cell
		signalling pathways pathway regulation regulates regulated expression expressed increases increased`)
	docs := make([]cordontype.Document, 64)
	for i := range docs {
		var sb strings.Builder
		for j := range 400 {
			sb.WriteString(words[(i*7+j*13)%len(words)])
			sb.WriteByte(' ')
		}
		docs[i] = cordontype.Document{Tenant: "t", DocID: fmt.Sprintf("d%d", i), Text: sb.String(), Classification: cordontype.Public}
	}
	for _, a := range []string{analysis.AnalyzerExact, analysis.AnalyzerEnglish} {
		b.Run(a, func(b *testing.B) {
			s := DefaultSettings()
			s.Analyzer = a
			chunks, terms := 0, 0
			for b.Loop() {
				chunks, terms = 0, 0
				for i := range docs {
					pcs, err := Prepare(&docs[i], s)
					if err != nil {
						b.Fatal(err)
					}
					for _, pc := range pcs {
						chunks++
						terms += len(pc.Terms)
					}
				}
			}
			b.ReportMetric(float64(terms)/float64(chunks), "terms/chunk")
		})
	}
}

// TestPrepareHTMLSectionPath: an HTML page's h1-h6 become headings of
// their level, so its chunks get section paths; its <title> equal to its
// h1 counts once in the field text.
func TestPrepareHTMLSectionPath(t *testing.T) {
	page := `<html><head><title>CLUSTER</title></head><body><nav>Home</nav>
<h1>CLUSTER</h1><p>Cluster a table according to an index.</p>
<h2>Parameters</h2><h3>table_name</h3><p>The name of the table.</p>
<h2>Notes</h2><p>Clustering is a one-time operation.</p></body></html>`
	r, err := htmltext.Convert(page)
	if err != nil {
		t.Fatal(err)
	}
	d := cordontype.Document{Tenant: "t", DocID: "sql-cluster", Title: r.Title, Text: r.Text, Classification: cordontype.Public, Barriers: []string{}}
	got, err := Prepare(&d, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ section, path, field string }{
		{"CLUSTER", "", "CLUSTER"},
		{"table_name", analysis.JoinPath([]string{"CLUSTER", "Parameters"}), "CLUSTER\nParameters\ntable_name"},
		{"Notes", "CLUSTER", "CLUSTER\nNotes"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d chunks of %q, want %d", len(got), r.Text, len(want))
	}
	for i, w := range want {
		if got[i].Chunk.Section != w.section || got[i].Path != w.path {
			t.Errorf("chunk %d: section %q path %q, want %q %q", i, got[i].Chunk.Section, got[i].Path, w.section, w.path)
		}
		if f := analysis.FieldText(d.Title, got[i].Path, got[i].Chunk.Section); f != w.field {
			t.Errorf("chunk %d: field text %q, want %q", i, f, w.field)
		}
	}
}
