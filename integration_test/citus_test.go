package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// The Citus tests run against the coordinator of a Citus cluster named by
// CORDON_TEST_CITUS_URL (make test starts one with scripts/citus-cluster.sh:
// a coordinator and two workers). Without it they skip loudly, except when
// CORDON_REQUIRE_CITUS=1: then they fail.

// citusBase, while set (by onCitus), makes newDatabase create its
// databases on the Citus cluster, so that tests written for one
// PostgreSQL run unchanged on a coordinator.
var citusBase string

func requireCitus(t testing.TB) string {
	t.Helper()
	u := os.Getenv("CORDON_TEST_CITUS_URL")
	if u == "" {
		if os.Getenv("CORDON_REQUIRE_CITUS") == "1" {
			t.Fatal("a Citus cluster is required here (CORDON_REQUIRE_CITUS=1): set CORDON_TEST_CITUS_URL to its coordinator (scripts/citus-cluster.sh start prints it)")
		}
		t.Skip("SKIPPING Citus test: CORDON_TEST_CITUS_URL is not set (make test starts a cluster with scripts/citus-cluster.sh)")
	}
	return u
}

// onCitus makes the rest of t's newDatabase calls create Citus databases.
func onCitus(t *testing.T) {
	t.Helper()
	citusBase = requireCitus(t)
	t.Cleanup(func() { citusBase = "" })
}

// citusNode is a node's address as the coordinator's pg_dist_node has it.
type citusNode struct {
	host string
	port int
}

func (n citusNode) String() string { return net.JoinHostPort(n.host, strconv.Itoa(n.port)) }

// citusWorkers lists the workers of the cluster whose coordinator is at
// base.
func citusWorkers(t testing.TB, base string) []citusNode {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the coordinator: %v", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeport`)
	if err != nil {
		t.Fatalf("list workers: %v", err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (citusNode, error) {
		var n citusNode
		err := r.Scan(&n.host, &n.port)
		return n, err
	})
	if err != nil {
		t.Fatalf("list workers: %v", err)
	}
	if len(ws) == 0 {
		t.Fatal("the Citus coordinator has no workers (citus_add_node)")
	}
	return ws
}

// withNode returns u with its host and port set to n's and its database to
// db ("" keeps it).
func withNode(t testing.TB, u string, n *citusNode, db string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if n != nil {
		p.Host = n.String()
	}
	if db != "" {
		p.Path = "/" + db
	}
	return p.String()
}

// coordinatorNode is the coordinator's own address, from base.
func coordinatorNode(t testing.TB, base string) citusNode {
	t.Helper()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	return citusNode{host: cfg.Host, port: int(cfg.Port)}
}

// newCitusDatabase creates an empty database on every node of the cluster
// at base, with the citus and vector extensions, registers the coordinator
// in it and, with addWorkers, the workers; it drops the database on every
// node afterwards. It returns the coordinator's URL of the database.
func newCitusDatabase(t testing.TB, base string, addWorkers bool) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("cordon_ci_%d_%d", os.Getpid(), dbCounter.Add(1))
	coord := coordinatorNode(t, base)
	nodes := append([]citusNode{coord}, citusWorkers(t, base)...)
	for _, n := range nodes {
		admin, err := pgx.Connect(ctx, withNode(t, base, &n, "postgres"))
		if err != nil {
			t.Fatalf("connect to node %s: %v", n, err)
		}
		_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		admin.Close(ctx)
		if err != nil {
			t.Fatalf("create database on node %s: %v", n, err)
		}
		t.Cleanup(func() {
			admin, err := pgx.Connect(ctx, withNode(t, base, &n, "postgres"))
			if err != nil {
				return
			}
			defer admin.Close(ctx)
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		})
		citusExec(t, withNode(t, base, &n, name), `CREATE EXTENSION citus; CREATE EXTENSION vector`)
	}
	dbURL := withNode(t, base, nil, name)
	citusExec(t, dbURL, `SELECT citus_set_coordinator_host($1, $2)`, coord.host, coord.port)
	if addWorkers {
		addCitusWorkers(t, base, dbURL)
	}
	return dbURL
}

