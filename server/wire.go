package server

import (
	"encoding/json"

	"github.com/cordon-rag/cordon/retrieval"
)

// The API's request and response bodies; openapi.yaml documents them
// (TestOpenAPIMatchesBodies holds the two to the same fields).

// CreateTenantRequest is the body of POST /v1/tenants. BM25Statistics is
// the statistics scope, "entitled" (the default) or "tenant".
type CreateTenantRequest struct {
	Tenant         *string `json:"tenant"`
	BM25Statistics *string `json:"bm25_statistics"`
	// Analyzer is "english" (the default) or "exact".
	Analyzer *string `json:"analyzer"`
	// Fields indexes each chunk's title and headings (its section path) as field terms
	// (default true).
	Fields *bool `json:"fields"`
}

// UpdateTenantRequest is the body of PATCH /v1/tenants/{tenant}: the
// settings that can change on a live tenant.
type UpdateTenantRequest struct {
	BM25Statistics *string `json:"bm25_statistics"`
}

// DocumentRequest is the body of PUT .../documents/{doc_id}. In a batch line
// DocID is required; in a PUT it comes from the path and must be absent.
type DocumentRequest struct {
	DocID          *string  `json:"doc_id,omitempty"`
	Text           *string  `json:"text"`
	Classification *string  `json:"classification"`
	Barriers       []string `json:"barriers"`
	AsOfTick       *int64   `json:"as_of_tick"`
	Title          string   `json:"title"`
	// Format is how Text is written: "text" (the default) or "markdown",
	// stored as given, or "html", converted first (package htmltext); an
	// HTML document given no title takes its <title>'s.
	Format *string `json:"format"`
	// Metadata stays raw until its size is checked (MaxMetadataBytes).
	Metadata json.RawMessage `json:"metadata"`
}

// ChunkJSON is a stored chunk as the API reports it.
type ChunkJSON struct {
	ChunkID   string `json:"chunk_id"`
	Section   string `json:"section"`
	StartChar int    `json:"start_char"`
	EndChar   int    `json:"end_char"`
	Length    int    `json:"length"`
}

// BatchOutcome is one NDJSON line's result.
type BatchOutcome struct {
	Line   int       `json:"line"`
	DocID  string    `json:"doc_id,omitempty"`
	Status int       `json:"status"`
	Chunks int       `json:"chunks,omitempty"`
	Error  *apiError `json:"error,omitempty"`
}

// RetrieveRequest is the body of POST .../retrieve.
type RetrieveRequest struct {
	Query   *string                `json:"query"`
	NowTick *int64                 `json:"now_tick"`
	Policy  *retrieval.PolicyPatch `json:"policy"`
}

// ResultJSON is one retrieved chunk with its citation span, scores, digest
// and text.
type ResultJSON = retrieval.ScoredJSON

// RetrieveResponse is the answer of POST .../retrieve. The funnel counters
// and the index version are only filled in for the auditor role: for anyone
// else they would reveal that hidden content exists (or changed).
type RetrieveResponse struct {
	Results               []ResultJSON `json:"results"`
	Degraded              []string     `json:"degraded"`
	NowTick               int64        `json:"now_tick"`
	Considered            *int         `json:"considered,omitempty"`
	ExcludedByEntitlement *int         `json:"excluded_by_entitlement,omitempty"`
	ExcludedByFreshness   *int         `json:"excluded_by_freshness,omitempty"`
	IndexVersion          *int64       `json:"index_version,omitempty"`
	// Expansion lists the terms query expansion added, best first.
	Expansion []string `json:"expansion,omitempty"`
}

// GroundRequest is the body of POST .../ground: claims, or an answer to split
// into claims, checked against the chunks named by chunk_ids (rank order).
// Digests, when given, are the retrieve digests of those chunks, one per id.
type GroundRequest struct {
	Claims    []string `json:"claims"`
	Answer    *string  `json:"answer"`
	ChunkIDs  []string `json:"chunk_ids"`
	Digests   []string `json:"digests"`
	Threshold *float64 `json:"threshold"`
}

// ClaimJSON is one claim's verdict.
type ClaimJSON struct {
	Claim     string  `json:"claim"`
	Supported bool    `json:"supported"`
	ChunkID   *string `json:"chunk_id"`
	DocID     *string `json:"doc_id,omitempty"`
	Section   *string `json:"section,omitempty"`
	StartChar *int    `json:"start_char,omitempty"`
	EndChar   *int    `json:"end_char,omitempty"`
	Overlap   float64 `json:"overlap"`
}

// AssembleRequest is the body of POST .../assemble; Digests as in
// [GroundRequest].
type AssembleRequest struct {
	Question     *string  `json:"question"`
	ChunkIDs     []string `json:"chunk_ids"`
	Digests      []string `json:"digests"`
	BudgetTokens *int     `json:"budget_tokens"`
	Instructions string   `json:"instructions"`
	ToolSchema   string   `json:"tool_schema"`
	Policy       string   `json:"policy"`
}
