package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// audit appends the request's audit record; a request whose record cannot
// be written fails (a bank would rather refuse than answer unaudited): with
// a 400 when the database refused a value of the request, else with a 503
// (whatever failed, a trigger or constraint included, is the service's
// trouble, not the caller's, and the request may be retried). A request
// whose deadline passed, or whose caller left, before its record was
// written fails too, but is not an audit failure: the middleware counts
// a deadline as a timeout. recorded is false when the token's tenant does
// not exist: there is nothing to audit against, and a request over it
// found nothing.
func (s *Server) audit(r *http.Request, id Identity, rec audit.Record) (recorded bool, err error) {
	rec.Sub, rec.RequestID = id.Sub, requestID(r.Context())
	if _, err := s.store.AppendAudit(r.Context(), id.Tenant, rec); err != nil {
		if errors.Is(err, postgres.ErrTenantNotFound) {
			// The caller sees an empty tenant (existence-safety); the
			// operator sees a token naming no tenant, in the log and a
			// counter to alert on.
			logInfo(r.Context()).unknownTenant = true
			s.metrics.unknownTenant.Inc()
			return false, nil
		}
		if cerr := r.Context().Err(); cerr != nil {
			return false, fmt.Errorf("audit: %w: %w", errTimedOut, cerr)
		}
		s.metrics.auditFailures.Inc()
		if toAPIError(err).Status == http.StatusBadRequest {
			return false, fmt.Errorf("audit: %w", err)
		}
		return false, fmt.Errorf("audit: %w: %w", errAuditUnavailable, err)
	}
	return true, nil
}
