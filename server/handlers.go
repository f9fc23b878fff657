package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

// CreateTenantRequest is the body of POST /v1/tenants. BM25Statistics is
// the statistics scope, "entitled" (the default) or "tenant".
type CreateTenantRequest struct {
	Tenant         *string `json:"tenant"`
	BM25Statistics *string `json:"bm25_statistics"`
}

// UpdateTenantRequest is the body of PATCH /v1/tenants/{tenant}: the
// settings that can change on a live tenant.
type UpdateTenantRequest struct {
	BM25Statistics *string `json:"bm25_statistics"`
}

// parseScope validates an optional bm25_statistics value; nil gives the
// default.
func parseScope(v *string) (bm25.Scope, error) {
	if v == nil {
		return bm25.DefaultScope, nil
	}
	scope, err := bm25.ParseScope(*v)
	if err != nil {
		return "", errf(http.StatusBadRequest, "bad_request", "%s", err.Error())
	}
	return scope, nil
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request, id Identity) {
	var req CreateTenantRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	if req.Tenant == nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "tenant is required"))
		return
	}
	if err := cordontype.ValidateTenant(*req.Tenant); err != nil {
		s.fail(w, r, err)
		return
	}
	settings := index.DefaultSettings()
	scope, err := parseScope(req.BM25Statistics)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	settings.Statistics = scope
	created, err := s.store.CreateTenant(r.Context(), *req.Tenant, settings)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"tenant": *req.Tenant, "created": created})
}

// updateTenant changes a tenant's BM25 statistics scope. An unknown tenant
// is 404.
func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request, id Identity) {
	tenant := r.PathValue("tenant")
	if err := cordontype.ValidateTenant(tenant); err != nil {
		s.fail(w, r, err)
		return
	}
	var req UpdateTenantRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	if req.BM25Statistics == nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "nothing to change: give bm25_statistics"))
		return
	}
	scope, err := parseScope(req.BM25Statistics)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	found, err := s.store.SetStatistics(r.Context(), tenant, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !found {
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "tenant %q not found", tenant))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "bm25_statistics": scope})
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
	// Metadata stays raw until its size is checked (MaxMetadataBytes).
	Metadata json.RawMessage `json:"metadata"`
}

func (d *DocumentRequest) document(tenant, docID string) (cordontype.Document, error) {
	bad := func(format string, a ...any) (cordontype.Document, error) {
		return cordontype.Document{}, errf(http.StatusBadRequest, "bad_request", format, a...)
	}
	if d.Text == nil {
		return bad("text is required")
	}
	if d.Classification == nil {
		return bad("classification is required: one of public, internal, confidential, restricted")
	}
	cl, err := cordontype.ParseClassification(*d.Classification)
	if err != nil {
		return cordontype.Document{}, err
	}
	if err := noNUL(map[string]string{"text": *d.Text, "title": d.Title}); err != nil {
		return bad("%s", err.Error())
	}
	if len(d.Metadata) > MaxMetadataBytes {
		return bad("metadata is %d bytes of JSON; the limit is %d (keep large content in the document text)", len(d.Metadata), MaxMetadataBytes)
	}
	var meta map[string]any
	if len(d.Metadata) > 0 && string(d.Metadata) != "null" {
		if err := json.Unmarshal(d.Metadata, &meta); err != nil {
			return bad("metadata must be a JSON object")
		}
	}
	if metadataNUL(meta) {
		return bad("metadata contains U+0000 (NUL), which Cordon cannot store")
	}
	doc := cordontype.Document{
		Tenant: tenant, DocID: docID, Text: *d.Text, Classification: cl, Barriers: d.Barriers,
		Title: d.Title, Metadata: meta,
	}
	if d.AsOfTick != nil {
		doc.AsOfTick = *d.AsOfTick
	}
	if err := doc.Validate(); err != nil {
		return cordontype.Document{}, err
	}
	return doc, nil
}

// ChunkJSON is a stored chunk as the API reports it.
type ChunkJSON struct {
	ChunkID   string `json:"chunk_id"`
	Section   string `json:"section"`
	StartChar int    `json:"start_char"`
	EndChar   int    `json:"end_char"`
	Length    int    `json:"length"`
}

