package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// model is the test's own account of a store: the chunks Put returned, per
// tenant and document. Expected rankings are computed from it from scratch.
type model map[string]map[string][]cordontype.Chunk

func (m model) put(tenant, docID string, chunks []cordontype.Chunk) {
	if m[tenant] == nil {
		m[tenant] = map[string][]cordontype.Chunk{}
	}
	m[tenant][docID] = chunks
}

type scoredID struct {
	id    string
	score float64
}

func sortScored(s []scoredID) {
	slices.SortFunc(s, func(a, b scoredID) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
}

// expected computes SPEC section 4 and 3 over the model's current chunks of
// tenant: the unfiltered lexical and dense rankings of text.
func (m model) expected(tenant, text string, s index.Settings) (lex, dense []scoredID) {
	var all []cordontype.Chunk
	for _, cs := range m[tenant] {
		all = append(all, cs...)
	}
	n := int64(len(all))
	var sumLen int64
	df := map[string]int64{}
	tf := make([]map[string]int64, len(all))
	for i, c := range all {
		sumLen += int64(c.Length)
		tf[i] = map[string]int64{}
		for _, tok := range analysis.Tokenize(c.Text) {
			tf[i][tok]++
		}
		for tok := range tf[i] {
			df[tok]++
		}
	}
	avgdl := float64(sumLen) / float64(max(n, 1))
	terms := analysis.TokenSet(text)
	q := hashembed.Vector(analysis.Tokenize(text), s.Dims)
	for i, c := range all {
		score := 0.0
		for _, term := range terms {
			if f := tf[i][term]; f > 0 {
				score += bm25.Term(bm25.IDF(n, df[term]), f, int64(c.Length), avgdl, s.BM25)
			}
		}
		if score > 0 {
			lex = append(lex, scoredID{c.ChunkID, score})
		}
		v := hashembed.Vector(analysis.Tokenize(c.Text), s.Dims)
		if cos := hashembed.Cosine(hashembed.Dot(q, v), hashembed.NormSq(q), hashembed.NormSq(v)); cos > 0 {
			dense = append(dense, scoredID{c.ChunkID, cos})
		}
	}
	sortScored(lex)
	sortScored(dense)
	return lex, dense
}

func hitsOf(h []retrieval.Hit) []scoredID {
	out := make([]scoredID, len(h))
	for i, x := range h {
		out[i] = scoredID{x.Chunk.ChunkID, x.Score}
	}
	return out
}

func rankAll(t *testing.T, st *Store, tenant, text string) retrieval.Rankings {
	t.Helper()
	rk, err := st.Rank(context.Background(), retrieval.RankRequest{
		Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Restricted, Barriers: []string{"deal-x"}},
		Tokens:    analysis.Tokenize(text), Terms: analysis.TokenSet(text), NowTick: 0, TopN: 1 << 30,
	})
	if err != nil {
		t.Fatalf("Rank: %v", err)
	}
	return rk
}

var queries = []string{"payment hold", "PMT-771 release approvals", "hold", "wire cut-off times", "zebra", ""}

func checkStatistics(t *testing.T, st *Store, m model, tenant string) {
	t.Helper()
	for _, q := range queries {
		rk := rankAll(t, st, tenant, q)
		lex, dense := m.expected(tenant, q, st.Settings())
		if got := hitsOf(rk.Lexical); !slices.Equal(got, lex) {
			t.Errorf("tenant %s query %q: lexical = %v, want %v", tenant, q, got, lex)
		}
		if got := hitsOf(rk.Dense); !slices.Equal(got, dense) {
			t.Errorf("tenant %s query %q: dense = %v, want %v", tenant, q, got, dense)
		}
		if rk.Considered != len(lex)+len(dense) || rk.ExcludedByEntitlement != 0 || rk.ExcludedByFreshness != 0 {
			t.Errorf("tenant %s query %q: counters %d/%d/%d, want %d/0/0", tenant, q, rk.Considered, rk.ExcludedByEntitlement, rk.ExcludedByFreshness, len(lex)+len(dense))
		}
	}
}

func newStore(t *testing.T, s index.Settings) *Store {
	t.Helper()
	st, err := New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return st
}

func put(t *testing.T, st *Store, m model, d cordontype.Document) []cordontype.Chunk {
	t.Helper()
	cs, err := st.Put(context.Background(), d)
	if err != nil {
		t.Fatalf("Put(%s): %v", d.DocID, err)
	}
	m.put(d.Tenant, d.DocID, cs)
	return cs
}

