package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/internal/proccpu"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

// cannedStore answers every ranking with the same hits and accepts every
// audit record: a [Store] for measuring the server's own work. The other
// methods are the nil embedded Store's (a retrieve calls none of them).
type cannedStore struct {
	Store
	rankings retrieval.Rankings
	audited  int
	last     audit.Record // the last record appended
}

// Pool is nil: no database (the server's admission then bounds by CPU).
func (c *cannedStore) Pool() *pgxpool.Pool { return nil }

// ReadStats: no replicas.
func (c *cannedStore) ReadStats() postgres.ReadStats { return postgres.ReadStats{} }

func (c *cannedStore) RankVersion(_ context.Context, req retrieval.RankRequest) (retrieval.Rankings, int64, error) {
	r := c.rankings
	r.Lexical, r.Dense = slices.Clone(r.Lexical), slices.Clone(r.Dense)
	r.IDF = make([]float64, len(req.Terms))
	for i := range r.IDF {
		r.IDF[i] = 1.5
	}
	return r, 7, nil
}

func (c *cannedStore) Rank(ctx context.Context, req retrieval.RankRequest) (retrieval.Rankings, error) {
	r, _, err := c.RankVersion(ctx, req)
	return r, err
}

func (c *cannedStore) TenantModel(context.Context, string) (embed.Spec, error) {
	return embed.Spec{Model: embed.Hash}, nil
}

func (c *cannedStore) EmbedQuery(context.Context, embed.Spec, string, []string) (*retrieval.DenseQuery, error) {
	return nil, nil
}

func (c *cannedStore) Models() *embed.Registry { return nil }

func (c *cannedStore) IDF(_ context.Context, _ cordontype.Principal, terms []string) ([]float64, error) {
	return make([]float64, len(terms)), nil
}

func (c *cannedStore) AppendAudit(_ context.Context, _ string, r audit.Record) (audit.Record, error) {
	c.audited++
	c.last = r
	return r, nil
}

// newCannedStore ranks 40 chunks of about 1 KB each (the bench corpus'
// size) in both rankings, in opposite orders.
func newCannedStore() *cannedStore {
	words := strings.Fields("ledger settlement swap margin collateral tx4096 clearing netting exposure PMT-771 custody")
	var lex, dense []retrieval.Hit
	for i := range 40 {
		var text strings.Builder
		for j := 0; text.Len() < 1000; j++ {
			text.WriteString(words[(i*7+j*3)%len(words)])
			text.WriteByte(' ')
		}
		c := cordontype.Chunk{ChunkID: fmt.Sprintf("doc-%02d#%d", i/2, i%2), DocID: fmt.Sprintf("doc-%02d", i/2), Tenant: "bank",
			Section: "Settlement > Netting", Text: text.String(), StartChar: 100 * i, EndChar: 100*i + text.Len(), Length: 150,
			Classification: cordontype.Internal}
		lex = append(lex, retrieval.Hit{Chunk: c, Score: 20 - float64(i)/3})
		dense = append([]retrieval.Hit{{Chunk: c, Score: 0.2 + float64(i)/100}}, dense...)
	}
	return &cannedStore{rankings: retrieval.Rankings{Lexical: lex, Dense: dense, Considered: 120, ExcludedByEntitlement: 3}}
}

