package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/server"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// standby is a hot standby of the test server, started by scripts/db.sh
// (pg_basebackup -R, streaming replication) in a directory of its own and
// removed at the end of the test.
type standby struct {
	dir  string
	base string // URL of the standby's copy of the server's default database
}

// startStandby starts a hot standby of the test server. The server must
// accept replication connections from 127.0.0.1 as postgres without a
// password, as the cluster of scripts/db.sh start (make test, CI) does.
func startStandby(t testing.TB) *standby {
	t.Helper()
	base := requireServer(t)
	dir := filepath.Join(t.TempDir(), "standby")
	script, err := filepath.Abs("../scripts/db.sh")
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command("bash", script, "standby", base, dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("start a hot standby of %s: %v\n%s", base, err, stderr.String())
		if os.Getenv("CI") != "" || os.Getenv("CORDON_REQUIRE_DB") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING replica test: " + msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stop the standby: %v\n%s", err, out)
		}
	})
	return &standby{dir: dir, base: strings.TrimSpace(string(out))}
}

// url is the standby's URL of the primary database dbURL.
func (s *standby) url(t testing.TB, dbURL string) string {
	t.Helper()
	p, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(s.base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = p.Path
	// The standby replays the database's creation on its own time: wait
	// until it can be connected to, so no caller meets "database does not
	// exist" on a standby that is merely behind.
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), u.String())
		if err == nil {
			c.Close(context.Background())
			return u.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby's copy of %s: %v", p.Path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs scripts/db.sh halt or resume on the standby.
func (s *standby) run(t *testing.T, verb string) {
	t.Helper()
	if out, err := exec.Command("bash", "../scripts/db.sh", verb, s.dir).CombinedOutput(); err != nil {
		t.Fatalf("db.sh %s: %v\n%s", verb, err, out)
	}
}

// waitReplay waits until the standby at standbyURL has replayed tok.
func waitReplay(t testing.TB, standbyURL string, tok postgres.Token) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		c, err := pgx.Connect(context.Background(), standbyURL)
		if err == nil {
			err = c.QueryRow(context.Background(), `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, tok.String()).Scan(&ok)
			c.Close(context.Background())
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has not replayed %s after 60s (last error: %v)", tok, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func position(t testing.TB, st *postgres.Store) postgres.Token {
	t.Helper()
	tok, err := st.Position(context.Background())
	if err != nil {
		t.Fatalf("position: %v", err)
	}
	return tok
}

var replicaQuery = retrieval.Query{
	Principal: cordontype.Principal{Tenant: "rep", Clearance: cordontype.Internal},
	Text:      "wire hold release", NowTick: 50, Policy: retrieval.DefaultPolicy(),
}

// TestReplicaReadYourWrites: with the standby's replay paused, a write is on
// the primary only. A read carrying the write's token is served by the
// primary and sees it, byte for byte as a primary-only store answers; a
// read without a token is served by the lagging standby. Once the standby
// replays the token, tokened reads are served by it. With the in-memory
// index, a read from the lagging standby never moves the cache back.
func TestReplicaReadYourWrites(t *testing.T) {
	sb := startStandby(t)
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"sql", 0}, {"cache", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dbURL := migrated(t)
			standbyURL := sb.url(t, dbURL)
			settings := index.DefaultSettings()
			writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings, Replicas: []string{standbyURL}})
			primary := openStore(t, dbURL, postgres.Options{})
			reader := openStore(t, dbURL, postgres.Options{CacheBytes: tc.cache, Replicas: []string{standbyURL}})
			put(t, writer, cordontype.Document{Tenant: "rep", DocID: "a", Text: "wire hold for review", Classification: cordontype.Public})
			waitReplay(t, standbyURL, position(t, writer))

			execSQL(t, standbyURL, `SELECT pg_wal_replay_pause()`)
			t.Cleanup(func() { // the next subtest shares the standby
				if c, err := pgx.Connect(ctx, standbyURL); err == nil {
					_, _ = c.Exec(ctx, `SELECT pg_wal_replay_resume()`)
					c.Close(ctx)
				}
			})
			put(t, writer, cordontype.Document{Tenant: "rep", DocID: "b", Text: "release the wire hold today", Classification: cordontype.Public})
			tok := position(t, writer)

			want, wantVersion, err := retrieval.New(primary).RetrieveVersion(ctx, replicaQuery)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Chunks) != 2 {
				t.Fatalf("primary: %d chunks, want 2", len(want.Chunks))
			}
			read := func(ctx context.Context) (retrieval.Result, int64) {
				t.Helper()
				res, v, err := retrieval.New(reader).RetrieveVersion(ctx, replicaQuery)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return res, v
			}
			// Without a token: the lagging standby answers, at the
			// version before the write.
			res, v := read(ctx)
			if got := reader.ReadStats(); got.Replicas[0].Served == 0 || got.Primary != 0 {
				t.Fatalf("a read without a token: %+v, want it served by the standby", got)
			}
			if v >= wantVersion || len(res.Chunks) != 1 {
				t.Fatalf("the paused standby answered version %d with %d chunks, want below %d with 1", v, len(res.Chunks), wantVersion)
			}
			// With the token: the primary answers, exactly as it does.
			res, v = read(postgres.WithConsistency(ctx, tok))
			if got := reader.ReadStats(); got.Primary == 0 || got.Replicas[0].Behind == 0 {
				t.Fatalf("a tokened read on a lagging standby: %+v, want it served by the primary", got)
			}
			if ids(res) != ids(want) || v != wantVersion {
				t.Fatalf("tokened read: %s at %d, primary %s at %d", ids(res), v, ids(want), wantVersion)
			}
			if tc.cache > 0 {
				// The cache is now at the primary's version: the lagging
				// standby must not move it back.
				if _, v = read(ctx); v < wantVersion {
					t.Fatalf("after the primary's version %d, a standby read answered %d", wantVersion, v)
				}
			}

			execSQL(t, standbyURL, `SELECT pg_wal_replay_resume()`)
			waitReplay(t, standbyURL, tok)
			before := reader.ReadStats()
			res, v = read(postgres.WithConsistency(ctx, tok))
			after := reader.ReadStats()
			if after.Primary != before.Primary || after.Replicas[0].Served == before.Replicas[0].Served {
				t.Fatalf("a tokened read on a caught-up standby: before %+v, after %+v, want it served by the standby", before, after)
			}
			if ids(res) != ids(want) || v != wantVersion {
				t.Fatalf("tokened read on the standby: %s at %d, primary %s at %d", ids(res), v, ids(want), wantVersion)
			}
			// Chunk loads follow the same rule.
			p := replicaQuery.Principal
			chunks, v, err := reader.LoadChunks(postgres.WithConsistency(ctx, tok), p, []string{want.Chunks[0].Chunk.ChunkID})
			if err != nil || len(chunks) != 1 || v != wantVersion {
				t.Fatalf("load chunks: %d chunks at %d, %v", len(chunks), v, err)
			}
			if _, _, err := reader.LoadChunks(ctx, p, []string{"nope#0"}); !errors.Is(err, postgres.ErrChunkNotFound) {
				t.Fatalf("load of an unknown chunk: %v, want chunk not found", err)
			}
			if st := reader.ReadStats(); st.Replicas[0].Failed != 0 || !st.Replicas[0].Healthy {
				t.Fatalf("no read failed, yet: %+v", st)
			}
		})
	}
}

// TestReplicaFailoverMidLoad: readers run while the standby is stopped (as
// a crash would) and started again. No read fails: reads on the stopped
// standby go to the primary, and after the restart the standby serves
// again. Every answer is one of the primary's.
func TestReplicaFailoverMidLoad(t *testing.T) {
	sb := startStandby(t)
	ctx := context.Background()
	dbURL := migrated(t)
	standbyURL := sb.url(t, dbURL)
	settings := index.DefaultSettings()
	writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "a", Text: "wire hold for review", Classification: cordontype.Public})
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "b", Text: "release the wire hold today", Classification: cordontype.Public})
	waitReplay(t, standbyURL, position(t, writer))
	want, err := retrieval.New(writer).Retrieve(ctx, replicaQuery)
	if err != nil {
		t.Fatal(err)
	}
	reader := openStore(t, dbURL, postgres.Options{Replicas: []string{standbyURL}, ReplicaBackoff: 100 * time.Millisecond})

	var stop atomic.Bool
	var reads atomic.Int64
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := retrieval.New(reader).Retrieve(ctx, replicaQuery)
				if err == nil && ids(res) != ids(want) {
					err = fmt.Errorf("answer %s, want %s", ids(res), ids(want))
				}
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	// waitFor waits until cond holds on the read counters, or the readers
	// failed.
	waitFor := func(what string, cond func(postgres.ReadStats) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond(reader.ReadStats()) {
			select {
			case err := <-errs:
				stop.Store(true)
				wg.Wait()
				t.Fatalf("%s: a read failed: %v", what, err)
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("%s: not after 60s: %+v", what, reader.ReadStats())
			}
		}
	}
	waitFor("the standby serves", func(s postgres.ReadStats) bool { return s.Replicas[0].Served >= 20 })
	sb.run(t, "halt")
	primaryAtHalt := reader.ReadStats().Primary
	waitFor("the primary takes over", func(s postgres.ReadStats) bool {
		return s.Replicas[0].Failed > 0 && s.Primary >= primaryAtHalt+20
	})
	sb.run(t, "resume")
	servedAtResume := reader.ReadStats().Replicas[0].Served
	waitFor("the standby serves again", func(s postgres.ReadStats) bool { return s.Replicas[0].Served >= servedAtResume+20 })
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a read failed: %v", err)
	}
	t.Logf("%d reads, %+v", reads.Load(), reader.ReadStats())
}

// TestReplicaConsistencyHeader: over HTTP, with the standby's replay paused,
// a write's response carries a consistency token; a retrieval sending it
// back sees the write, one without it is served by the lagging standby and
// does not. A malformed token is a 400. A server without replicas sends no
// token.
func TestReplicaConsistencyHeader(t *testing.T) {
	sb := startStandby(t)
	dbURL := newDatabase(t)
	standbyURL := sb.url(t, dbURL)
	a := startAPIServer(t, serverOpts{dbURL: dbURL, replicas: []string{standbyURL}})
	admin := tok(t, "root", "admin")
	a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "rep"}), http.StatusCreated)
	w := tok(t, "w", "tenant=rep", "writer")
	put := func(id, text string) string {
		t.Helper()
		r := a.want(t, a.call(t, "PUT", "/v1/tenants/rep/documents/"+id, w, map[string]any{"text": text, "classification": "public"}), http.StatusOK)
		h := r.header.Get(server.ConsistencyHeader)
		if _, err := postgres.ParseToken(h); err != nil {
			t.Fatalf("PUT %s: %s header %q: %v", id, server.ConsistencyHeader, h, err)
		}
		return h
	}
	first, err := postgres.ParseToken(put("a", "wire hold for review"))
	if err != nil {
		t.Fatal(err)
	}
	waitReplay(t, standbyURL, first)
	execSQL(t, standbyURL, `SELECT pg_wal_replay_pause()`)
	token := put("b", "release the wire hold today")

	reader := tok(t, "r", "tenant=rep", "clearance=internal", "reader")
	retrieve := func(header string) resp {
		t.Helper()
		req, err := http.NewRequest("POST", a.url+"/v1/tenants/rep/retrieve", strings.NewReader(`{"query":"wire hold release","now_tick":50}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+reader)
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set(server.ConsistencyHeader, header)
		}
		res, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp{status: res.StatusCode, body: body, header: res.Header}
	}
	if ids := resultIDs(t, a.want(t, retrieve(""), http.StatusOK).json(t)); len(ids) != 1 {
		t.Fatalf("without a token, on the paused standby: %v, want only the first document", ids)
	}
	if ids := resultIDs(t, a.want(t, retrieve(token), http.StatusOK).json(t)); len(ids) != 2 {
		t.Fatalf("with the write's token: %v, want both documents", ids)
	}
	if r := retrieve("not-a-position"); r.status != http.StatusBadRequest || r.errCode(t) != "bad_request" {
		t.Fatalf("a malformed token: %d %s, want 400 bad_request", r.status, r.body)
	}
	execSQL(t, standbyURL, `SELECT pg_wal_replay_resume()`)

	// A scope change answers with a token, so a reader can wait for it on
	// the replica.
	r := a.want(t, a.call(t, "PATCH", "/v1/tenants/rep", admin, map[string]string{"bm25_statistics": "tenant"}), http.StatusOK)
	if _, err := postgres.ParseToken(r.header.Get(server.ConsistencyHeader)); err != nil {
		t.Fatalf("PATCH: %s header %q: %v", server.ConsistencyHeader, r.header.Get(server.ConsistencyHeader), err)
	}

	// A batch cut off by the body limit after storing some lines still
	// answers with the position of what it stored.
	small := startAPIServer(t, serverOpts{dbURL: dbURL, replicas: []string{standbyURL}, cfg: server.Config{MaxBatchBytes: 400}})
	var batch strings.Builder
	for i := range 10 {
		fmt.Fprintf(&batch, `{"doc_id": "cut%d", "text": "wire hold number %d", "classification": "public"}`+"\n", i, i)
	}
	r = small.call(t, "POST", "/v1/tenants/rep/documents:batch", w, batch.String(), "application/x-ndjson")
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a batch over the limit: %d %s, want 413", r.status, r.body)
	}
	if _, err := postgres.ParseToken(r.header.Get(server.ConsistencyHeader)); err != nil {
		t.Fatalf("413 after stored lines: %s header %q: %v", server.ConsistencyHeader, r.header.Get(server.ConsistencyHeader), err)
	}

	plain := startAPIServer(t, serverOpts{})
	plain.want(t, plain.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "rep"}), http.StatusCreated)
	r = plain.want(t, plain.call(t, "PUT", "/v1/tenants/rep/documents/a", w, map[string]any{"text": "wire hold", "classification": "public"}), http.StatusOK)
	if h := r.header.Get(server.ConsistencyHeader); h != "" {
		t.Fatalf("a server without replicas sent %s: %q", server.ConsistencyHeader, h)
	}
}