func doc(tenant, id, text string) cordontype.Document {
	return cordontype.Document{Tenant: tenant, DocID: id, Text: text, Classification: cordontype.Public}
}

// TestStatisticsFollowWrites checks, after every put, replacement and delete,
// that the store's BM25 and cosine rankings equal ones computed from scratch
// over exactly the current chunks.
func TestStatisticsFollowWrites(t *testing.T) {
	s := index.DefaultSettings()
	s.Chunking = chunk.Options{MaxWords: 8, OverlapWords: 2}
	st := newStore(t, s)
	m := model{}
	ctx := context.Background()
	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"put three", func(t *testing.T) {
			put(t, st, m, doc("w", "a", "Payment PMT-771 is on hold pending sanctions review. Release requires two approvals from operations."))
			put(t, st, m, doc("w", "b", "# Holds\nhold hold hold payment\n# Wires\nCut-off times for outgoing wires."))
			put(t, st, m, doc("w", "c", "Unrelated cafeteria menu for the week."))
		}},
		{"replace a with more chunks", func(t *testing.T) {
			cs := put(t, st, m, doc("w", "a", strings.Repeat("payment release approvals hold ", 6)+"PMT-771"))
			if len(cs) < 3 {
				t.Fatalf("replacement has %d chunks, want several", len(cs))
			}
		}},
		{"replace a with fewer chunks", func(t *testing.T) {
			cs := put(t, st, m, doc("w", "a", "PMT-771"))
			if len(cs) != 1 || cs[0].ChunkID != "a::0" {
				t.Fatalf("replacement chunks = %+v, want just a::0", cs)
			}
		}},
		{"delete b", func(t *testing.T) {
			ok, err := st.Delete(ctx, "w", "b")
			if err != nil || !ok {
				t.Fatalf("Delete(b) = %v, %v, want true", ok, err)
			}
			delete(m["w"], "b")
		}},
		{"delete b again", func(t *testing.T) {
			if ok, err := st.Delete(ctx, "w", "b"); err != nil || ok {
				t.Fatalf("Delete(b) again = %v, %v, want false", ok, err)
			}
		}},
		{"rejected replacement keeps the old document", func(t *testing.T) {
			if _, err := st.Put(ctx, doc("w", "c", "!!! ???")); !errors.Is(err, cordontype.ErrInvalid) {
				t.Fatalf("Put of a token-less replacement = %v, want ErrInvalid", err)
			}
		}},
		{"other tenant changes nothing here", func(t *testing.T) {
			put(t, st, m, doc("r", "a", "payment payment hold hold zebra"))
			put(t, st, m, doc("r", "x", "hold"))
		}},
		{"delete everything", func(t *testing.T) {
			for _, id := range []string{"a", "c"} {
				if ok, err := st.Delete(ctx, "w", id); err != nil || !ok {
					t.Fatalf("Delete(%s) = %v, %v, want true", id, ok, err)
				}
				delete(m["w"], id)
			}
		}},
		{"put into the emptied tenant", func(t *testing.T) {
			put(t, st, m, doc("w", "z", "payment hold again"))
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.do(t)
			checkStatistics(t, st, m, "w")
			checkStatistics(t, st, m, "r")
		})
	}
}