// addCitusWorkers adds the workers of the cluster at base to the database
// at dbURL.
func addCitusWorkers(t testing.TB, base, dbURL string) {
	t.Helper()
	for _, w := range citusWorkers(t, base) {
		citusExec(t, dbURL, `SELECT citus_add_node($1, $2)`, w.host, w.port)
	}
}

// TestCitusSuite runs tests written for one PostgreSQL on a Citus
// coordinator, each in a database of its own on the cluster: every tenant
// they create is a distributed schema on a worker. Replays and the
// hidden-documents test compare byte for byte with the reference store.
func TestCitusSuite(t *testing.T) {
	onCitus(t)
	// Fewer random scripts and corpora than on one PostgreSQL: each write
	// and query takes extra round trips through the coordinator, and these
	// test what Citus changes (routing, placement), which every script
	// and corpus exercises alike.
	scripts, rounds := *diffScripts, hiddenRounds
	*diffScripts, hiddenRounds = 4, 1
	t.Cleanup(func() { *diffScripts, hiddenRounds = scripts, rounds })
	for _, tt := range []struct {
		name string
		test func(*testing.T)
	}{
		{"DifferentialGoldenScripts", TestDifferentialGoldenScripts},
		{"DifferentialRandomScripts", TestDifferentialRandomScripts},
		{"HiddenDocumentsChangeNothingAPrincipalReceives", TestHiddenDocumentsChangeNothingAPrincipalReceives},
		{"CrossTenantProbes", TestCrossTenantProbes},
		{"HiddenChunksNeverLeaveTheDatabase", TestHiddenChunksNeverLeaveTheDatabase},
		{"AuditGroupCommitConcurrent", TestAuditGroupCommitConcurrent},
		{"ServerAuditConcurrentRetrieve", TestServerAuditConcurrentRetrieve},
		{"CacheCoherentAcrossReplicas", TestCacheCoherentAcrossReplicas},
		{"CacheTenantRecreated", TestCacheTenantRecreated},
		{"PostingsGarbageCollected", TestPostingsGarbageCollected},
		{"MigrateBuildsColumnBlocks", TestMigrateBuildsColumnBlocks},
	} {
		t.Run(tt.name, tt.test)
	}
}

