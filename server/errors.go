package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/assemble"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/grounding"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

// apiError is an error response: {"error": {"code": ..., "message": ...}}.
// ChunkIDs is set only by chunk_changed, for callers that re-retrieve.
type apiError struct {
	Status   int      `json:"-"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	ChunkIDs []string `json:"chunk_ids,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// The responses that must not vary: a probe of another tenant, of a hidden
// chunk or of a missing one gets exactly these bytes.
var (
	// errNotFound answers whatever the caller may not see or that does not
	// exist (toAPIError maps the store's not-found errors to it;
	// deleteDocument and the tenant guard return it directly).
	errNotFound = &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "not found"}
	// errUnauthorized answers a request without a valid bearer token (the
	// authentication middleware).
	errUnauthorized = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "a valid bearer token is required"}
	// errUnavailable answers database trouble (toAPIError).
	errUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the database is unavailable; retry later"}
	// errAuditUnavailable is wrapped by audit when a request's audit record
	// could not be written.
	errAuditUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the audit log cannot be written; retry later"}
	// errTimedOut is wrapped by audit when the request's deadline passed
	// (or its caller left) before its audit record was written.
	errTimedOut = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request ran out of time before its audit record was written; retry later"}
	// errQueueTimedOut answers a request that ended while it waited in its
	// tenant's queue (admit; errTooManyRequests answers one refused there).
	errQueueTimedOut = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "the request ran out of time waiting for other requests of this tenant to finish; retry later"}
	// errInternal answers anything else (toAPIError); the details go to the
	// log only.
	errInternal = &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
)

// Internal sentinels, never sent as they are.
var (
	// errBadToken is wrapped by every [Verifier.Verify] error.
	errBadToken = errors.New("unauthorized")
	// errLineTooLong is returned by readLine when an NDJSON batch line is
	// over the document limit.
	errLineTooLong = errors.New("line too long")
	// errTenantBusy is returned by tenantGate.enter when the tenant has as
	// many requests in progress and waiting as the gate allows.
	errTenantBusy = errors.New("the tenant's requests are at their limit")
)

// errTooManyRequests answers a request refused by its tenant's admission
// (errTenantBusy), naming the limits and the flags that set them.
func errTooManyRequests(limit, queue int) *apiError {
	return errf(http.StatusTooManyRequests, "too_many_requests",
		"this tenant has %d requests in progress and %d waiting, this server's limit per tenant (cordon serve --tenant-requests, --tenant-queue); retry after the Retry-After delay",
		limit, queue)
}

// errChunkChanged is ground's and assemble's answer when chunks the caller
// may see no longer match the digests it sent: the ids are named, since the
// caller sees those chunks anyway.
func errChunkChanged(ids []string) *apiError {
	e := errf(http.StatusConflict, "chunk_changed",
		"chunks changed since they were retrieved (their document was replaced): %s; retrieve again for their current text and digests",
		strings.Join(ids, ", "))
	e.ChunkIDs = ids
	return e
}

// responseBuffers hold encoded response bodies between requests.
var responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledResponse bounds the buffers kept for reuse, so that a rare
// large answer does not stay in memory.
const maxPooledResponse = 1 << 20

// writeJSON encodes v as the whole body, then sends it with its
// Content-Length in one write: nothing is sent before the encoding
// succeeded, so a value that cannot be encoded answers 500, not half a
// body, and a client reads the body to its end without chunked framing.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := responseBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledResponse {
			responseBuffers.Put(buf)
		}
	}()
	// A body that encodes itself skips encoding/json's reflection; when it
	// cannot (ok false), buf is untouched and encoding/json decides.
	encoded := false
	if a, ok := v.(jsonAppender); ok {
		var b []byte
		if b, encoded = a.appendJSON(buf.AvailableBuffer()); encoded {
			buf.Write(b)
		}
	}
	if !encoded {
		if err := json.NewEncoder(buf).Encode(v); err != nil {
			buf.Reset()
			status = errInternal.Status
			_ = json.NewEncoder(buf).Encode(errorBody{errInternal})
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorBody is the body of an error response.
type errorBody struct {
	Error *apiError `json:"error"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cordon"`)
	}
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{e})
}