func TestPutReturnsChunks(t *testing.T) {
	st := newStore(t, index.DefaultSettings())
	d := cordontype.Document{Tenant: "w", DocID: "pay-1", Text: "# Holds\nPMT-771 hold\n# Release\ntwo approvals", Classification: cordontype.Confidential,
		Barriers: []string{"b", "a"}, AsOfTick: 9}
	cs, err := st.Put(context.Background(), d)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	want := []cordontype.Chunk{
		{ChunkID: "pay-1::0", DocID: "pay-1", Tenant: "w", Section: "Holds", Text: "PMT-771 hold", StartChar: 8, EndChar: 20, Length: 3,
			Classification: cordontype.Confidential, Barriers: []string{"a", "b"}, AsOfTick: 9},
		{ChunkID: "pay-1::1", DocID: "pay-1", Tenant: "w", Section: "Release", Text: "two approvals", StartChar: 31, EndChar: 44, Length: 2,
			Classification: cordontype.Confidential, Barriers: []string{"a", "b"}, AsOfTick: 9},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %d chunks, want %d", len(cs), len(want))
	}
	for i := range want {
		g, w := cs[i], want[i]
		if g.ChunkID != w.ChunkID || g.DocID != w.DocID || g.Tenant != w.Tenant || g.Section != w.Section || g.Text != w.Text ||
			g.StartChar != w.StartChar || g.EndChar != w.EndChar || g.Length != w.Length || g.Classification != w.Classification ||
			!slices.Equal(g.Barriers, w.Barriers) || g.AsOfTick != w.AsOfTick {
			t.Errorf("chunk %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestWriteValidation(t *testing.T) {
	st := newStore(t, index.DefaultSettings())
	ctx := context.Background()
	tests := []struct {
		name string
		do   func() error
	}{
		{"put bad tenant", func() error { _, err := st.Put(ctx, doc("W", "a", "x")); return err }},
		{"put bad doc id", func() error { _, err := st.Put(ctx, doc("w", "a b", "x")); return err }},
		{"put invalid UTF-8", func() error { _, err := st.Put(ctx, doc("w", "a", "x\xff")); return err }},
		{"put no token", func() error { _, err := st.Put(ctx, doc("w", "a", "   ")); return err }},
		{"delete bad tenant", func() error { _, err := st.Delete(ctx, "W", "a"); return err }},
		{"delete bad doc id", func() error { _, err := st.Delete(ctx, "w", ""); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, cordontype.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
	if rk := rankAll(t, st, "w", "x"); rk.Considered != 0 {
		t.Errorf("after rejected writes: considered %d, want 0 (nothing stored)", rk.Considered)
	}
	if ok, err := st.Delete(ctx, "nobody", "a"); ok || err != nil {
		t.Errorf("Delete in an unknown tenant = %v, %v, want false, nil", ok, err)
	}
	bad := index.DefaultSettings()
	bad.Dims = 0
	if _, err := New(bad); err == nil {
		t.Errorf("New with dims 0 succeeded, want an error")
	}
}

// TestRankTieBreak: identical chunks in different documents tie on both
// scores and are ordered by chunk id bytes.
func TestRankTieBreak(t *testing.T) {
	st := newStore(t, index.DefaultSettings())
	m := model{}
	for _, id := range []string{"b", "a", "B", "a0", "a::"} {
		put(t, st, m, doc("w", id, "same text here"))
	}
	rk := rankAll(t, st, "w", "same")
	want := []string{"B::0", "a0::0", "a::0", "a::::0", "b::0"}
	for _, side := range [][]retrieval.Hit{rk.Lexical, rk.Dense} {
		got := make([]string, len(side))
		for i, h := range side {
			got[i] = h.Chunk.ChunkID
		}
		if !slices.Equal(got, want) {
			t.Errorf("ranking = %q, want %q", got, want)
		}
	}
}

// TestConcurrentUse exercises the store's lock under -race.
func TestConcurrentUse(t *testing.T) {
	st := newStore(t, index.DefaultSettings())
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				d := doc("w", fmt.Sprintf("d%d", i%7), fmt.Sprintf("payment hold %d %d", g, i))
				if _, err := st.Put(ctx, d); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if i%5 == 0 {
					if _, err := st.Delete(ctx, "w", d.DocID); err != nil {
						t.Errorf("Delete: %v", err)
						return
					}
				}
				if _, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{
					Principal: cordontype.Principal{Tenant: "w", Clearance: cordontype.Public}, Text: "payment hold", Policy: retrieval.DefaultPolicy(),
				}); err != nil {
					t.Errorf("Retrieve: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkRank ranks a 10,000-chunk tenant (2,000 documents of five
// 40-word chunks) for a three-term query.
func BenchmarkRank(b *testing.B) {
	s := index.DefaultSettings()
	s.Chunking = chunk.Options{MaxWords: 40, OverlapWords: 0}
	st, err := New(s)
	if err != nil {
		b.Fatal(err)
	}
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%d", i)
	}
	x := uint64(1)
	next := func() int {
		x = x*6364136223846793005 + 1442695040888963407
		return int(x>>33) % len(vocab)
	}
	ctx := context.Background()
	n := 0
	for d := range 2000 {
		words := make([]string, 200)
		for i := range words {
			words[i] = vocab[next()]
		}
		cs, err := st.Put(ctx, cordontype.Document{Tenant: "bench", DocID: fmt.Sprintf("doc-%d", d), Text: strings.Join(words, " "), Classification: cordontype.Public})
		if err != nil {
			b.Fatal(err)
		}
		n += len(cs)
	}
	if n != 10000 {
		b.Fatalf("corpus has %d chunks, want 10000", n)
	}
	text := "w17 w2048 w4000"
	req := retrieval.RankRequest{
		Principal: cordontype.Principal{Tenant: "bench", Clearance: cordontype.Public, Barriers: []string{}},
		Tokens:    analysis.Tokenize(text), Terms: analysis.TokenSet(text), TopN: retrieval.DefaultTopN,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Rank(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
