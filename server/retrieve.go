package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// newRetriever is the pipeline over the server's store, with the model
// reranker when one is configured; [New] makes it once (a Retriever holds
// no per-request state). The server's policy limits are not the
// retriever's: [Server.checkLimits] applies them to each request.
func (s *Server) newRetriever() *retrieval.Retriever {
	var opts []retrieval.Option
	if s.reranker != nil {
		opts = append(opts, retrieval.WithReranker(s.reranker))
	}
	return retrieval.New(s.store, opts...)
}

// retriever is the pipeline [New] made.
func (s *Server) retriever() *retrieval.Retriever { return s.pipeline }

// rerankBudgetMS is tenant's default rerank_budget_ms: its own budget, else
// the server's, rounded up to whole milliseconds.
func (s *Server) rerankBudgetMS(tenant string) int {
	d, ok := s.cfg.RerankBudgetTenant[tenant]
	if !ok {
		d = s.cfg.RerankBudget
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int(max(1, min(ms, retrieval.MaxRerankBudgetMS)))
}

// requestPolicies are a request's policy over the service profile
// ([retrieval.ServicePolicy], with the tenant's rerank budget and dense
// fallback) for a tenant
// whose embedding model is hashing, and over the same profile with
// [retrieval.ModelDefaults] for one whose model is not. [Server.checkLimits]
// applies the server's limits to them, the retriever validates their ranges.
func (s *Server) requestPolicies(tenant string, p *retrieval.PolicyPatch) (hash, model retrieval.Policy) {
	base := retrieval.ServicePolicy()
	base.RerankBudgetMS = s.rerankBudgetMS(tenant)
	if slices.Contains(s.cfg.DenseFallbackTenants, tenant) {
		base.DenseFallback = retrieval.FallbackLexical
	}
	return p.Apply(base), p.Apply(retrieval.ModelDefaults().Apply(base))
}

// Audit reserve: a retrieve's model reranker call ends this long before
// the request's deadline (a tenth of the request timeout, at least
// auditReserveMin, at most half of it), so a slow model is shed in time for
// the audit append that must follow.
const auditReserveMin = 250 * time.Millisecond

// auditReserve is the time a retrieve keeps for its audit append.
func (s *Server) auditReserve() time.Duration {
	return min(max(s.cfg.RequestTimeout/10, auditReserveMin), s.cfg.RequestTimeout/2)
}

// checkLimits applies the server's cost limits (Config.Limits) to a
// request's policies, as [Server.requestPolicies] makes them: a field over
// its limit is a 400 naming the field, the limit and the flag that sets it.
// The limits protect the service, so they are applied here, when the
// request is read, and nowhere else: the retriever validates the ranges,
// and replay scripts keep SPEC section 9's. A request with a field over
// its limit is refused for it before any range is checked, and before it
// takes one of its tenant's retrieve slots.
func (s *Server) checkLimits(policies ...retrieval.Policy) *apiError {
	for _, p := range policies {
		var le *retrieval.LimitError
		if errors.As(s.cfg.Limits.Check(p), &le) {
			return errf(http.StatusBadRequest, "bad_request", "policy %s %d must be at most %d: this server's limit on what one retrieve may cost (cordon serve --max-%s)",
				le.Field, le.Value, le.Max, strings.ReplaceAll(le.Field, "_", "-"))
		}
	}
	return nil
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
	pol, modelPol := s.requestPolicies(id.Tenant, req.Policy)
	if e := s.checkLimits(pol, modelPol); e != nil {
		s.fail(w, r, e)
		return
	}
	now := s.cfg.Now().Unix()
	if req.NowTick != nil {
		now = *req.NowTick
	}
	res, version, err := s.retriever().RetrieveVersion(r.Context(), retrieval.Query{Principal: id.Principal(), Text: query, NowTick: now,
		Policy: pol, ModelPolicy: &modelPol, Reserve: s.auditReserve()})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if m := res.Model; m != nil && m.Shed {
		logInfo(r.Context()).shed = string(m.Outcome) + ": " + m.Err.Error()
	}
	if res.DenseErr != nil {
		logInfo(r.Context()).denseShed = res.DenseErr.Error()
	}
	out := RetrieveResponse{Results: make([]ResultJSON, len(res.Chunks)), Degraded: res.Degraded, NowTick: now, Expansion: res.Expansion}
	ids := make([]string, len(res.Chunks))
	for i, c := range res.Chunks {
		ids[i] = c.Chunk.ChunkID
		out.Results[i] = c.JSON(true)
	}
	// Every field that shapes the ranking, so two records that ranked
	// differently never read the same.
	// Fields that are off or at their default (expansion, qtf weighting,
	// the plus-one idf, no stop list, the model reranker's settings, the dense side on,
	// no dense fallback, no document ranking, no document evidence in the
	// rerank) are left out.
	pol = res.Policy // the tenant's: with the model defaults for a model
	effective := *pol.Patch()
	if pol.PRFDocs == 0 {
		effective.PRFDocs, effective.PRFTerms, effective.PRFWeight = nil, nil, nil
	}
	if pol.QTFK3 == 0 {
		effective.QTFK3 = nil
	}
	if pol.RRFWeights.Doc == 0 {
		w := *effective.RRFWeights
		w.Doc = nil
		effective.RRFWeights = &w
	}
	if pol.RerankDoc == 0 || pol.RRFWeights.Doc == 0 {
		// Without the document ranking rerank_doc changes nothing.
		effective.RerankDoc = nil
	}
	if pol.IDF == bm25.IDFPlusOne {
		effective.IDF = nil
	}
	if !pol.StopWords.On() {
		effective.StopWords = nil
	}
	if pol.EnableDense {
		effective.EnableDense = nil
	}
	if pol.DenseFallback == retrieval.FallbackNone {
		effective.DenseFallback = nil
	}
	if pol.Rerank != retrieval.RerankModel {
		effective.RerankMinScore, effective.RerankBudgetMS = nil, nil
	}
	policyText, _ := json.Marshal(struct {
		NowTick int64 `json:"now_tick"`
		retrieval.PolicyPatch
		Reranker *modelAudit `json:"reranker,omitempty"`
	}{now, effective, auditModel(res.Model)})
	recorded, err := s.audit(r, id, audit.Record{
		Op: "retrieve", Query: query, Policy: string(policyText), ChunkIDs: ids,
		Considered: int64(res.Considered), ExcludedByEntitlement: int64(res.ExcludedByEntitlement),
		ExcludedByFreshness: int64(res.ExcludedByFreshness), Degraded: res.Degraded, IndexVersion: version,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Counted once audited, so only over a tenant that exists: a token
	// naming any other tenant adds no tenant label.
	if recorded {
		s.metrics.retrieval(id.Tenant, res.Considered, res.ExcludedByEntitlement, res.ExcludedByFreshness, res.Degraded)
	}
	if id.Has(RoleAuditor) {
		out.Considered, out.ExcludedByEntitlement, out.ExcludedByFreshness = &res.Considered, &res.ExcludedByEntitlement, &res.ExcludedByFreshness
		out.IndexVersion = &version
	}
	writeJSON(w, http.StatusOK, &out)
}

// modelAudit is what the model reranker did, in a retrieve's audit record:
// the provider and model that were asked, the call's outcome ("ok",
// "timeout", "error", "breaker_open"; absent when no chunk needed a score)
// and whether the stage was shed.
type modelAudit struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Outcome  string `json:"outcome,omitempty"`
	Shed     bool   `json:"shed"`
}

func auditModel(m *retrieval.ModelRun) *modelAudit {
	if m == nil {
		return nil
	}
	return &modelAudit{Provider: m.Provider, Model: m.Model, Outcome: string(m.Outcome), Shed: m.Shed}
}
