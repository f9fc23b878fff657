package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// Corpus shape. The numbers aim at an internal knowledge base: most sections
// are a paragraph or two, some run to several pages; documents have a few
// sections.
const (
	vocabSize   = 50_000 // distinct ordinary words
	zipfS       = 1.1    // Zipf exponent of word frequencies (natural text is close to 1)
	maxSections = 12
	// NowTick is the query time; documents have as_of_tick in [0, NowTick].
	NowTick = 1000
	// MaxStaleTicks is the freshness contract of every other query.
	MaxStaleTicks = 600
)

var sectionNames = []string{
	"Overview", "Scope", "Procedure", "Controls", "Exceptions", "Escalation",
	"Approvals", "Reconciliation", "Settlement", "Sanctions screening",
	"Contacts", "References", "Definitions", "Change history", "Risks",
	"Reporting", "Cut-off times", "Limits", "Evidence", "Appendix",
}

// syllables build the vocabulary: word i is i+len(syllables) written in base
// len(syllables), one syllable per digit, so every word is distinct and has
// at least two syllables.
var syllables = []string{
	"ka", "lo", "mi", "ne", "ru", "sa", "te", "vi", "do", "pe",
	"ba", "co", "di", "fu", "ga", "ho", "ji", "le", "ma", "no",
	"pa", "qui", "ro", "si", "tu", "va", "wo", "xa", "ye", "zo",
	"an", "el", "in", "or", "um", "est", "ar", "on", "is", "ux",
}

var (
	vocabOnce sync.Once
	vocab     []string
)

func vocabulary() []string {
	vocabOnce.Do(func() {
		vocab = make([]string, vocabSize)
		base := len(syllables)
		var b strings.Builder
		for i := range vocab {
			b.Reset()
			n := i + base
			var digits []int
			for n > 0 {
				digits = append(digits, n%base)
				n /= base
			}
			for j := len(digits) - 1; j >= 0; j-- {
				b.WriteString(syllables[digits[j]])
			}
			vocab[i] = b.String()
		}
	})
	return vocab
}

// Config describes a corpus.
type Config struct {
	Seed    uint64
	Chunks  int // total chunks over all tenants
	Tenants int
}

// Generator produces a deterministic corpus and query set from a Config.
// Documents are produced tenant by tenant, each from its own random stream,
// so the same Config always gives byte-identical documents and queries.
type Generator struct {
	cfg Config
}

