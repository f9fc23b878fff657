package index

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/chunk"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/hashembed"
)

// MaxCount is the largest count magnitude a vector component may hold: 2^24,
// the end of float32's exact integers ([hashembed.MaxCount]).
const MaxCount = hashembed.MaxCount

// Settings are a tenant's index settings: they decide chunk boundaries and
// scores, so a store records them with the tenant and never mixes two.
type Settings struct {
	// Model is the embedding model of the dense side: embed.Hash (or "",
	// the same) for signed feature hashing, else a model a provider serves,
	// whose vectors have Dims dimensions.
	Model    string
	Dims     int
	BM25     bm25.Params
	Chunking chunk.Options
	// Statistics is the BM25 statistics scope. It changes scores, not what
	// is stored, so a tenant can switch it without re-indexing.
	Statistics bm25.Scope
	// Analyzer is what a chunk's terms are: analysis.AnalyzerExact (or
	// "", the same) its distinct tokens, analysis.AnalyzerEnglish those and
	// their English stem terms. Changing it re-indexes the tenant.
	Analyzer string
	// Fields makes each chunk's title and headings searchable as field
	// terms ([Settings.AppendFieldTerms]) after its other terms. Changing
	// it re-indexes the tenant.
	Fields bool
	// FieldRules names the field rules of a tenant indexed under older
	// ones, which keeps them until it is re-indexed: "" for the current
	// rules (analysis.FieldsVersion), analysis.FieldsPathVersion (field
	// frequencies are counts) or analysis.FieldsSectionVersion (counts,
	// and no section path in the field text). A store sets it from the
	// tenant's tokenizer version. Only with Fields.
	FieldRules string
}

// DefaultSettings returns dims 256, k1 1.5, b 0.75, 200-word windows with 40
// words of overlap, the entitled statistics scope, the English analyzer and
// field terms.
func DefaultSettings() Settings {
	return Settings{Model: embed.Hash, Dims: hashembed.DefaultDims, BM25: bm25.DefaultParams(), Chunking: chunk.DefaultOptions(),
		Statistics: bm25.DefaultScope, Analyzer: analysis.AnalyzerEnglish, Fields: true}
}

// Stems reports whether the settings index stem terms.
func (s Settings) Stems() bool { return s.Analyzer == analysis.AnalyzerEnglish }

// TokenizerVersion is what a store records for the settings' terms
// ([analysis.Version]).
func (s Settings) TokenizerVersion() string {
	if s.Fields {
		return analysis.RulesVersion(s.Analyzer, s.FieldRules)
	}
	return analysis.Version(s.Analyzer, false)
}

// NormFields reports whether field frequencies are length-normalised
// (analysis.FieldTF): field terms under the current rules.
func (s Settings) NormFields() bool { return s.Fields && s.FieldRules == "" }

// FieldText is the field text of a chunk under the settings' field rules
// (analysis.FieldText, or analysis.SectionFieldText under
// analysis.FieldsSectionVersion).
func (s Settings) FieldText(title, path, section string) string {
	if s.FieldRules == analysis.FieldsSectionVersion {
		return analysis.SectionFieldText(title, section)
	}
	return analysis.FieldText(title, path, section)
}

// AppendFieldTerms returns terms and tf followed by the field terms of a
// chunk of a document titled title, in the section named section under
// the headings of path, under the settings' field rules: the title and
// the headings as two fields with length-normalised frequencies
// (analysis.AppendNormFieldTerms), or, under older rules, counts over the
// field text (analysis.AppendFieldTerms).
func (s Settings) AppendFieldTerms(terms []string, tf []int32, title, path, section string, counter *analysis.Counter, stemmer *analysis.Stemmer) ([]string, []int32) {
	if s.NormFields() {
		return analysis.AppendNormFieldTerms(terms, tf, title, analysis.HeadingText(title, path, section), counter, stemmer)
	}
	return analysis.AppendFieldTerms(terms, tf, s.FieldText(title, path, section), counter, stemmer)
}

// AppendFieldIDs is AppendFieldTerms over ids in v
// (analysis.Vocabulary.AppendNormFieldIDs, AppendFieldIDs).
func (s Settings) AppendFieldIDs(v *analysis.Vocabulary, ids, tf []int32, title, path, section string, counter *analysis.Counter, stemmer *analysis.Stemmer) ([]int32, []int32) {
	if s.NormFields() {
		return v.AppendNormFieldIDs(ids, tf, title, analysis.HeadingText(title, path, section), counter, stemmer)
	}
	return v.AppendFieldIDs(ids, tf, s.FieldText(title, path, section), counter, stemmer)
}

// Validate checks every setting.
func (s Settings) Validate() error {
	if err := hashembed.ValidateDims(s.Dims); err != nil {
		return err
	}
	if s.Model != "" {
		if err := embed.ValidateModel(s.Model); err != nil {
			return err
		}
	}
	if err := s.BM25.Validate(); err != nil {
		return err
	}
	if _, err := bm25.ParseScope(string(s.Statistics)); err != nil {
		return err
	}
	if s.Analyzer != "" {
		if err := analysis.ValidateAnalyzer(s.Analyzer); err != nil {
			return fmt.Errorf("%w: %w", cordontype.ErrInvalid, err)
		}
	}
	if !analysis.ValidRules(s.FieldRules) {
		return fmt.Errorf("%w: field rules %q: want %q, %q or none (the current ones)", cordontype.ErrInvalid, s.FieldRules, analysis.FieldsPathVersion, analysis.FieldsSectionVersion)
	}
	if s.FieldRules != "" && !s.Fields {
		return fmt.Errorf("%w: field rules %q need field terms", cordontype.ErrInvalid, s.FieldRules)
	}
	return s.Chunking.Validate()
}

