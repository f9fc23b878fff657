package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/internal/jsonstrict"
	"io"
	"slices"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/hashembed"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// Store is what a replay needs: writes and the retriever's ranking.
type Store interface {
	retrieval.Store
	Put(ctx context.Context, doc cordontype.Document) ([]cordontype.Chunk, error)
	Delete(ctx context.Context, tenant, docID string) (bool, error)
}

// OpenFunc opens a store whose tenants use the script's index settings.
type OpenFunc func(ctx context.Context, s index.Settings) (Store, error)

type script struct {
	Config json.RawMessage
	Steps  []json.RawMessage
}

type config struct {
	Dims         Int   `json:"dims"`
	K1           Float `json:"k1"`
	B            Float `json:"b"`
	MaxWords     Int   `json:"max_words"`
	OverlapWords Int   `json:"overlap_words"`
	// BM25Statistics is the statistics scope, "entitled" or "tenant".
	BM25Statistics *string `json:"bm25_statistics"`
	// Model is the dense side's embedding model ("hash" by default); any
	// other model needs a provider (RunWithModels) and dims equal to its
	// vector length.
	Model *string `json:"model"`
	// Analyzer is "english" (the default: tokens and their stem terms) or
	// "exact" (tokens only).
	Analyzer *string `json:"analyzer"`
	// Fields is true (the default: each chunk's title and heading are
	// field terms) or false.
	Fields *bool `json:"fields"`
	// FieldRules names older field rules to index under ("" or absent:
	// the current ones; "fields-title-path-2" or
	// "fields-title-section-1"), as a tenant indexed by an older release
	// keeps them. Only with fields.
	FieldRules *string `json:"field_rules"`
}

// ParseSettings reads a script's config object (nil or null gives defaults).
func ParseSettings(raw json.RawMessage) (index.Settings, error) {
	s := index.DefaultSettings()
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	var c config
	if err := decodeStrict(raw, &c); err != nil {
		return s, err
	}
	if c.Dims.Set {
		if c.Dims.V < 1 || c.Dims.V > hashembed.MaxDims {
			return s, fmt.Errorf("dims %d must be in 1..%d", c.Dims.V, hashembed.MaxDims)
		}
		s.Dims = int(c.Dims.V)
	}
	if c.Model != nil {
		s.Model = *c.Model
	}
	if c.Analyzer != nil {
		if err := analysis.ValidateAnalyzer(*c.Analyzer); err != nil {
			return s, err
		}
		s.Analyzer = *c.Analyzer
	}
	if c.Fields != nil {
		s.Fields = *c.Fields
	}
	if c.FieldRules != nil {
		s.FieldRules = *c.FieldRules
	}
	if c.K1.Set {
		s.BM25.K1 = c.K1.V
	}
	if c.B.Set {
		s.BM25.B = c.B.V
	}
	if c.BM25Statistics != nil {
		scope, err := bm25.ParseScope(*c.BM25Statistics)
		if err != nil {
			return s, err
		}
		s.Statistics = scope
	}
	for _, f := range []struct {
		name string
		in   Int
		out  *int
	}{{"max_words", c.MaxWords, &s.Chunking.MaxWords}, {"overlap_words", c.OverlapWords, &s.Chunking.OverlapWords}} {
		if f.in.Set {
			if f.in.V < 0 || f.in.V > 1<<31 {
				return s, fmt.Errorf("%s %d must be in 0..%d (and overlap_words < max_words)", f.name, f.in.V, 1<<31)
			}
			*f.out = int(f.in.V)
		}
	}
	if err := s.Validate(); err != nil {
		return s, err
	}
	return s, nil
}

// Run parses script, opens a store with its config and writes one JSON line per
// step to w. It fails only when the script cannot be parsed, the store cannot
// be opened, or w fails. A script whose config names a model other than
// hashing needs a store that serves it (memory.NewWithModels, say): the
// store embeds both documents and queries.
func Run(ctx context.Context, data []byte, open OpenFunc, w io.Writer) error {
	// Top-level keys other than "config" and "steps" (a "description", say)
	// are ignored; those two must be spelt exactly.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("%w: %w", ErrScript, jsonstrict.CleanError(err, data, true))
	}
	var sc script
	sc.Config = top["config"]
	if err := json.Unmarshal(top["steps"], &sc.Steps); err != nil || sc.Steps == nil {
		return fmt.Errorf("%w: want a \"steps\" list of step objects", ErrScript)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)

	settings, cfgErr := ParseSettings(sc.Config)
	var r *runner
	if cfgErr == nil {
		st, err := open(ctx, settings)
		if err != nil {
			return fmt.Errorf("open store: %w", err)
		}
		r = &runner{store: st, retriever: retrieval.New(st), bm25: settings.BM25}
	}
	for _, raw := range sc.Steps {
		var out any
		if cfgErr != nil {
			out = errorOut{Op: opOf(raw), Error: "invalid config: " + cfgErr.Error()}
		} else {
			out = r.step(ctx, raw)
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return bw.Flush()
}

type runner struct {
	store     Store
	retriever *retrieval.Retriever
	bm25      bm25.Params
	last      []cordontype.Chunk // chunks of the latest accepted retrieve
}

type errorOut struct {
	Op    any    `json:"op"`
	Error string `json:"error"`
}

// opOf extracts a step's "op" for an error object: the string if there is
// one, else null.
func opOf(raw json.RawMessage) any {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var op string
	if json.Unmarshal(m["op"], &op) != nil {
		return nil
	}
	return op
}

func (r *runner) step(ctx context.Context, raw json.RawMessage) any {
	op := opOf(raw)
	var out any
	var err error
	if !jsonstrict.ValidUTF8(raw) {
		if op == "retrieve" {
			r.last = nil
		}
		return errorOut{Op: op, Error: "step is not valid UTF-8 (or has an unpaired surrogate escape): Cordon never repairs text; fix the encoding at the source"}
	}
	switch op {
	case "put":
		out, err = r.put(ctx, raw)
	case "delete":
		out, err = r.delete(ctx, raw)
	case "retrieve":
		out, err = r.retrieve(ctx, raw)
		if err != nil {
			r.last = nil
		}
	case "ground":
		out, err = r.ground(raw)
	case "assemble":
		out, err = r.assemble(raw)
	case nil:
		err = errors.New(`step has no "op": want one of put, delete, retrieve, ground, assemble`)
	default:
		err = fmt.Errorf("unknown op %q: want one of put, delete, retrieve, ground, assemble", op)
	}
	if err != nil {
		return errorOut{Op: op, Error: err.Error()}
	}
	return out
}

// Tenants returns the valid tenant names a script's steps name (in puts,
// deletes and principals), sorted and without repeats. The CLI uses it to
// reset those tenants before a replay against a database.
func Tenants(data []byte) []string {
	var sc struct {
		Steps []struct {
			Tenant   string `json:"tenant"`
			Document struct {
				Tenant string `json:"tenant"`
			} `json:"document"`
			Principal struct {
				Tenant string `json:"tenant"`
			} `json:"principal"`
		} `json:"steps"`
	}
	_ = json.Unmarshal(data, &sc) // a script that does not parse names nothing
	seen := make(map[string]bool)
	var out []string
	for _, s := range sc.Steps {
		for _, t := range []string{s.Tenant, s.Document.Tenant, s.Principal.Tenant} {
			if cordontype.ValidateTenant(t) == nil && !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}
