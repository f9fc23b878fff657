package server

import (
	"net/http"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
)

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
	if req.Analyzer != nil {
		if err := analysis.ValidateAnalyzer(*req.Analyzer); err != nil {
			s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
			return
		}
		settings.Analyzer = *req.Analyzer
	}
	if req.Fields != nil {
		settings.Fields = *req.Fields
	}
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
	// A replica scores with the scope it has replayed: the token lets a
	// caller wait for the change there (reads carrying it go to the
	// primary until the replica has it).
	s.setConsistency(w, r)
	writeJSON(w, http.StatusOK, map[string]any{"tenant": tenant, "bm25_statistics": scope})
}
