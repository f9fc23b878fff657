package replay

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/retrieval"
)

// Step inputs. Pointers distinguish absent from zero where it matters.

type documentIn struct {
	Tenant         *string                    `json:"tenant"`
	DocID          *string                    `json:"doc_id"`
	Text           *string                    `json:"text"`
	Classification *cordontype.Classification `json:"classification"`
	Barriers       []string                   `json:"barriers"`
	AsOfTick       Int                        `json:"as_of_tick"`
	Title          string                     `json:"title"`
	Metadata       map[string]any             `json:"metadata"`
}

type putIn struct {
	Op       string      `json:"op"`
	Document *documentIn `json:"document"`
}

type deleteIn struct {
	Op     string `json:"op"`
	Tenant string `json:"tenant"`
	DocID  string `json:"doc_id"`
}

type principalIn struct {
	Tenant    *string                    `json:"tenant"`
	Clearance *cordontype.Classification `json:"clearance"`
	Barriers  []string                   `json:"barriers"`
}

type retrieveIn struct {
	Op        string                 `json:"op"`
	Principal *principalIn           `json:"principal"`
	Query     string                 `json:"query"`
	NowTick   Int                    `json:"now_tick"`
	Policy    *retrieval.PolicyPatch `json:"policy"`
}

type groundIn struct {
	Op        string   `json:"op"`
	Claims    []string `json:"claims"`
	Answer    *string  `json:"answer"`
	Threshold Float    `json:"threshold"`
}

type assembleIn struct {
	Op           string  `json:"op"`
	Question     *string `json:"question"`
	BudgetTokens Int     `json:"budget_tokens"`
	Instructions string  `json:"instructions"`
	ToolSchema   string  `json:"tool_schema"`
	Policy       string  `json:"policy"`
}

// Step outputs, fields in SPEC section 9's order.

type putChunkOut struct {
	ChunkID   string `json:"chunk_id"`
	Section   string `json:"section"`
	StartChar int    `json:"start_char"`
	EndChar   int    `json:"end_char"`
	Length    int    `json:"length"`
}

type putOut struct {
	Op     string        `json:"op"`
	DocID  string        `json:"doc_id"`
	Chunks []putChunkOut `json:"chunks"`
}

type deleteOut struct {
	Op      string `json:"op"`
	DocID   string `json:"doc_id"`
	Deleted bool   `json:"deleted"`
}

type retrieveOut struct {
	Op                    string                 `json:"op"`
	Results               []retrieval.ScoredJSON `json:"results"`
	Considered            int                    `json:"considered"`
	ExcludedByEntitlement int                    `json:"excluded_by_entitlement"`
	ExcludedByFreshness   int                    `json:"excluded_by_freshness"`
	Degraded              []string               `json:"degraded"`
}

type claimOut struct {
	Claim     string  `json:"claim"`
	Supported bool    `json:"supported"`
	ChunkID   *string `json:"chunk_id"`
	Overlap   float64 `json:"overlap"`
}

type groundOut struct {
	Op         string     `json:"op"`
	Claims     []claimOut `json:"claims"`
	Coverage   float64    `json:"coverage"`
	IsGrounded bool       `json:"is_grounded"`
}

type assembleOut struct {
	Op                 string   `json:"op"`
	Included           []string `json:"included"`
	Dropped            []string `json:"dropped"`
	TotalTokens        int      `json:"total_tokens"`
	StablePrefixTokens int      `json:"stable_prefix_tokens"`
	CacheableFraction  float64  `json:"cacheable_fraction"`
	Text               string   `json:"text"`
}

func required(name string) error { return fmt.Errorf("%q is required", name) }

func (r *runner) put(ctx context.Context, raw []byte) (any, error) {
	var in putIn
	if err := decodeStrict(raw, &in); err != nil {
		return nil, err
	}
	d := in.Document
	if d == nil {
		return nil, required("document")
	}
	switch {
	case d.Tenant == nil:
		return nil, required("document.tenant")
	case d.DocID == nil:
		return nil, required("document.doc_id")
	case d.Text == nil:
		return nil, required("document.text")
	case d.Classification == nil:
		return nil, required("document.classification")
	}
	chunks, err := r.store.Put(ctx, cordontype.Document{
		Tenant:         *d.Tenant,
		DocID:          *d.DocID,
		Text:           *d.Text,
		Classification: *d.Classification,
		Barriers:       d.Barriers,
		AsOfTick:       d.AsOfTick.V,
		Title:          d.Title,
		Metadata:       d.Metadata,
	})
	if err != nil {
		return nil, err
	}
	out := putOut{Op: "put", DocID: *d.DocID, Chunks: make([]putChunkOut, len(chunks))}
	for i, c := range chunks {
		out.Chunks[i] = putChunkOut{ChunkID: c.ChunkID, Section: c.Section, StartChar: c.StartChar, EndChar: c.EndChar, Length: c.Length}
	}
	return out, nil
}

func (r *runner) delete(ctx context.Context, raw []byte) (any, error) {
	var in deleteIn
	if err := decodeStrict(raw, &in); err != nil {
		return nil, err
	}
	switch {
	case in.Tenant == "":
		return nil, required("tenant")
	case in.DocID == "":
		return nil, required("doc_id")
	}
	ok, err := r.store.Delete(ctx, in.Tenant, in.DocID)
	if err != nil {
		return nil, err
	}
	return deleteOut{Op: "delete", DocID: in.DocID, Deleted: ok}, nil
}

