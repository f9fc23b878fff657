package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// loadChunks validates ids (at most Config.MaxChunkIDs, a 400 naming the
// limit and counted as refused for op, and no duplicates), then reloads them with
// visibility re-checked: any missing or hidden chunk is a 404 that does not
// say which. With digests (one per id, in the same order) it then refuses,
// with a 409 naming them, the chunks whose text or citation is no longer
// the one those digests pin. Visibility comes first, so the 409 is only
// ever about chunks the caller may see.
func (s *Server) loadChunks(r *http.Request, op string, id Identity, ids, digests []string) ([]cordontype.Chunk, int64, error) {
	if ids == nil {
		return nil, 0, errf(http.StatusBadRequest, "bad_request", "chunk_ids is required (a list, in rank order)")
	}
	if len(ids) > s.cfg.MaxChunkIDs {
		s.metrics.refuse(op, reasonChunkIDs)
		logInfo(r.Context()).refused = reasonChunkIDs
		return nil, 0, errf(http.StatusBadRequest, "bad_request", "%d chunk_ids: at most %d, this server's limit on one request (cordon serve --max-chunk-ids)", len(ids), s.cfg.MaxChunkIDs)
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
	chunks, version, err := s.loadChunks(r, opGround, id, req.ChunkIDs, req.Digests)
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
	if _, err := s.audit(r, id, audit.Record{Op: "ground", Query: query, Policy: string(policyText),
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
	chunks, version, err := s.loadChunks(r, opAssemble, id, req.ChunkIDs, req.Digests)
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
	if _, err := s.audit(r, id, audit.Record{Op: "assemble", Query: *req.Question, Policy: string(policyText),
		ChunkIDs: res.Included, Degraded: []string{}, IndexVersion: version}); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"included": res.Included, "dropped": res.Dropped, "total_tokens": res.TotalTokens,
		"stable_prefix_tokens": res.StablePrefixTokens, "cacheable_fraction": res.CacheableFraction, "text": res.Text})
}
