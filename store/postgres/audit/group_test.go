package audit

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cordon-rag/cordon/store/postgres/internal/pgtest"
)

// tripConn counts round trips: each write that follows a read (or is the
// connection's first) starts one.
type tripConn struct {
	net.Conn
	trips *atomic.Int64
	mu    sync.Mutex
	read  bool // a read came since the last write
}

func (c *tripConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.read {
		c.read = false
		c.trips.Add(1)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tripConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.read = true
		c.mu.Unlock()
	}
	return n, err
}

// countRoundTrips makes the pool count its connections' round trips in n.
// Idle connections are not pinged when acquired, which would add one.
func countRoundTrips(n *atomic.Int64) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &tripConn{Conn: c, trips: n, read: true}, nil
		}
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}
}

// TestAuditBatchRoundTrips counts the round trips of audit batches: one
// when the store knows the chain head, three when another store appended
// since (the head is stale: the one-round-trip try inserts nothing), two
// when no head is known. A batch of several records, with chunk ids and
// degraded sides of different lengths, is stored as chained.
func TestAuditBatchRoundTrips(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	keys := &Keyring{Active: "k1", Keys: map[string][]byte{"k1": make([]byte, MinKeyBytes)}}
	var trips, other atomic.Int64
	st := newTestLog(t, dbURL, keys, 1, countRoundTrips(&trips))
	st2 := newTestLog(t, dbURL, keys, 1, countRoundTrips(&other))
	createTenant(t, st, "acme")
	rec := Record{Sub: "s", Op: "retrieve", Policy: "{}"}
	appendOn := func(s *Log) func() error {
		return func() error { _, err := s.Append(ctx, "acme", rec); return err }
	}
	// The first append prepares the statements on the connection, and a
	// first batch of two records the insert of several.
	if err := appendOn(st)(); err != nil {
		t.Fatal(err)
	}
	var two []*auditWaiter
	for range 2 {
		r := rec
		r.KeyID = "k1"
		two = append(two, &auditWaiter{ctx: ctx, rec: r, done: make(chan struct{})})
	}
	if err := st.writeBatch("acme", keys.Keys["k1"], two); err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{ChunkIDs: []string{"a::0", "b::1", "c::2"}, Degraded: []string{"rerank"}},
		{},
		{ChunkIDs: []string{"d::0"}, Degraded: []string{"dense", "rerank"}},
		{ChunkIDs: []string{}, Degraded: []string{}},
		{ChunkIDs: []string{"e::0", "e::1"}},
	}
	var batch []*auditWaiter
	tests := []struct {
		name        string
		before      func() error
		run         func() error
		wantTrips   int64
		fast, stale int64 // the counters' increments
	}{
		{name: "head known", run: appendOn(st), wantTrips: 1, fast: 1},
		{name: "head known again", run: appendOn(st), wantTrips: 1, fast: 1},
		{name: "another store appended", before: appendOn(st2), run: appendOn(st), wantTrips: 3, stale: 1},
		{name: "head known after the stale one", run: appendOn(st), wantTrips: 1, fast: 1},
		{name: "no head known", before: func() error { st.groups.takeHead("acme"); return nil }, run: appendOn(st), wantTrips: 2},
		{name: "a batch of several records", run: func() error {
			for i, r := range recs {
				r.Sub, r.Op, r.Policy, r.RequestID, r.KeyID = "s", "retrieve", "{}", string(rune('A'+i)), "k1"
				batch = append(batch, &auditWaiter{ctx: ctx, rec: r, done: make(chan struct{})})
			}
			return st.writeBatch("acme", keys.Keys["k1"], batch)
		}, wantTrips: 1, fast: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				if err := tt.before(); err != nil {
					t.Fatal(err)
				}
			}
			s0, n0 := st.Stats(), trips.Load()
			if err := tt.run(); err != nil {
				t.Fatal(err)
			}
			s1, n1 := st.Stats(), trips.Load()
			if n1-n0 != tt.wantTrips {
				t.Errorf("%d round trips, want %d", n1-n0, tt.wantTrips)
			}
			if fast, stale := s1.FastCommits-s0.FastCommits, s1.StaleHeads-s0.StaleHeads; fast != tt.fast || stale != tt.stale {
				t.Errorf("%d fast commits, %d stale heads; want %d, %d", fast, stale, tt.fast, tt.stale)
			}
		})
	}

	sum, err := st.Verify(ctx, "acme")
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if want := int64(9 + len(recs)); sum.Rows != want {
		t.Fatalf("%d rows, want %d", sum.Rows, want)
	}
	rows, err := st.pool.Query(ctx, `SELECT seq, request_id, chunk_ids, degraded FROM cordon_t_acme.audit WHERE seq > 9 ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var seq int64
		var req string
		var chunks, degraded []string
		if err := rows.Scan(&seq, &req, &chunks, &degraded); err != nil {
			t.Fatal(err)
		}
		w := batch[i].rec
		if seq != w.Seq || req != w.RequestID || !slices.Equal(chunks, w.ChunkIDs) || !slices.Equal(degraded, w.Degraded) {
			t.Errorf("row %d: seq %d, request %q, chunk ids %q, degraded %q; want %d, %q, %q, %q",
				i, seq, req, chunks, degraded, w.Seq, w.RequestID, w.ChunkIDs, w.Degraded)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(recs) {
		t.Fatalf("%d rows of the batch, want %d", i, len(recs))
	}
}

// TestAuditKeepSolo: a tenant whose statement fails a shared transaction
// (here a trigger that raises) is written on its own for auditSoloFor, so
// its next records stay out of the other tenants' shared transactions.
func TestAuditKeepSolo(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	keys := &Keyring{Active: "k1", Keys: map[string][]byte{"k1": make([]byte, MinKeyBytes)}}
	st := newTestLog(t, dbURL, keys, 4, nil)
	old := auditSoloFor
	auditSoloFor = time.Hour // no test waits on it
	t.Cleanup(func() { auditSoloFor = old })
	for _, tn := range []string{"alpha", "beta", "gamma"} {
		createTenant(t, st, tn)
		if _, err := st.Append(ctx, tn, Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.pool.Exec(ctx, `CREATE FUNCTION public.boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.query = 'boom' THEN RAISE EXCEPTION 'injected'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER boom BEFORE INSERT ON cordon_t_alpha.audit FOR EACH ROW EXECUTE FUNCTION public.boom()`); err != nil {
		t.Fatal(err)
	}
	batch := func(queries map[string]string) ([]tenantBatch, []*auditWaiter) {
		var bs []tenantBatch
		var ws []*auditWaiter
		for _, tn := range []string{"alpha", "beta", "gamma"} {
			q, ok := queries[tn]
			if !ok {
				continue
			}
			w := &auditWaiter{ctx: ctx, rec: Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: q, KeyID: "k1"}, done: make(chan struct{})}
			schema, err := st.schema(tn)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, tenantBatch{tenant: tn, q: &auditQueue{schema: schema}, ws: []*auditWaiter{w}})
			ws = append(ws, w)
		}
		return bs, ws
	}
	wait := func(ws []*auditWaiter) {
		for _, w := range ws {
			<-w.done
		}
	}
	key := keys.Keys["k1"]
	bs, ws := batch(map[string]string{"alpha": "boom", "beta": "b1"})
	s0 := st.Stats()
	st.commitBatch(key, bs)
	wait(ws)
	if ws[0].err == nil || ws[1].err != nil {
		t.Fatalf("alpha %v, beta %v: want alpha's trigger to fail alpha only", ws[0].err, ws[1].err)
	}
	s1 := st.Stats()
	if s1.SharedRedone-s0.SharedRedone != 1 {
		t.Fatalf("stats %+v after %+v: want the shared transaction redone", s1, s0)
	}
	// alpha's head is known again after a record of its own (a failed
	// batch leaves none), so only being kept solo keeps it out now: beta
	// and gamma share, alpha commits alone.
	if _, err := st.Append(ctx, "alpha", Record{Sub: "s", Op: "retrieve", Policy: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, known := st.groups.heads["alpha"]; !known {
		t.Fatal("alpha's head is not known after its append")
	}
	s1 = st.Stats()
	bs, ws = batch(map[string]string{"alpha": "a2", "beta": "b2", "gamma": "g2"})
	st.commitBatch(key, bs)
	wait(ws)
	for _, w := range ws {
		if w.err != nil {
			t.Fatal(w.err)
		}
	}
	s2 := st.Stats()
	if d := s2.SharedCommits - s1.SharedCommits; d != 1 || s2.Commits-s1.Commits != 2 || s2.SharedRedone != s1.SharedRedone {
		t.Fatalf("stats %+v after %+v: want beta and gamma in one shared commit and alpha in one of its own", s2, s1)
	}
	// Once the time is up, alpha shares again.
	st.groups.mu.Lock()
	st.groups.solo["alpha"] = time.Now().Add(-time.Second)
	st.groups.mu.Unlock()
	bs, ws = batch(map[string]string{"alpha": "a3", "beta": "b3"})
	st.commitBatch(key, bs)
	wait(ws)
	if s3 := st.Stats(); s3.SharedCommits-s2.SharedCommits != 1 || s3.Commits-s2.Commits != 1 {
		t.Fatalf("stats %+v after %+v: want alpha and beta in one shared commit again", s3, s2)
	}
}