// NewGenerator validates cfg.
func NewGenerator(cfg Config) (*Generator, error) {
	if cfg.Chunks < 1 {
		return nil, fmt.Errorf("chunks %d must be >= 1", cfg.Chunks)
	}
	if cfg.Tenants < 1 || cfg.Tenants > cfg.Chunks {
		return nil, fmt.Errorf("tenants %d must be in 1..chunks (%d)", cfg.Tenants, cfg.Chunks)
	}
	if cfg.Tenants > 100_000 {
		return nil, fmt.Errorf("tenants %d must be <= 100000", cfg.Tenants)
	}
	return &Generator{cfg: cfg}, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() Config { return g.cfg }

// TenantName is the name of tenant i.
func (g *Generator) TenantName(i int) string {
	if g.cfg.Tenants == 1 {
		return "bench"
	}
	return fmt.Sprintf("bench_%05d", i)
}

// TenantChunks is how many chunks tenant i gets.
func (g *Generator) TenantChunks(i int) int {
	n := g.cfg.Chunks / g.cfg.Tenants
	if i < g.cfg.Chunks%g.cfg.Tenants {
		n++
	}
	return n
}

// identSpace is how many distinct identifiers of each kind a tenant draws
// from: about one chunk per identifier, so a query naming one finds one or
// two chunks or none, as a real ticket number does.
func (g *Generator) identSpace(tenant int) int {
	return max(50, g.TenantChunks(tenant)/8)
}

// Each calls fn for every document of the corpus, tenant by tenant, in
// order, and stops at fn's first error. Documents default-chunk (200-word
// windows, 40 words of overlap) into exactly Config.Chunks chunks.
func (g *Generator) Each(fn func(doc cordontype.Document, chunks int) error) error {
	for t := range g.cfg.Tenants {
		remaining := g.TenantChunks(t)
		for d := 0; remaining > 0; d++ {
			doc, n := g.document(t, d, remaining)
			remaining -= n
			if err := fn(doc, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// windows is the number of chunks a section of n words gives under the
// default chunking options.
func windows(n int) int {
	maxW := chunk.DefaultMaxWords
	step := maxW - chunk.DefaultOverlapWords
	if n <= maxW {
		return 1
	}
	return 1 + (n-maxW+step-1)/step
}

type docRand struct {
	r    *rand.Rand
	zipf *rand.Zipf
}

func newRand(seed, stream uint64) docRand {
	r := rand.New(rand.NewPCG(seed, stream))
	return docRand{r: r, zipf: rand.NewZipf(r, zipfS, 1, vocabSize-1)}
}

func (d docRand) word() string { return vocabulary()[d.zipf.Uint64()] }

// ident is a rare identifier of tenant space m, in one of the forms real
// documents carry; it tokenizes to one or two tokens.
func ident(r *rand.Rand, m int) string {
	k := r.IntN(m)
	switch r.IntN(4) {
	case 0:
		return "tx" + strconv.Itoa(k)
	case 1:
		return "PMT-" + strconv.Itoa(k)
	case 2:
		return fmt.Sprintf("INC%07d", k)
	default:
		return "acct-" + strconv.Itoa(k+10000)
	}
}

// document generates document d of tenant t with at most budget chunks and
// returns it with its chunk count.
func (g *Generator) document(t, d, budget int) (cordontype.Document, int) {
	dr := newRand(g.cfg.Seed, uint64(t)<<32|uint64(d))
	r := dr.r
	doc := cordontype.Document{
		Tenant:   g.TenantName(t),
		DocID:    fmt.Sprintf("kb/%06d", d),
		AsOfTick: int64(r.IntN(NowTick + 1)),
	}
	switch x := r.IntN(100); {
	case x < 25:
		doc.Classification = cordontype.Public
	case x < 65:
		doc.Classification = cordontype.Internal
	case x < 90:
		doc.Classification = cordontype.Confidential
	default:
		doc.Classification = cordontype.Restricted
	}
	switch x := r.IntN(100); {
	case x < 10:
		doc.Barriers = []string{"mna"}
	case x < 18:
		doc.Barriers = []string{"trading"}
	case x < 20:
		doc.Barriers = []string{"mna", "trading"}
	}
	sections := 1
	for sections < maxSections && r.IntN(10) < 7 {
		sections++
	}
	var b strings.Builder
	title := strings.ToUpper(dr.word()[:1]) + dr.word()[1:] + " " + dr.word()
	doc.Title = title
	fmt.Fprintf(&b, "# %s\n\n", title)
	m := g.identSpace(t)
	chunks := 0
	for s := 0; s < sections && chunks < budget; s++ {
		var words int
		switch x := r.IntN(100); {
		case x < 70:
			words = 30 + r.IntN(160)
		case x < 90:
			words = 190 + r.IntN(210)
		default:
			words = 400 + r.IntN(500)
		}
		if chunks+windows(words) > budget {
			words = min(words, chunk.DefaultMaxWords)
		}
		chunks += windows(words)
		fmt.Fprintf(&b, "## %s\n\n", sectionNames[r.IntN(len(sectionNames))])
		idents := 0
		if r.IntN(100) < 35 {
			idents = 1 + r.IntN(2)
		}
		sentence := 0
		for w := range words {
			var word string
			if idents > 0 && r.IntN(words-w) < idents {
				word = ident(r, m)
				idents--
			} else {
				word = dr.word()
			}
			if sentence == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			}
			b.WriteString(word)
			sentence++
			switch {
			case w == words-1:
				b.WriteString(".\n\n")
			case sentence >= 8 && r.IntN(10) == 0:
				b.WriteString(". ")
				sentence = 0
			case r.IntN(60) == 0:
				b.WriteString("\n")
			default:
				b.WriteByte(' ')
			}
		}
	}
	doc.Text = b.String()
	return doc, chunks
}

// Query is one benchmark query: who asks, what, and the freshness contract.
type Query struct {
	Principal     cordontype.Principal
	Text          string
	NowTick       int64
	MaxStaleTicks *int64
	// seq is the query's index in a mixed run, which picks its operation.
	seq int
	// policy replaces BasePolicy when set (Options.Policy).
	policy *retrieval.Policy
}

// Queries returns n queries. Each has 2-8 terms drawn from the corpus's
// word distribution (the most frequent words less often, as people type
// content words), a rare identifier in 30% of them, and a random tenant.
// Every principal has clearance confidential and the barrier "mna" (so
// restricted documents and those behind "trading" are hidden); every other
// query carries a freshness contract of MaxStaleTicks.
func (g *Generator) Queries(n int) []Query {
	dr := newRand(g.cfg.Seed, 1<<63)
	r := dr.r
	stale := int64(MaxStaleTicks)
	out := make([]Query, n)
	for i := range out {
		t := r.IntN(g.cfg.Tenants)
		terms := 2 + r.IntN(7)
		words := make([]string, 0, terms)
		if r.IntN(10) < 3 {
			words = append(words, ident(r, g.identSpace(t)))
		}
		for len(words) < terms {
			k := dr.zipf.Uint64()
			if k < 20 && r.IntN(10) < 7 {
				continue
			}
			words = append(words, vocabulary()[k])
		}
		r.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
		q := Query{
			Principal: cordontype.Principal{Tenant: g.TenantName(t), Clearance: cordontype.Confidential, Barriers: []string{"mna"}},
			Text:      strings.Join(words, " "),
			NowTick:   NowTick,
		}
		if i%2 == 0 {
			q.MaxStaleTicks = &stale
		}
		out[i] = q
	}
	return out
}