// Spec is the embedding model the settings record.
func (s Settings) Spec() embed.Spec {
	m := s.Model
	if m == "" {
		m = embed.Hash
	}
	return embed.Spec{Model: m, Dims: s.Dims}
}

// PreparedChunk is one chunk ready to store.
type PreparedChunk struct {
	Chunk cordontype.Chunk
	// Terms are the chunk's distinct tokens in first-occurrence order,
	// then, under the English analyzer, their stem terms
	// ([analysis.Stemmer.AppendStems]), then, with Settings.Fields, the
	// field terms of its document's title and its section path
	// ([Settings.AppendFieldTerms]), with their frequencies in TF (same
	// index).
	Terms  []string
	TF     []int32
	Vector []int32
	NormSq int64
	// Path names the headings enclosing the chunk's section
	// (chunk.Piece.Path, joined by analysis.JoinPath; "" for none). A
	// store keeps it to count the chunk's field terms again.
	Path string
	// Ref is the store's id of the chunk's stored row, 0 for none: an
	// in-memory index that keeps no texts hands it back with each hit
	// (retrieval.Hit.Ref) for the store to read the text by.
	Ref int64
}

// Prepare validates doc (normalising its barriers) and chunks, tokenizes and
// hashes it under s. Nothing is stored; an error means the document must be
// refused as a whole. Under a model other than hashing the chunks have no
// vector yet: [Vectorize] gives them one.
func Prepare(doc *cordontype.Document, s Settings) ([]PreparedChunk, error) {
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	pieces, err := chunk.Split(doc.Text, s.Chunking)
	if err != nil {
		return nil, err
	}
	out := make([]PreparedChunk, len(pieces))
	// Hashing is the one model whose vector follows from the counts made
	// here: Prepare gives it now, the same vector the embedding registry's
	// built-in hashing gives for the text, without tokenizing it again, and
	// stays pure (no registry). Any other model's vector needs its provider:
	// [Vectorize] gives it.
	hashed := s.Spec().IsHash()
	counter := analysis.NewCounter()
	var stemmer *analysis.Stemmer
	if s.Stems() {
		stemmer = analysis.NewStemmer()
	}
	for i, p := range pieces {
		pc := PreparedChunk{
			Chunk: cordontype.Chunk{
				ChunkID:        doc.DocID + "::" + strconv.Itoa(i),
				DocID:          doc.DocID,
				Tenant:         doc.Tenant,
				Section:        p.Section,
				Text:           p.Text,
				StartChar:      p.StartChar,
				EndChar:        p.EndChar,
				Length:         p.Length,
				Classification: doc.Classification,
				Barriers:       doc.Barriers,
				AsOfTick:       doc.AsOfTick,
			},
			Path: analysis.JoinPath(p.Path),
		}
		pc.Terms, pc.TF = counter.Count(p.Text)
		if hashed {
			// The vector hashes the tokens alone, whatever the analyzer.
			v, err := hashVector(hashembed.Shared(s.Dims), s.Dims, pc.Terms, pc.TF)
			if err != nil {
				return nil, fmt.Errorf("document %q chunk %d: %w", doc.DocID, i, err)
			}
			pc.Vector = v
			pc.NormSq = hashembed.NormSq(pc.Vector)
		}
		if stemmer != nil {
			pc.Terms, pc.TF = stemmer.AppendStems(pc.Terms, pc.TF)
		}
		if s.Fields {
			pc.Terms, pc.TF = s.AppendFieldTerms(pc.Terms, pc.TF, doc.Title, pc.Path, p.Section, counter, stemmer)
		}
		out[i] = pc
	}
	return out, nil
}

// Vectorize gives each chunk of docs (each one document's prepared chunks)
// that has no vector yet its vector under spec, asking reg for them all in
// one call (a provider batches). [Prepare] has already given every chunk its
// hashing vector from the counts it made, so under hashing Vectorize finds
// nothing to do unless the chunks were prepared under another model (a
// tenant re-embedding to hashing); there reg's built-in hashing gives the
// same vectors from the texts. A model's vectors come quantized
// (embed.Quantize), so every component is within ±embed.QuantMax, far
// inside the exact float32 range. On error no chunk is changed.
func Vectorize(ctx context.Context, reg *embed.Registry, spec embed.Spec, docs ...[]PreparedChunk) error {
	var texts []string
	for _, d := range docs {
		for i := range d {
			if d[i].Vector == nil {
				texts = append(texts, d[i].Chunk.Text)
			}
		}
	}
	if len(texts) == 0 {
		return nil
	}
	vs, err := reg.Vectors(ctx, spec, texts, embed.Document)
	if err != nil {
		return err
	}
	k := 0
	for _, d := range docs {
		for i := range d {
			if d[i].Vector == nil {
				d[i].Vector = vs[k]
				d[i].NormSq = hashembed.NormSq(vs[k])
				k++
			}
		}
	}
	return nil
}

// hashVector is hashembed.Vector of a chunk's tokens from its distinct terms
// and their frequencies: integer sums do not depend on their order.
func hashVector(buckets *hashembed.Cache, dims int, terms []string, tf []int32) ([]int32, error) {
	v := make([]int32, dims)
	for j, t := range terms {
		d, sign := buckets.Bucket(t)
		v[d] += sign * tf[j]
	}
	for _, x := range v {
		if x > MaxCount || x < -MaxCount {
			return nil, fmt.Errorf("|%d| > 2^24: %w; use more dims or smaller chunks", x, ErrVectorBound)
		}
	}
	return v, nil
}

// Float32s converts a count vector to float32 for pgvector. Exact, because
// [Prepare] bounds every component by 2^24.
func Float32s(v []int32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