// BenchmarkReplicaReads measures read scale-out: 16 concurrent retrievals
// (SQL path) of a 2,000-document tenant on the primary alone, and with two
// hot standbys serving the reads. All servers share the benchmark's
// machine, so the replicas add capacity only where it has idle cores.
func BenchmarkReplicaReads(b *testing.B) {
	ctx := context.Background()
	dbURL := newDatabase(b)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		b.Fatal(err)
	}
	settings := index.DefaultSettings()
	writer := openStore(b, dbURL, postgres.Options{AutoCreate: &settings})
	words := strings.Fields("wire hold release treasury approval settlement window limit payment review desk card account ledger audit")
	var docs []cordontype.Document
	for i := range 2000 {
		var text []string
		for j := range 40 {
			text = append(text, words[(i*7+j*j)%len(words)])
		}
		docs = append(docs, cordontype.Document{Tenant: "rep", DocID: fmt.Sprintf("d%d", i), Text: strings.Join(text, " "), Classification: cordontype.Public})
	}
	if _, err := writer.PutBatch(ctx, docs); err != nil {
		b.Fatal(err)
	}
	tok := position(b, writer)
	var replicas []string
	for range 2 {
		u := startStandby(b).url(b, dbURL)
		waitReplay(b, u, tok)
		replicas = append(replicas, u)
	}
	for _, tc := range []struct {
		name     string
		replicas []string
	}{{"primary", nil}, {"replicas=2", replicas}} {
		b.Run(tc.name, func(b *testing.B) {
			st := openStore(b, dbURL, postgres.Options{MaxConns: 16, Replicas: tc.replicas})
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := retrieval.New(st).Retrieve(ctx, replicaQuery); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
			s := st.ReadStats()
			b.ReportMetric(float64(s.Primary)/float64(b.N), "primary-reads/op")
		})
	}
}