func chunksJSON(cs []cordontype.Chunk) []ChunkJSON {
	out := make([]ChunkJSON, len(cs))
	for i, c := range cs {
		out[i] = ChunkJSON{ChunkID: c.ChunkID, Section: c.Section, StartChar: c.StartChar, EndChar: c.EndChar, Length: c.Length}
	}
	return out
}

func (s *Server) putDocument(w http.ResponseWriter, r *http.Request, id Identity) {
	docID := r.PathValue("doc_id")
	if err := cordontype.ValidateDocID(docID); err != nil {
		s.fail(w, r, err)
		return
	}
	var req DocumentRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxDocumentBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	if req.DocID != nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "doc_id comes from the path; leave it out of the body"))
		return
	}
	doc, err := req.document(id.Tenant, docID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chunks, err := s.store.Put(r.Context(), doc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"doc_id": docID, "chunks": chunksJSON(chunks)})
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request, id Identity) {
	docID := r.PathValue("doc_id")
	if err := cordontype.ValidateDocID(docID); err != nil {
		s.fail(w, r, err)
		return
	}
	deleted, err := s.store.Delete(r.Context(), id.Tenant, docID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !deleted {
		s.fail(w, r, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
}

// BatchOutcome is one NDJSON line's result.
type BatchOutcome struct {
	Line   int       `json:"line"`
	DocID  string    `json:"doc_id,omitempty"`
	Status int       `json:"status"`
	Chunks int       `json:"chunks,omitempty"`
	Error  *apiError `json:"error,omitempty"`
}

// batchDocuments puts NDJSON documents one transaction each; a line is at
// most MaxDocumentBytes.
func (s *Server) batchDocuments(w http.ResponseWriter, r *http.Request, id Identity) {
	if e := mediaOK(r, "application/x-ndjson", "application/ndjson", "application/jsonl"); e != nil {
		s.fail(w, r, e)
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBatchBytes)
	br := bufio.NewReaderSize(body, 64<<10)
	var results []BatchOutcome
	ok, failed := 0, 0
	for line := 1; ; line++ {
		raw, err := readLine(br, s.cfg.MaxDocumentBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				s.fail(w, r, errf(http.StatusRequestEntityTooLarge, "payload_too_large",
					"the batch is over the limit of %d bytes (lines before %d were processed; resend from there)", s.cfg.MaxBatchBytes, line))
				return
			}
			if errors.Is(err, errLineTooLong) {
				results = append(results, BatchOutcome{Line: line, Status: http.StatusRequestEntityTooLarge,
					Error: errf(http.StatusRequestEntityTooLarge, "payload_too_large", "line %d is over the document limit of %d bytes", line, s.cfg.MaxDocumentBytes)})
				failed++
				// The rest of the body cannot be framed reliably.
				break
			}
			s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "reading the request body failed"))
			return
		}
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) > 0 {
			out := s.batchLine(r, id, line, trimmed)
			if out.Error != nil {
				failed++
			} else {
				ok++
			}
			results = append(results, out)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if r.Context().Err() != nil {
			s.fail(w, r, r.Context().Err())
			return
		}
	}
	if results == nil {
		results = []BatchOutcome{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results, "succeeded": ok, "failed": failed})
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its '\n') of at most limit bytes.
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if int64(len(buf)) > limit+1 {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return buf, err
		}
		return buf[:len(buf)-1], nil
	}
}