// ParsePolicy reads a policy object in SPEC section 9's shape over base:
// fields absent (or null) keep base's values. It decodes as strictly as a
// replay step (unknown or case-variant keys, duplicates and non-integer
// integers are errors) and validates the result.
func ParsePolicy(raw []byte, base retrieval.Policy) (retrieval.Policy, error) {
	return ParsePolicyFor(raw, base, retrieval.Policy.Validate)
}

// ParsePolicyFor is [ParsePolicy] validating with validate instead, e.g.
// [retrieval.Retriever.Validate] of a retriever with a model reranker.
func ParsePolicyFor(raw []byte, base retrieval.Policy, validate func(retrieval.Policy) error) (retrieval.Policy, error) {
	var in retrieval.PolicyPatch
	if err := decodeStrict(raw, &in); err != nil {
		return base, err
	}
	pol := in.Apply(base)
	if err := validate(pol); err != nil {
		return base, err
	}
	return pol, nil
}

// clampInt maps an int64 to int, saturating where int is narrower (32-bit
// platforms): a limit or budget beyond math.MaxInt behaves like math.MaxInt.
// Values below 1 are left for validation to reject.
func clampInt(v int64) int {
	if v > math.MaxInt {
		return math.MaxInt
	}
	if v < math.MinInt {
		return math.MinInt
	}
	return int(v)
}

func (r *runner) retrieve(ctx context.Context, raw []byte) (any, error) {
	var in retrieveIn
	if err := decodeStrict(raw, &in); err != nil {
		return nil, err
	}
	if in.Principal == nil {
		return nil, required("principal")
	}
	if in.Principal.Tenant == nil {
		return nil, required("principal.tenant")
	}
	if in.Principal.Clearance == nil {
		return nil, required("principal.clearance")
	}
	res, err := r.retriever.Retrieve(ctx, retrieval.Query{
		Principal: cordontype.Principal{Tenant: *in.Principal.Tenant, Clearance: *in.Principal.Clearance, Barriers: in.Principal.Barriers},
		Text:      in.Query,
		NowTick:   in.NowTick.V,
		Policy:    in.Policy.Apply(retrieval.DefaultPolicy()),
	})
	if err != nil {
		return nil, err
	}
	out := retrieveOut{
		Op:                    "retrieve",
		Results:               make([]retrieval.ScoredJSON, len(res.Chunks)),
		Considered:            res.Considered,
		ExcludedByEntitlement: res.ExcludedByEntitlement,
		ExcludedByFreshness:   res.ExcludedByFreshness,
		Degraded:              res.Degraded,
	}
	r.last = make([]cordontype.Chunk, len(res.Chunks))
	for i, s := range res.Chunks {
		r.last[i] = s.Chunk
		out.Results[i] = s.JSON(false)
	}
	return out, nil
}

func (r *runner) ground(raw []byte) (any, error) {
	var in groundIn
	if err := decodeStrict(raw, &in); err != nil {
		return nil, err
	}
	claims := in.Claims
	switch {
	case in.Answer != nil && in.Claims != nil:
		return nil, errors.New(`give "claims" or "answer", not both`)
	case in.Answer != nil:
		claims = grounding.SplitClaims(*in.Answer)
	case in.Claims == nil:
		return nil, required("claims")
	}
	threshold := grounding.DefaultThreshold
	if in.Threshold.Set {
		threshold = in.Threshold.V
	}
	rep, err := grounding.Check(claims, r.last, threshold)
	if err != nil {
		return nil, err
	}
	out := groundOut{Op: "ground", Claims: make([]claimOut, len(rep.Claims)), Coverage: rep.Coverage, IsGrounded: rep.IsGrounded}
	for i, c := range rep.Claims {
		co := claimOut{Claim: c.Claim, Supported: c.Supported, Overlap: c.Overlap}
		if c.Citation != nil {
			id := c.Citation.ChunkID
			co.ChunkID = &id
		}
		out.Claims[i] = co
	}
	return out, nil
}

func (r *runner) assemble(raw []byte) (any, error) {
	var in assembleIn
	if err := decodeStrict(raw, &in); err != nil {
		return nil, err
	}
	if in.Question == nil {
		return nil, required("question")
	}
	if !in.BudgetTokens.Set {
		return nil, required("budget_tokens")
	}
	if in.BudgetTokens.V < 1 {
		return nil, fmt.Errorf("budget_tokens %d must be >= 1", in.BudgetTokens.V)
	}
	res, err := assemble.Context(assemble.Request{
		Question:     *in.Question,
		Retrieved:    r.last,
		BudgetTokens: clampInt(in.BudgetTokens.V),
		Instructions: in.Instructions,
		ToolSchema:   in.ToolSchema,
		Policy:       in.Policy,
	})
	if err != nil {
		return nil, err
	}
	return assembleOut{
		Op: "assemble", Included: res.Included, Dropped: res.Dropped, TotalTokens: res.TotalTokens,
		StablePrefixTokens: res.StablePrefixTokens, CacheableFraction: res.CacheableFraction, Text: res.Text,
	}, nil
}