// TestReplicaLagBound: with ReplicaMaxLag, a read without a token goes to
// the standby only while the standby is known to hold every commit older
// than the bound. A paused standby behind a new write is skipped once the
// bound passes (the primary answers, with the write) and its stats report
// a lag above the bound; resumed, it serves again, within the bound.
func TestReplicaLagBound(t *testing.T) {
	sb := startStandby(t)
	ctx := context.Background()
	dbURL := migrated(t)
	standbyURL := sb.url(t, dbURL)
	settings := index.DefaultSettings()
	writer := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	const bound = 300 * time.Millisecond
	reader := openStore(t, dbURL, postgres.Options{Replicas: []string{standbyURL}, ReplicaMaxLag: bound})
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "a", Text: "wire hold for review", Classification: cordontype.Public})
	waitReplay(t, standbyURL, position(t, writer))
	read := func() retrieval.Result {
		t.Helper()
		res, err := retrieval.New(reader).Retrieve(ctx, replicaQuery)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return res
	}
	waitFor(t, "the standby to serve a read without a token", func() bool {
		read()
		return reader.ReadStats().Replicas[0].Served > 0
	})

	execSQL(t, standbyURL, `SELECT pg_wal_replay_pause()`)
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, standbyURL); err == nil {
			_, _ = c.Exec(ctx, `SELECT pg_wal_replay_resume()`)
			c.Close(ctx)
		}
	})
	put(t, writer, cordontype.Document{Tenant: "rep", DocID: "b", Text: "release the wire hold today", Classification: cordontype.Public})
	tok := position(t, writer)
	time.Sleep(2 * bound)
	before := reader.ReadStats()
	res := read()
	after := reader.ReadStats()
	if after.Primary != before.Primary+1 || after.Replicas[0].Lagging == before.Replicas[0].Lagging {
		t.Fatalf("a read past the lag bound: before %+v, after %+v, want it skipped to the primary", before, after)
	}
	if len(res.Chunks) != 2 {
		t.Fatalf("the primary's answer has %d chunks, want 2 (the write included)", len(res.Chunks))
	}
	if r := after.Replicas[0]; r.Lag <= bound || !r.OverLag {
		t.Fatalf("the paused standby's stats: %+v, want a lag above %v and OverLag", r, bound)
	}

	execSQL(t, standbyURL, `SELECT pg_wal_replay_resume()`)
	waitReplay(t, standbyURL, tok)
	waitFor(t, "the caught-up standby to serve again", func() bool {
		b := reader.ReadStats().Replicas[0].Served
		read()
		return reader.ReadStats().Replicas[0].Served > b
	})
	if r := reader.ReadStats().Replicas[0]; r.Lag > bound || r.OverLag {
		t.Fatalf("the caught-up standby's stats: %+v, want a lag within %v and not OverLag", r, bound)
	}
	if res := read(); len(res.Chunks) != 2 {
		t.Fatalf("the caught-up standby answered %d chunks, want 2", len(res.Chunks))
	}
}