func (s *Server) batchLine(r *http.Request, id Identity, line int, raw []byte) BatchOutcome {
	out := BatchOutcome{Line: line}
	failWith := func(err error) BatchOutcome {
		ae := toAPIError(err)
		out.Status, out.Error = ae.Status, ae
		return out
	}
	var req DocumentRequest
	if err := DecodeStrict(raw, &req); err != nil {
		return failWith(errf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
	}
	if req.DocID == nil {
		return failWith(errf(http.StatusBadRequest, "bad_request", "doc_id is required in a batch line"))
	}
	out.DocID = *req.DocID
	if err := cordontype.ValidateDocID(*req.DocID); err != nil {
		out.DocID = ""
		return failWith(err)
	}
	doc, err := req.document(id.Tenant, *req.DocID)
	if err != nil {
		return failWith(err)
	}
	chunks, err := s.store.Put(r.Context(), doc)
	if err != nil {
		logInfo(r.Context()).err = err
		return failWith(err)
	}
	out.Status, out.Chunks = http.StatusOK, len(chunks)
	return out
}

// maxPolicyInt bounds top_n, rerank_depth, limit, prf_docs and prf_terms so
// a request cannot ask the database for an unbounded result.
const maxPolicyInt = 10000

// requestPolicy is a request's policy over the service profile
// ([retrieval.ServicePolicy]), validated and within maxPolicyInt.
func requestPolicy(p *retrieval.PolicyPatch) (retrieval.Policy, error) {
	pol := p.Apply(retrieval.ServicePolicy())
	if err := pol.Validate(); err != nil {
		return pol, err
	}
	// In a fixed order, so the same request always names the same field.
	for _, f := range []struct {
		name string
		v    int
	}{{"top_n", pol.TopN}, {"rerank_depth", pol.RerankDepth}, {"limit", pol.Limit}, {"prf_docs", pol.PRFDocs}, {"prf_terms", pol.PRFTerms}} {
		if f.v > maxPolicyInt {
			return pol, errf(http.StatusBadRequest, "bad_request", "%s %d: at most %d", f.name, f.v, maxPolicyInt)
		}
	}
	return pol, nil
}

// RetrieveRequest is the body of POST .../retrieve.
type RetrieveRequest struct {
	Query   *string                `json:"query"`
	NowTick *int64                 `json:"now_tick"`
	Policy  *retrieval.PolicyPatch `json:"policy"`
}

// ResultJSON is one retrieved chunk with its citation span and scores.
// Digest pins its text and citation ([cordontype.Chunk.Digest]); ground and
// assemble take it back to refuse a chunk that has changed since.
type ResultJSON struct {
	ChunkID    string   `json:"chunk_id"`
	Digest     string   `json:"digest"`
	DocID      string   `json:"doc_id"`
	Section    string   `json:"section"`
	Text       string   `json:"text"`
	StartChar  int      `json:"start_char"`
	EndChar    int      `json:"end_char"`
	BM25       *float64 `json:"bm25"`
	BM25Rank   *int     `json:"bm25_rank"`
	Cosine     *float64 `json:"cosine"`
	CosineRank *int     `json:"cosine_rank"`
	Fused      float64  `json:"fused"`
	Rerank     *float64 `json:"rerank"`
}

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

// versioned adapts the store's RankVersion to retrieval.Store, keeping the
// version of the snapshot that answered.
type versioned struct {
	st      *postgres.Store
	version int64
}

func (v *versioned) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	rk, ver, err := v.st.RankVersion(ctx, req)
	v.version = ver
	return rk, err
}

// IDF passes on to the store: it ranks nothing, so the version stays the
// one of the last ranking.
func (v *versioned) IDF(ctx context.Context, p cordontype.Principal, terms []string) ([]float64, error) {
	return v.st.IDF(ctx, p, terms)
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request, id Identity) {
	var req RetrieveRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	query := ""
	if req.Query != nil {
		query = *req.Query
	}
	if err := noNUL(map[string]string{"query": query}); err != nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
		return
	}
	pol, err := requestPolicy(req.Policy)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.cfg.Now().Unix()
	if req.NowTick != nil {
		now = *req.NowTick
	}
	vs := &versioned{st: s.store}
	res, err := retrieval.New(vs).Retrieve(r.Context(), retrieval.Query{Principal: id.Principal(), Text: query, NowTick: now, Policy: pol})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.retrieval(id.Tenant, res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness, res.Degraded)
	out := RetrieveResponse{Results: make([]ResultJSON, len(res.Chunks)), Degraded: res.Degraded, NowTick: now, Expansion: res.Expansion}
	ids := make([]string, len(res.Chunks))
	for i, c := range res.Chunks {
		ids[i] = c.Chunk.ChunkID
		out.Results[i] = ResultJSON{ChunkID: c.Chunk.ChunkID, Digest: c.Chunk.Digest(), DocID: c.Chunk.DocID, Section: c.Chunk.Section, Text: c.Chunk.Text,
			StartChar: c.Chunk.StartChar, EndChar: c.Chunk.EndChar, BM25: c.BM25, BM25Rank: c.BM25Rank,
			Cosine: c.Cosine, CosineRank: c.CosineRank, Fused: c.Fused, Rerank: c.Rerank}
	}
	effective := retrieval.PolicyPatch{MaxStaleTicks: pol.MaxStaleTicks, EnableRerank: &pol.EnableRerank, MinScore: &pol.MinScore,
		TopN: &pol.TopN, RerankDepth: &pol.RerankDepth, RRFK: &pol.RRFK, Limit: &pol.Limit}
	if pol.PRFDocs > 0 {
		// Expansion shapes the results: the audit record says it was on.
		effective.PRFDocs, effective.PRFTerms, effective.PRFWeight = &pol.PRFDocs, &pol.PRFTerms, &pol.PRFWeight
	}
	policyText, _ := json.Marshal(struct {
		NowTick int64 `json:"now_tick"`
		retrieval.PolicyPatch
	}{now, effective})
	if err := s.audit(r, id, postgres.AuditRecord{
		Op: "retrieve", Query: query, Policy: string(policyText), ChunkIDs: ids,
		Considered: int64(res.Considered), ExcludedByEntitlement: int64(res.ExcludedByEntitlement),
		ExcludedByFreshness: int64(res.ExcludedByFreshness), Degraded: res.Degraded, IndexVersion: vs.version,
	}); err != nil {
		s.fail(w, r, err)
		return
	}
	if id.Has(RoleAuditor) {
		out.Considered, out.ExcludedByEntitlement, out.ExcludedByFreshness = &res.Considered, &res.ExcludedByEntitlement, &res.ExcludedByFreshness
		out.IndexVersion = &vs.version
	}
	writeJSON(w, http.StatusOK, out)
}