// TestCitusTenantsOnWorkers: on a coordinator, a created tenant is a
// distributed schema whose eight tables are all on one worker; the
// registry is a reference table and the service roles stay on the
// coordinator; the audit log stays append-only on the worker and its
// chain appends and verifies.
func TestCitusTenantsOnWorkers(t *testing.T) {
	ctx := context.Background()
	dbURL := newCitusDatabase(t, requireCitus(t), true)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	st := openStore(t, dbURL, postgres.Options{AuditKeys: testKeyring("k1")})
	coord := coordinatorNode(t, dbURL).String()
	nodes := map[string]int{}
	for i := range 4 {
		tenant := fmt.Sprintf("t%d", i)
		if _, err := st.CreateTenant(ctx, tenant, index.DefaultSettings()); err != nil {
			t.Fatalf("create %s: %v", tenant, err)
		}
		p, err := st.TenantPlacement(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Distributed || p.Tables != 8 || p.Node == coord {
			t.Fatalf("tenant %s: placement %+v, want 8 tables on a worker", tenant, p)
		}
		nodes[p.Node]++
		put(t, st, cordontype.Document{Tenant: tenant, DocID: "d1", Text: "wire hold release", Classification: cordontype.Public})
		for j := range 3 {
			if _, err := st.AppendAudit(ctx, tenant, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: fmt.Sprint(j)}); err != nil {
				t.Fatalf("append audit to %s: %v", tenant, err)
			}
		}
		sum, err := st.VerifyAudit(ctx, tenant)
		if err != nil || sum.Rows != 3 {
			t.Fatalf("verify audit of %s: %d rows, err %v; want 3 rows", tenant, sum.Rows, err)
		}
	}
	t.Logf("tenants per worker: %v", nodes)
	if got := queryString(t, dbURL, `SELECT citus_table_type FROM citus_tables WHERE table_name = 'cordon.tenants'::regclass`); got != "reference" {
		t.Fatalf("cordon.tenants is %q, want a reference table", got)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM citus_tables WHERE table_name::text IN ('cordon.service_roles', 'goose_db_version')`); n != 0 {
		t.Fatalf("%d of cordon.service_roles, goose_db_version are Citus tables, want 0", n)
	}
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, stmt := range []string{`UPDATE cordon_t_t0.audit SET sub = 'x'`, `DELETE FROM cordon_t_t0.audit`} {
		_, err := c.Exec(ctx, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "CD002" {
			t.Fatalf("%s on the cluster: %v, want the append-only error CD002", stmt, err)
		}
	}
}

// TestCitusDistributeExistingTenant: a tenant created before the cluster
// had workers holds documents and an audit chain; 'cordon tenant
// distribute' moves it to a worker, and it answers as before.
func TestCitusDistributeExistingTenant(t *testing.T) {
	ctx := context.Background()
	dbURL := newCitusDatabase(t, requireCitus(t), false)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	for i := range 20 {
		put(t, st, cordontype.Document{Tenant: "legacy", DocID: fmt.Sprintf("d%02d", i),
			Text: fmt.Sprintf("wire hold %d released after review of ledger %d", i, i%7), Classification: cordontype.Classification(i % 3)})
	}
	for j := range 5 {
		if _, err := st.AppendAudit(ctx, "legacy", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: fmt.Sprint(j)}); err != nil {
			t.Fatal(err)
		}
	}
	q := retrieval.Query{Principal: cordontype.Principal{Tenant: "legacy", Clearance: cordontype.Internal},
		Text: "wire hold ledger 3", NowTick: 50, Policy: retrieval.DefaultPolicy()}
	before, err := retrieval.New(st).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DistributeTenant(ctx, "legacy"); !errors.Is(err, postgres.ErrNoCitus) {
		t.Fatalf("distribute without workers: %v, want ErrNoCitus", err)
	}
	addCitusWorkers(t, requireCitus(t), dbURL)
	out := cordonCLI(t, "tenant", "distribute", "--database-url", dbURL, "legacy")
	t.Logf("%s", out)
	p, err := st.TenantPlacement(ctx, "legacy")
	if err != nil || !p.Distributed || p.Tables != 8 {
		t.Fatalf("placement %+v, err %v; want 8 distributed tables", p, err)
	}
	if done, err := st.DistributeTenant(ctx, "legacy"); err != nil || done {
		t.Fatalf("distributing again: %v, %v; want false, nil", done, err)
	}
	after, err := retrieval.New(st).Retrieve(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, before.Chunks) != mustJSON(t, after.Chunks) || len(after.Chunks) == 0 {
		t.Fatalf("after distributing:\n%s\nbefore:\n%s", mustJSON(t, after.Chunks), mustJSON(t, before.Chunks))
	}
	if _, err := st.AppendAudit(ctx, "legacy", audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: "after"}); err != nil {
		t.Fatal(err)
	}
	if sum, err := st.VerifyAudit(ctx, "legacy"); err != nil || sum.Rows != 6 {
		t.Fatalf("verify: %d rows, err %v; want 6", sum.Rows, err)
	}
}

// citusExec runs SQL on db for test setup (execSQL for a testing.TB).
func citusExec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", firstLine(sql), err)
	}
}

// shardColumns counts, on the worker holding tenant's tables, the columns
// named column of the shards of table (the shards' own catalog rows, which
// Citus hides from other queries on a worker).
func shardColumns(t *testing.T, dbURL string, st *postgres.Store, tenant, table, column string) int64 {
	t.Helper()
	ctx := context.Background()
	p, err := st.TenantPlacement(ctx, tenant)
	if err != nil || !p.Distributed {
		t.Fatalf("placement of %s: %+v, %v", tenant, p, err)
	}
	host, port, _ := net.SplitHostPort(p.Node)
	n, _ := strconv.Atoi(port)
	c, err := pgx.Connect(ctx, withNode(t, dbURL, &citusNode{host: host, port: n}, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `SET citus.override_table_visibility = off`); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := c.QueryRow(ctx, `
		SELECT count(*) FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'cordon_t_' || $1 AND c.relname ~ ('^' || $2 || '_[0-9]+$')
		  AND a.attname = $3 AND NOT a.attisdropped`, tenant, table, column).Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCitusMigrationsReachWorkers: goose migrations run on the coordinator
// and change every tenant's shards on the workers, down and up again, and
// the tenants answer as before.
func TestCitusMigrationsReachWorkers(t *testing.T) {
	ctx := context.Background()
	dbURL := newCitusDatabase(t, requireCitus(t), true)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	tenants := []string{"north", "south", "east"}
	answers := map[string]string{}
	for _, tenant := range tenants {
		for i := range 10 {
			put(t, st, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("d%d", i),
				Text: fmt.Sprintf("%s ledger %d wire hold release", tenant, i), Classification: cordontype.Public})
		}
		res, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Public},
			Text: "ledger 3 wire", Policy: retrieval.DefaultPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		answers[tenant] = mustJSON(t, res.Chunks)
	}
	check := func(step string, want int64) {
		t.Helper()
		for _, tenant := range tenants {
			for _, c := range []struct{ table, column string }{{"postings", "terms"}} {
				if got := shardColumns(t, dbURL, st, tenant, c.table, c.column); got != want {
					t.Errorf("%s: tenant %s: %d shards of %s with column %s on its worker, want %d", step, tenant, got, c.table, c.column, want)
				}
			}
		}
	}
	check("migrated", 1)
	// Down to 10 and up again re-runs tenant schema versions 9 and 10
	// (migrations 00011 and 00012): dropping a constraint, creating an
	// index, adding a column and a constraint, and rewriting postings rows,
	// all inside functions. Older migrations add columns to the registry
	// with a CHECK in one statement, which Citus refuses on a reference
	// table.
	if err := migrate.DownTo(ctx, dbURL, 10); err != nil {
		t.Fatalf("down to 10: %v", err)
	}
	check("down to 10", 0)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("up again: %v", err)
	}
	check("up again", 1)
	for _, tenant := range tenants {
		p, err := st.TenantPlacement(ctx, tenant)
		if err != nil || p.Tables != 8 {
			t.Fatalf("tenant %s after down and up: placement %+v, %v; want 8 tables on one worker", tenant, p, err)
		}
		res, err := retrieval.New(st).Retrieve(ctx, retrieval.Query{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Public},
			Text: "ledger 3 wire", Policy: retrieval.DefaultPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(t, res.Chunks); got != answers[tenant] {
			t.Fatalf("tenant %s after down and up:\n%s\nwant\n%s", tenant, got, answers[tenant])
		}
	}
}

func queryString(t *testing.T, dbURL, sql string, args ...any) string {
	t.Helper()
	return queryOne[string](t, dbURL, sql, args...)
}

// moveProbe is what the readers of TestCitusTenantMove saw go wrong.
type moveProbe struct {
	mu   sync.Mutex
	errs []string
}

func (p *moveProbe) fail(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) < 10 {
		p.errs = append(p.errs, fmt.Sprintf(format, args...))
	}
}

// maxDuration keeps the longest duration stored into it.
type maxDuration struct{ v atomic.Int64 }

func (m *maxDuration) add(d time.Duration) {
	for {
		old := m.v.Load()
		if int64(d) <= old || m.v.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

func (m *maxDuration) get() time.Duration { return time.Duration(m.v.Load()) }

// TestCitusTenantMove moves a tenant to the other worker
// (citus_move_shard_placement of its schema's colocation group) while
// writers, audit appenders and readers (SQL and in-memory paths) run:
// no acknowledged write or audit record is lost, every answer is one
// committed state (each writer's documents a prefix of what it wrote,
// both rankings over the same documents, every write acknowledged before
// the query began included), and the audit chain verifies. It reports how
// long the move took and the longest a write waited.
func TestCitusTenantMove(t *testing.T) {
	ctx := context.Background()
	dbURL := newCitusDatabase(t, requireCitus(t), true)
	if _, err := migrate.Up(ctx, dbURL); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings, MaxConns: 16})
	cached := openStore(t, dbURL, postgres.Options{CacheBytes: 1 << 28, MaxConns: 8})
	const tenant, writers = "mover", 2
	// CORDON_CITUS_MOVE_DOCS seeds a larger tenant, to measure how the
	// time a move blocks writes grows (docs/benchmarks.md, "Citus").
	seeded := 200
	if n, err := strconv.Atoi(os.Getenv("CORDON_CITUS_MOVE_DOCS")); err == nil && n > 0 {
		seeded = n
	}
	for from := 0; from < seeded; from += 500 {
		var batch []cordontype.Document
		for i := from; i < min(from+500, seeded); i++ {
			batch = append(batch, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("seed-%06d", i),
				Text: fmt.Sprintf("zqmover seed ledger %d wire hold release and review of account %d", i, i%17), Classification: cordontype.Public})
		}
		if _, err := st.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	before, err := st.TenantPlacement(ctx, tenant)
	if err != nil || !before.Distributed {
		t.Fatalf("placement %+v, %v", before, err)
	}
	var target citusNode
	for _, w := range citusWorkers(t, requireCitus(t)) {
		if w.String() != before.Node {
			target = w
		}
	}
	if target.host == "" {
		t.Fatal("no other worker to move to")
	}

	var (
		acked      [writers]atomic.Int64
		auditAcked sync.Map // request id -> seq
		putMax     maxDuration
		readMax    maxDuration
		trouble    moveProbe
		reads      atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("w%d-%05d", g, i),
					Text: fmt.Sprintf("zqmover writer %d document %d", g, i), Classification: cordontype.Public}
				for {
					start := time.Now()
					_, err := st.Put(ctx, d)
					putMax.add(time.Since(start))
					if err == nil {
						break
					}
					trouble.fail("put %s: %v (retried)", d.DocID, err)
				}
				acked[g].Store(int64(i + 1))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("a-%05d", i)
			r, err := st.AppendAudit(ctx, tenant, audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", RequestID: id})
			if err != nil {
				trouble.fail("append audit %s: %v", id, err)
				continue
			}
			auditAcked.Store(id, r.Seq)
		}
	}()
	principal := cordontype.Principal{Tenant: tenant, Clearance: cordontype.Public, Barriers: []string{}}
	probe := analysis.Tokenize("zqmover") // as the analyzer indexes it
	for _, on := range []*postgres.Store{st, cached} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var floor [writers]int64
				for g := range writers {
					floor[g] = acked[g].Load()
				}
				start := time.Now()
				rk, err := on.Rank(ctx, retrieval.RankRequest{Principal: principal, Tokens: probe, Terms: probe, TopN: 1 << 20})
				readMax.add(time.Since(start))
				if err != nil {
					trouble.fail("rank: %v", err)
					continue
				}
				reads.Add(1)
				if msg := checkMoveSnapshot(rk, floor[:]); msg != "" {
					trouble.fail("%s", msg)
				}
			}
		}()
	}

	size := queryString(t, dbURL, `SELECT pg_size_pretty(sum(shard_size)) FROM citus_shards s JOIN pg_class c ON c.oid = s.table_name
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cordon_t_mover'`)
	time.Sleep(1500 * time.Millisecond)
	moveStart := time.Now()
	execSQL(t, dbURL, `SELECT citus_move_shard_placement(
			(SELECT shardid FROM citus_shards WHERE table_name = 'cordon_t_mover.stats'::regclass),
			$1, $2, $3, $4, shard_transfer_mode => 'block_writes')`,
		strings.Split(before.Node, ":")[0], mustAtoi(t, strings.Split(before.Node, ":")[1]), target.host, target.port)
	moved := time.Since(moveStart)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, e := range trouble.errs {
		t.Errorf("during the move: %s", e)
	}

	after, err := st.TenantPlacement(ctx, tenant)
	if err != nil || after.Node != target.String() || after.Tables != 8 {
		t.Fatalf("after the move: placement %+v, %v; want 8 tables on %s", after, err, target)
	}
	for _, on := range []*postgres.Store{st, cached} {
		rk, err := on.Rank(ctx, retrieval.RankRequest{Principal: principal, Tokens: probe, Terms: probe, TopN: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var floor [writers]int64
		for g := range writers {
			floor[g] = acked[g].Load()
		}
		if msg := checkMoveSnapshot(rk, floor[:]); msg != "" {
			t.Fatalf("after the move: %s", msg)
		}
		if want := seeded + int(floor[0]+floor[1]); len(rk.Lexical) != want {
			t.Fatalf("after the move: %d documents, want %d (%d seeded and every acknowledged write)", len(rk.Lexical), want, seeded)
		}
	}
	sum, err := st.VerifyAudit(ctx, tenant)
	if err != nil {
		t.Fatalf("verify audit after the move: %v", err)
	}
	_, byReq := storedAuditOf(t, dbURL, tenant)
	n := 0
	auditAcked.Range(func(k, v any) bool {
		n++
		if seq, ok := byReq[k.(string)]; !ok || seq != v.(int64) {
			t.Errorf("acknowledged audit record %s (seq %d) is stored at seq %d (present %v)", k, v, seq, ok)
		}
		return true
	})
	t.Logf("moved a tenant of %d seeded documents (%s) %s -> %s in %v (block_writes); writes acknowledged: %d and %d, audit records %d (chain of %d verifies), reads %d (%d taken again after the move); longest put %v, longest read %v",
		seeded, size, before.Node, after.Node, moved.Round(time.Millisecond), acked[0].Load(), acked[1].Load(), n, sum.Rows, reads.Load(), st.MovedReads()+cached.MovedReads(),
		putMax.get().Round(time.Millisecond), readMax.get().Round(time.Millisecond))
}

// checkMoveSnapshot says what is wrong with rankings over "zqmover" in
// TestCitusTenantMove ("" when nothing): the dense side's documents must
// be among the lexical side's, and each writer's documents a prefix of
// what it wrote, at least floor[g] long.
func checkMoveSnapshot(rk retrieval.Rankings, floor []int64) string {
	docs := func(hs []retrieval.Hit) map[string]bool {
		m := map[string]bool{}
		for _, h := range hs {
			doc, _, _ := strings.Cut(h.Chunk.ChunkID, "::")
			m[doc] = true
		}
		return m
	}
	// Every document holds "zqmover": the lexical side ranks them all, the
	// dense side those whose hashed vector has a positive dot product with
	// the query's (a colliding token can cancel it).
	lex, dense := docs(rk.Lexical), docs(rk.Dense)
	for d := range dense {
		if !lex[d] {
			return fmt.Sprintf("document %s ranked densely but not lexically: two states in one answer", d)
		}
	}
	for g, f := range floor {
		n := int64(0)
		for lex[fmt.Sprintf("w%d-%05d", g, n)] {
			n++
		}
		for d := range lex {
			var wg, i int64
			if _, err := fmt.Sscanf(d, "w%d-%d", &wg, &i); err == nil && wg == int64(g) && i >= n {
				return fmt.Sprintf("writer %d: document %d is there but not document %d: not one committed state", g, i, n)
			}
		}
		if n < f {
			var some []string
			for d := range lex {
				if strings.HasPrefix(d, fmt.Sprintf("w%d-", g)) && len(some) < 5 {
					some = append(some, d)
				}
			}
			return fmt.Sprintf("writer %d: %d documents, but %d were acknowledged before the query began: a write was lost (%d ranked, of them %v)", g, n, f, len(lex), some)
		}
	}
	return ""
}

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// storedAuditOf reads tenant's audit rows: seq -> hex hash, and request
// id -> seq.
func storedAuditOf(t *testing.T, dbURL, tenant string) (map[int64]string, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT seq, encode(hash, 'hex'), request_id FROM `+pgx.Identifier{"cordon_t_" + tenant, "audit"}.Sanitize()+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	bySeq, byReq := map[int64]string{}, map[string]int64{}
	for rows.Next() {
		var seq int64
		var h, req string
		if err := rows.Scan(&seq, &h, &req); err != nil {
			t.Fatal(err)
		}
		bySeq[seq], byReq[req] = h, seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return bySeq, byReq
}
