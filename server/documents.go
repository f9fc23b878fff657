package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/htmltext"
)

// htmlGate bounds the HTML conversions running at once: one can hold a core
// for a few seconds (htmltext.MaxWork), so at most half the CPUs
// (GOMAXPROCS, at least 1) convert while the rest of the service runs; a
// request waits for its turn until its deadline. A nil gate lets all run.
type htmlGate chan struct{}

func newHTMLGate() htmlGate { return make(htmlGate, max(1, runtime.GOMAXPROCS(0)/2)) }

// convert converts src with htmltext.ConvertContext, stopping at ctx's
// deadline, waiting included.
func (g htmlGate) convert(ctx context.Context, src string) (htmltext.Result, error) {
	if g != nil {
		select {
		case g <- struct{}{}:
			defer func() { <-g }()
		case <-ctx.Done():
			return htmltext.Result{}, errf(http.StatusServiceUnavailable, "unavailable",
				"too many HTML conversions in progress; retry later")
		}
	}
	return htmltext.ConvertContext(ctx, src)
}

// document makes the document of d; html documents are converted through
// g, within ctx (the request's).
func (d *DocumentRequest) document(ctx context.Context, g htmlGate, tenant, docID string) (cordontype.Document, error) {
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
	format := cordontype.FormatText
	if d.Format != nil {
		if format, err = cordontype.ParseFormat(*d.Format); err != nil {
			return cordontype.Document{}, err
		}
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
	text, title := *d.Text, d.Title
	if format == cordontype.FormatHTML {
		// Last: the conversion is the costliest check.
		res, err := g.convert(ctx, text)
		if err != nil {
			return cordontype.Document{}, err
		}
		text = res.Text
		if title == "" {
			title = res.Title
		}
	}
	if err := noNUL(map[string]string{"text": text, "title": title}); err != nil {
		return bad("%s", err.Error())
	}
	doc := cordontype.Document{
		Tenant: tenant, DocID: docID, Text: text, Classification: cl, Barriers: d.Barriers,
		Title: title, Metadata: meta,
	}
	if d.AsOfTick != nil {
		doc.AsOfTick = *d.AsOfTick
	}
	if err := doc.Validate(); err != nil {
		return cordontype.Document{}, err
	}
	return doc, nil
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
	doc, err := req.document(r.Context(), s.html, id.Tenant, docID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chunks, err := s.store.Put(r.Context(), doc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setConsistency(w, r)
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
	s.setConsistency(w, r)
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
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
				if ok > 0 { // the lines before were stored: a reader may need their position
					s.setConsistency(w, r)
				}
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
			if ok > 0 {
				s.setConsistency(w, r)
			}
			s.fail(w, r, r.Context().Err())
			return
		}
	}
	if results == nil {
		// Nothing was sent: an empty body is a mistake, never a batch of
		// zero documents.
		s.fail(w, r, errf(http.StatusBadRequest, "bad_request", "the batch has no documents: send one JSON document per line"))
		return
	}
	if ok > 0 {
		s.setConsistency(w, r)
	}
	// 200 only when every line was stored; otherwise 207 Multi-Status, so
	// a client that checks only the status cannot take a partly failed
	// batch for a success. The body is the same either way.
	status := http.StatusOK
	if failed > 0 {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, map[string]any{"results": results, "succeeded": ok, "failed": failed})
}

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
	doc, err := req.document(r.Context(), s.html, id.Tenant, *req.DocID)
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