// audit appends the request's audit record; a request whose record cannot
// be written fails (a bank would rather refuse than answer unaudited): with
// a 400 when the database refused a value of the request, else with a 503
// (whatever failed, a trigger or constraint included, is the service's
// trouble, not the caller's, and the request may be retried).
func (s *Server) audit(r *http.Request, id Identity, rec postgres.AuditRecord) error {
	rec.Sub, rec.RequestID = id.Sub, requestID(r.Context())
	if _, err := s.store.AppendAudit(r.Context(), id.Tenant, rec); err != nil {
		if errors.Is(err, postgres.ErrTenantNotFound) {
			// Nothing to audit against: the tenant does not exist, and a
			// retrieval over it found nothing.
			return nil
		}
		s.metrics.auditFailures.Inc()
		if toAPIError(err).Status == http.StatusBadRequest {
			return fmt.Errorf("audit: %w", err)
		}
		return fmt.Errorf("audit: %w: %w", errAuditUnavailable, err)
	}
	return nil
}

// maxChunkIDs bounds chunk_ids in ground and assemble.
const maxChunkIDs = postgres.MaxLoadChunks

// loadChunks validates and de-duplicates-checks ids, then reloads them with
// visibility re-checked: any missing or hidden chunk is a 404 that does not
// say which. With digests (one per id, in the same order) it then refuses,
// with a 409 naming them, the chunks whose text or citation is no longer
// the one those digests pin. Visibility comes first, so the 409 is only
// ever about chunks the caller may see.
func (s *Server) loadChunks(r *http.Request, id Identity, ids, digests []string) ([]cordontype.Chunk, int64, error) {
	if ids == nil {
		return nil, 0, errf(http.StatusBadRequest, "bad_request", "chunk_ids is required (a list, in rank order)")
	}
	if len(ids) > maxChunkIDs {
		return nil, 0, errf(http.StatusBadRequest, "bad_request", "%d chunk_ids: at most %d", len(ids), maxChunkIDs)
	}
	seen := make(map[string]struct{}, len(ids))
	for _, c := range ids {
		if _, dup := seen[c]; dup {
			return nil, 0, errf(http.StatusBadRequest, "bad_request", "chunk id %q appears twice in chunk_ids", c)
		}
		seen[c] = struct{}{}
		if err := noNUL(map[string]string{"chunk id": c}); err != nil {
			return nil, 0, errf(http.StatusBadRequest, "bad_request", "%s", err.Error())
		}
	}
	if err := checkDigests(ids, digests); err != nil {
		return nil, 0, err
	}
	chunks, version, err := s.store.LoadChunks(r.Context(), id.Principal(), ids)
	if err != nil {
		return nil, 0, err
	}
	if changed := changedChunks(chunks, digests); len(changed) > 0 {
		return nil, 0, errChunkChanged(changed)
	}
	return chunks, version, nil
}