// BenchmarkRetrieveHandler measures what the server adds to a retrieve
// over the retriever, on a store that answers from memory (no database,
// no network): "handler" sends the request through the server's handler
// (middleware, token check, strict decoding, policy, the audit record,
// response encoding), "retriever" calls the same pipeline directly. The
// difference is the server's own cost per request (cpu-µs/op: the
// process's CPU per request, GC included):
//
//	go test ./server/ -run '^$' -bench RetrieveHandler -benchmem
func BenchmarkRetrieveHandler(b *testing.B) {
	const secret = "0123456789abcdef0123456789abcdef"
	v, err := NewVerifier(context.Background(), AuthConfig{HS256Secret: secret, Leeway: DefaultLeeway})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	tok, err := MintHS256(secret, Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "reader", IssuedAt: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}, Tenant: "bank", Clearance: "confidential", Roles: []string{RoleReader}})
	if err != nil {
		b.Fatal(err)
	}
	st := newCannedStore()
	srv := New(Config{}, st, v)
	query := "netting exposure of tx4096 under the margin agreement"
	tick := int64(1000)
	pol := retrieval.ServicePolicy()
	body, err := json.Marshal(RetrieveRequest{Query: &query, NowTick: &tick, Policy: pol.Patch()})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	serve := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/tenants/bank/retrieve", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := serve(); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"chunk_id":"doc-`) || st.audited != 1 {
		b.Fatalf("retrieve: %d %s (audited %d)", w.Code, w.Body.String(), st.audited)
	}
	// CPU per request beside ns/op: the process's CPU (GC included) is
	// steadier than wall time on a machine shared with other work.
	cpuPerOp := func(b *testing.B, start time.Duration) {
		b.ReportMetric(float64(proccpu.Self()-start)/1e3/float64(b.N), "cpu-µs/op")
	}
	b.Run("handler", func(b *testing.B) {
		start := proccpu.Self()
		for b.Loop() {
			serve()
		}
		cpuPerOp(b, start)
	})
	b.Run("retriever", func(b *testing.B) {
		hashPol, modelPol := srv.requestPolicies("bank", pol.Patch())
		p := cordontype.Principal{Tenant: "bank", Clearance: cordontype.Confidential}
		start := proccpu.Self()
		for b.Loop() {
			if _, _, err := srv.retriever().RetrieveVersion(context.Background(), retrieval.Query{Principal: p, Text: query, NowTick: tick,
				Policy: hashPol, ModelPolicy: &modelPol, Reserve: srv.auditReserve()}); err != nil {
				b.Fatal(err)
			}
		}
		cpuPerOp(b, start)
	})
}

// The server runs on any [Store]: over a canned one, a retrieve answers the
// retriever's chunks, in its order, and audits exactly those.
func TestRetrieveOverAnyStore(t *testing.T) {
	st := newCannedStore()
	v := newHS256Verifier(t, AuthConfig{})
	srv := New(Config{}, st, v)
	tok := signMap(t, map[string]any{"sub": "ann", "tenant": "bank", "clearance": "confidential", "roles": []string{RoleReader}, "exp": inAnHour()})
	r := httptest.NewRequest(http.MethodPost, "/v1/tenants/bank/retrieve", strings.NewReader(`{"query": "netting exposure tx4096", "now_tick": 1000}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("retrieve: %d %s", w.Code, w.Body.String())
	}
	var got RetrieveResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	pol, modelPol := srv.requestPolicies("bank", nil)
	want, _, err := srv.retriever().RetrieveVersion(context.Background(), retrieval.Query{
		Principal: cordontype.Principal{Tenant: "bank", Clearance: cordontype.Confidential}, Text: "netting exposure tx4096", NowTick: 1000,
		Policy: pol, ModelPolicy: &modelPol, Reserve: srv.auditReserve()})
	if err != nil {
		t.Fatal(err)
	}
	var ids, wantIDs []string
	for _, c := range got.Results {
		ids = append(ids, c.ChunkID)
	}
	for _, c := range want.Chunks {
		wantIDs = append(wantIDs, c.Chunk.ChunkID)
	}
	if len(ids) == 0 || !slices.Equal(ids, wantIDs) {
		t.Fatalf("got chunks %v, want the retriever's %v", ids, wantIDs)
	}
	if st.audited != 1 || st.last.Op != "retrieve" || st.last.Sub != "ann" || !slices.Equal(st.last.ChunkIDs, ids) || st.last.IndexVersion != 7 {
		t.Fatalf("audited %d, last record %+v; want one retrieve record by ann of %v at index version 7", st.audited, st.last, ids)
	}
	if got.Considered != nil || got.IndexVersion != nil {
		t.Fatalf("a reader sees the funnel counters: %s", w.Body.String())
	}
}