// TestReplicaLagMetric: a server with a standby exports its lag as
// cordon_replica_lag_seconds{replica="1"}, without a lag bound too: under
// two seconds while it keeps up, rising while its replay is paused behind
// a write, falling once it catches up. No series names the standby's
// address.
func TestReplicaLagMetric(t *testing.T) {
	sb := startStandby(t)
	ctx := context.Background()
	dbURL := newDatabase(t)
	standbyURL := sb.url(t, dbURL)
	a := startAPIServer(t, serverOpts{dbURL: dbURL, replicas: []string{standbyURL}, metrics: true})
	admin := tok(t, "root", "admin")
	a.want(t, a.call(t, "POST", "/v1/tenants", admin, map[string]string{"tenant": "rep"}), http.StatusCreated)
	w := tok(t, "w", "tenant=rep", "writer")
	put := func(id string) {
		t.Helper()
		a.want(t, a.call(t, "PUT", "/v1/tenants/rep/documents/"+id, w, map[string]any{"text": "wire hold " + id, "classification": "public"}), http.StatusOK)
	}
	lagRE := regexp.MustCompile(`(?m)^cordon_replica_lag_seconds\{replica="1"\} (\S+)$`)
	lag := func() float64 {
		t.Helper()
		body := a.get(t, a.metricsURL+"/metrics")
		if u, err := url.Parse(standbyURL); err != nil || strings.Contains(body, u.Host) {
			t.Fatalf("the metrics name the standby's address %s (%v)", u.Host, err)
		}
		m := lagRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no cordon_replica_lag_seconds{replica=\"1\"} in the metrics")
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	put("a")
	waitFor(t, "the standby's lag under 2s", func() bool { return lag() < 2 })

	execSQL(t, standbyURL, `SELECT pg_wal_replay_pause()`)
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, standbyURL); err == nil {
			_, _ = c.Exec(ctx, `SELECT pg_wal_replay_resume()`)
			c.Close(ctx)
		}
	})
	put("b")
	waitFor(t, "the paused standby's lag above 3s", func() bool { return lag() > 3 })

	execSQL(t, standbyURL, `SELECT pg_wal_replay_resume()`)
	waitFor(t, "the resumed standby's lag under 2s", func() bool { return lag() < 2 })
}
