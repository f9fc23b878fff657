package integration_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cli"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/replay"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/postgres"
)

func runWith(st replay.Store, script []byte, w io.Writer) error {
	return replay.Run(context.Background(), script, func(context.Context, index.Settings) (replay.Store, error) { return st, nil }, w)
}

// snapshot is what a retrieval sees of a tenant, for before/after checks.
func snapshot(t *testing.T, st *postgres.Store, tenant string) string {
	t.Helper()
	pol := retrieval.DefaultPolicy()
	pol.EnableRerank, pol.TopN, pol.RerankDepth, pol.Limit = false, 100, 100, 100
	res, err := retrieval.New(st).Retrieve(context.Background(), retrieval.Query{
		Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Restricted},
		Text:      "original version replacement hold", Policy: pol,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range res.Chunks {
		b.WriteString(c.Chunk.ChunkID + "|" + c.Chunk.Text + "\n")
	}
	return b.String()
}

// TestFailedPutKeepsPreviousVersion: a replacement that fails mid-transaction
// (a trigger raises while its postings are written) leaves the old version,
// its chunks, postings and statistics intact.
func TestFailedPutKeepsPreviousVersion(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	put(t, st, cordontype.Document{Tenant: "ft", DocID: "d1", Text: "original version of the hold policy", Classification: cordontype.Public})
	before := snapshot(t, st, "ft")
	statsBefore := queryInt(t, dbURL, `SELECT n_chunks * 1000000 + sum_len FROM cordon_t_ft.stats`)
	// A rare term's postings go to its bucket row, whose packed postings
	// name it (store/postgres/packed.go); a common one's to a row of its own.
	execSQL(t, dbURL, `CREATE FUNCTION cordon_t_ft.explode() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.term = 'explode' OR 'explode' = ANY((cordon.unpack_postings(NEW.data)).terms) THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER explode BEFORE INSERT ON cordon_t_ft.postings FOR EACH ROW EXECUTE FUNCTION cordon_t_ft.explode()`)
	_, err := st.Put(ctx, cordontype.Document{Tenant: "ft", DocID: "d1", Text: "replacement that will explode midway", Classification: cordontype.Public})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("put: got %v, want the injected failure", err)
	}
	if after := snapshot(t, st, "ft"); after != before {
		t.Fatalf("failed put changed what is retrievable:\nbefore %q\nafter  %q", before, after)
	}
	if s := queryInt(t, dbURL, `SELECT n_chunks * 1000000 + sum_len FROM cordon_t_ft.stats`); s != statsBefore {
		t.Fatalf("failed put changed the statistics: %d -> %d", statsBefore, s)
	}
}

// TestKilledConnectionKeepsPreviousVersion: the server kills the writer's
// connection in the middle of a put; the old version survives and the store
// keeps working.
func TestKilledConnectionKeepsPreviousVersion(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings})
	put(t, st, cordontype.Document{Tenant: "kt", DocID: "d1", Text: "original version of the hold policy", Classification: cordontype.Public})
	before := snapshot(t, st, "kt")
	// Writing the term "sleepy" parks the writer inside its transaction.
	execSQL(t, dbURL, `CREATE FUNCTION cordon_t_kt.park() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.term = 'sleepy' OR 'sleepy' = ANY((cordon.unpack_postings(NEW.data)).terms) THEN PERFORM pg_sleep(30); END IF; RETURN NEW; END $$;
		CREATE TRIGGER park BEFORE INSERT ON cordon_t_kt.postings FOR EACH ROW EXECUTE FUNCTION cordon_t_kt.park()`)
	done := make(chan error, 1)
	go func() {
		_, err := st.Put(ctx, cordontype.Document{Tenant: "kt", DocID: "d1", Text: "sleepy replacement version", Classification: cordontype.Public})
		done <- err
	}()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	killed := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !killed; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed = n > 0
	}
	if !killed {
		t.Fatal("the put never reached the parked write")
	}
	if err := <-done; err == nil {
		t.Fatal("put succeeded although its connection was killed")
	}
	if after := snapshot(t, st, "kt"); after != before {
		t.Fatalf("killed put changed what is retrievable:\nbefore %q\nafter  %q", before, after)
	}
}

// TestUnreachableDatabase: a clear error and exit status, not a panic.
func TestUnreachableDatabase(t *testing.T) {
	const dead = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	_, err := postgres.Open(context.Background(), dead, postgres.Options{})
	if !errors.Is(err, postgres.ErrUnavailable) {
		t.Fatalf("open: got %v, want ErrUnavailable", err)
	}
	code, _, stderr := runCLI(t, nil, "migrate", "--database-url", dead)
	if code != cli.ExitError {
		t.Fatalf("cordon migrate exit code %d, want %d", code, cli.ExitError)
	}
	if !strings.Contains(stderr, "database unavailable") {
		t.Fatalf("stderr %q does not say the database is unavailable", stderr)
	}
}