// toAPIError maps an error from the store or the pure cores to a response.
// Bad input is a 400, never a 500; database trouble is a 503; anything else
// is a 500 whose details go to the log only.
func toAPIError(err error) *apiError {
	var ae *apiError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, postgres.ErrChunkNotFound), errors.Is(err, postgres.ErrTenantNotFound):
		return errNotFound
	case errors.Is(err, assemble.ErrBudget):
		return errf(http.StatusBadRequest, "budget_too_small", "%s", err.Error())
	case errors.Is(err, cordontype.ErrInvalid), errors.Is(err, retrieval.ErrInvalidPolicy),
		errors.Is(err, grounding.ErrInvalidThreshold), errors.Is(err, assemble.ErrInvalidBudget):
		return errf(http.StatusBadRequest, "bad_request", "%s", err.Error())
	case errors.Is(err, postgres.ErrSchemaTooNew):
		// The binary must not answer from a layout it does not
		// understand; the log has the migrations on both sides.
		return errf(http.StatusServiceUnavailable, "schema_incompatible",
			"this server's release is older than the tenant's database schema and does not answer from it: retry later, when a newer release serves")
	case errors.Is(err, postgres.ErrSchemaBehind):
		return errf(http.StatusServiceUnavailable, "schema_incompatible",
			"the database's schema is older than this server's release: retry later, when the migrations have run")
	case errors.Is(err, postgres.ErrOwnerRequired):
		return errf(http.StatusForbidden, "forbidden", "%s", err.Error())
	case errors.Is(err, postgres.ErrTenantSettings):
		return errf(http.StatusConflict, "conflict", "the tenant exists with other index settings")
	case errors.Is(err, embed.ErrUnknownModel), errors.Is(err, embed.ErrProvider), errors.As(err, new(*retrieval.ModelMismatchError)):
		// The provider's address and answer go to the log only.
		return errf(http.StatusServiceUnavailable, "embedding_unavailable", "the tenant's embedding model is not available: retry later")
	case errors.Is(err, postgres.ErrUnavailable), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled), pgconn.Timeout(err),
		errors.Is(err, pgconn.ErrConnClosed), pgconn.SafeToRetry(err):
		return errUnavailable
	case errors.As(err, &pe):
		switch pe.Code[:2] {
		case "22": // data exception: a value the database refuses
			return errf(http.StatusBadRequest, "bad_request", "a value was refused by the database: %s", pe.Message)
		case "08", "53", "57": // connection, resources, operator intervention
			return errUnavailable
		}
		return errInternal
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return errUnavailable
	}
	return errInternal
}

// writeInvalidToken answers a request whose bearer token did not verify
// (err says why) with 401 and, as RFC 6750 section 3 asks, a
// WWW-Authenticate challenge with error "invalid_token" and a description
// from a fixed set: why, never anything of the token itself. The body's
// message says the same, for clients that show only the body ("the token
// has expired" tells the caller to fetch a new one).
func writeInvalidToken(w http.ResponseWriter, err error) {
	problem := tokenProblem(err)
	w.Header().Set("WWW-Authenticate", `Bearer realm="cordon", error="invalid_token", error_description="`+problem+`"`)
	writeError(w, &apiError{Status: errUnauthorized.Status, Code: errUnauthorized.Code, Message: errUnauthorized.Message + ": " + problem})
}

// tokenProblem says in a few fixed words why a token did not verify.
func tokenProblem(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the token is not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is issued in the future (iat)"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature does not verify with the service's keys"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is malformed"
	default:
		return "the token's claims are not valid"
	}
}