// checkDigests checks the form of a request's digests: absent (nil), or one
// well-formed digest per chunk id.
func checkDigests(ids, digests []string) error {
	if digests == nil {
		return nil
	}
	if len(digests) != len(ids) {
		return errf(http.StatusBadRequest, "bad_request",
			"%d digests for %d chunk_ids: give one digest per chunk id, in the same order, or leave digests out", len(digests), len(ids))
	}
	for i, d := range digests {
		if err := cordontype.ValidateDigest(d); err != nil {
			return errf(http.StatusBadRequest, "bad_request", "digests[%d]: %s", i, err.Error())
		}
	}
	return nil
}

// changedChunks lists, in order, the ids of the chunks whose current digest
// differs from the one given at the same position. Without digests nothing
// is checked.
func changedChunks(chunks []cordontype.Chunk, digests []string) []string {
	if digests == nil {
		return nil
	}
	var changed []string
	for i := range chunks {
		if chunks[i].Digest() != digests[i] {
			changed = append(changed, chunks[i].ChunkID)
		}
	}
	return changed
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

func (s *Server) ground(w http.ResponseWriter, r *http.Request, id Identity) {
	var req GroundRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	if (req.Claims == nil) == (req.Answer == nil) {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "give exactly one of claims (a list) or answer (a text)"))
		return
	}
	claims := req.Claims
	query := strings.Join(req.Claims, "\n")
	if req.Answer != nil {
		claims = grounding.SplitClaims(*req.Answer)
		query = *req.Answer
	}
	if err := noNUL(map[string]string{"claims": query}); err != nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
		return
	}
	threshold := grounding.DefaultThreshold
	if req.Threshold != nil {
		threshold = *req.Threshold
	}
	if !(threshold >= 0 && threshold <= 1) {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "threshold %v must be in [0, 1]", threshold))
		return
	}
	chunks, version, err := s.loadChunks(r, id, req.ChunkIDs, req.Digests)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := grounding.Check(claims, chunks, threshold)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	policyText, _ := json.Marshal(map[string]float64{"threshold": threshold})
	if err := s.audit(r, id, postgres.AuditRecord{Op: "ground", Query: query, Policy: string(policyText),
		ChunkIDs: req.ChunkIDs, Degraded: []string{}, IndexVersion: version}); err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]ClaimJSON, len(rep.Claims))
	for i, c := range rep.Claims {
		out[i] = ClaimJSON{Claim: c.Claim, Supported: c.Supported, Overlap: c.Overlap}
		if ct := c.Citation; ct != nil {
			out[i].ChunkID, out[i].DocID, out[i].Section = &ct.ChunkID, &ct.DocID, &ct.Section
			out[i].StartChar, out[i].EndChar = &ct.StartChar, &ct.EndChar
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"claims": out, "coverage": rep.Coverage, "is_grounded": rep.IsGrounded})
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

func (s *Server) assemble(w http.ResponseWriter, r *http.Request, id Identity) {
	var req AssembleRequest
	if e := decodeJSONRequest(w, r, s.cfg.MaxBodyBytes, &req); e != nil {
		s.fail(w, r, e)
		return
	}
	if req.Question == nil || req.BudgetTokens == nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "question and budget_tokens are required"))
		return
	}
	if err := noNUL(map[string]string{"question": *req.Question, "instructions": req.Instructions,
		"tool_schema": req.ToolSchema, "policy": req.Policy}); err != nil {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
		return
	}
	if *req.BudgetTokens < 1 {
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "budget_tokens %d must be >= 1", *req.BudgetTokens))
		return
	}
	chunks, version, err := s.loadChunks(r, id, req.ChunkIDs, req.Digests)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := assemble.Context(assemble.Request{Question: *req.Question, Retrieved: chunks, BudgetTokens: *req.BudgetTokens,
		Instructions: req.Instructions, ToolSchema: req.ToolSchema, Policy: req.Policy})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	policyText, _ := json.Marshal(map[string]any{"budget_tokens": *req.BudgetTokens, "instructions": req.Instructions,
		"tool_schema": req.ToolSchema, "policy": req.Policy})
	if err := s.audit(r, id, postgres.AuditRecord{Op: "assemble", Query: *req.Question, Policy: string(policyText),
		ChunkIDs: res.Included, Degraded: []string{}, IndexVersion: version}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"included": res.Included, "dropped": res.Dropped, "total_tokens": res.TotalTokens,
		"stable_prefix_tokens": res.StablePrefixTokens, "cacheable_fraction": res.CacheableFraction, "text": res.Text})
}
