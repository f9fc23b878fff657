package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
	"github.com/cordon-rag/cordon/store/memory"
	"github.com/cordon-rag/cordon/store/postgres"
)

const reembedChildEnv = "CORDON_TEST_REEMBED_CHILD"

var reembedWords = strings.Fields(`ledger settlement currency swap margin collateral netting custody
	payment clearing invoice reconciliation audit exposure limit counterparty risk hedge bond coupon
	maturity yield equity dividend broker dealer trade order book quote spread liquidity funding`)

func reembedText(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = reembedWords[r.IntN(len(reembedWords))]
	}
	return strings.Join(w, " ")
}

// TestReembedUnderLoad moves a tenant from hashing to an embedding model
// and back while readers and writers run: a backfill killed mid-way (the
// process, SIGKILL) resumes with nothing lost, every read succeeds, and
// after each step the store answers byte for byte like a reference store
// built from scratch with the model then current.
func TestReembedUnderLoad(t *testing.T) {
	if u := os.Getenv(reembedChildEnv); u != "" {
		reembedChild(t, u)
		return
	}
	ctx := context.Background()
	dbURL := migrated(t)
	toy := &embedtest.Toy{Dims: 32}
	reg := embedtest.Registry("toy-32", toy)
	// The killed and resumed backfills run as 'cordon tenant reembed',
	// whose provider is this server (slow, so the kill lands mid-way).
	srv := httptest.NewServer(embedtest.Handler("toy-32", toy, 30*time.Millisecond))
	defer srv.Close()
	embedArgs := []string{"--embed-url", srv.URL, "--embed-api", "openai", "--embed-model", "toy-32", "--embed-dims", "32"}

	settings := index.DefaultSettings()
	settings.Dims = 64
	settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 12, 3
	st := openStore(t, dbURL, postgres.Options{Models: reg, CacheBytes: 1 << 28})
	defer st.Close()
	if _, err := st.CreateTenant(ctx, "acme", settings); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	docs := map[string]cordontype.Document{}
	r := rand.New(rand.NewPCG(5, 6))
	put := func(r *rand.Rand, id string) error {
		doc := cordontype.Document{Tenant: "acme", DocID: id, Text: reembedText(r, 10+r.IntN(40)), Classification: cordontype.Classification(r.IntN(2))}
		mu.Lock()
		defer mu.Unlock() // writes in the order the reference sees them
		if _, err := st.Put(ctx, doc); err != nil {
			return err
		}
		docs[id] = doc
		return nil
	}
	for i := range 120 {
		if err := put(r, fmt.Sprintf("d%03d", i)); err != nil {
			t.Fatal(err)
		}
	}

	// Load: two readers and one writer until stop.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, writes atomic.Int64
	errc := make(chan error, 8)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				q := retrieval.Query{Principal: cordontype.Principal{Tenant: "acme", Clearance: 1}, Text: reembedText(r, 3), Policy: retrieval.DefaultPolicy()}
				if _, err := retrieval.New(st).Retrieve(ctx, q); err != nil {
					errc <- fmt.Errorf("read: %w", err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(77, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := put(r, fmt.Sprintf("d%03d", r.IntN(160))); err != nil {
				errc <- fmt.Errorf("write: %w", err)
				return
			}
			writes.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	stopLoad := func() {
		close(stop)
		wg.Wait()
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
	}

	// Begin and kill a backfill in another process mid-way.
	cmd := exec.Command(os.Args[0], "-test.run=^TestReembedUnderLoad$")
	cmd.Env = append(os.Environ(), reembedChildEnv+"="+strings.Join(append([]string{dbURL}, embedArgs...), "\x1f"))
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	progressed := false
	var seen []string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "backfill acme: ") {
			progressed = true
			break
		}
		seen = append(seen, sc.Text())
	}
	if !progressed {
		t.Fatalf("the child never reported backfill progress:\n%s", strings.Join(seen, "\n"))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	rs, err := st.ReembedStatus(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if rs.State != "backfill" || rs.Next == nil || *rs.Next != (embed.Spec{Model: "toy-32", Dims: 32}) || rs.Filled == 0 || rs.Filled >= rs.Chunks {
		t.Fatalf("after the kill: %+v, want a partial backfill to toy-32/32", rs)
	}
	t.Logf("killed with %d of %d chunks filled", rs.Filled, rs.Chunks)

	// Resume through the CLI, cut over, and compare with the reference.
	code, stdout, stderr := runCLI(t, nil, append(append([]string{"tenant", "reembed", "--database-url", dbURL}, embedArgs...), "--to", "toy-32", "--to-dims", "32", "--batch", "16", "--cutover", "acme")...)
	if code != 0 || !strings.Contains(stdout, "backfill complete") || !strings.Contains(stdout, "shadow: ") || !strings.Contains(stdout, "cut over to toy-32/32") {
		t.Fatalf("resume and cut over: exit %d\n%s\n%s", code, stdout, stderr)
	}
	toySettings := settings
	toySettings.Model, toySettings.Dims = "toy-32", 32
	time.Sleep(50 * time.Millisecond) // reads and writes on the new model
	stopLoad()
	t.Logf("%d reads and %d writes ran during the re-embedding", reads.Load(), writes.Load())
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatal("no load ran")
	}
	compareWithReference(t, st, reg, toySettings, docs)

	// Roll back: hashing answers again, exactly.
	if code, _, stderr := runCLI(t, nil, "tenant", "reembed", "--database-url", dbURL, "--rollback", "acme"); code != 0 {
		t.Fatalf("rollback: %s", stderr)
	}
	compareWithReference(t, st, reg, settings, docs)
	// A write while rolled back stores both models' vectors: cutting over
	// again needs no backfill.
	if err := put(rand.New(rand.NewPCG(1, 1)), "late"); err != nil {
		t.Fatal(err)
	}
	if err := st.Cutover(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	// The cut-over replaced every vector: the column blocks hold the new
	// ones.
	if err := st.VerifyColumns(ctx, "acme"); err != nil {
		t.Fatalf("column blocks after the cut-over: %v", err)
	}
	compareWithReference(t, st, reg, toySettings, docs)
	if err := st.FinishReembed(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if rs, err := st.ReembedStatus(ctx, "acme"); err != nil || rs.State != "none" || rs.Filled != 0 || rs.Current != (embed.Spec{Model: "toy-32", Dims: 32}) {
		t.Fatalf("after finish: %+v, %v", rs, err)
	}
	compareWithReference(t, st, reg, toySettings, docs)
	// Steps out of order say what comes next.
	for _, f := range []func() error{
		func() error { return st.Cutover(ctx, "acme") },
		func() error { return st.FinishReembed(ctx, "acme") },
		func() error { return st.Rollback(ctx, "acme") },
		func() error { return st.BeginReembed(ctx, "acme", embed.Spec{Model: "toy-32", Dims: 32}) },
	} {
		if err := f(); !errors.Is(err, postgres.ErrReembed) {
			t.Fatalf("out-of-order step: %v, want ErrReembed", err)
		}
	}
}

// reembedChild runs 'cordon tenant reembed' for the parent, which kills it.
func reembedChild(t *testing.T, arg string) {
	f := strings.Split(arg, "\x1f")
	args := append(append([]string{"tenant", "reembed", "--database-url", f[0]}, f[1:]...), "--to", "toy-32", "--to-dims", "32", "--batch", "8", "acme")
	code := mainCLI(context.Background(), nil, os.Stdout, os.Stderr, args...)
	t.Fatalf("the child was not killed (exit %d)", code)
}

// compareWithReference requires st (SQL path and cached path) to answer a
// fixed set of queries byte for byte like a reference store built from
// docs with settings.
func compareWithReference(t *testing.T, st *postgres.Store, reg *embed.Registry, settings index.Settings, docs map[string]cordontype.Document) {
	t.Helper()
	ctx := context.Background()
	ref, err := memory.NewWithModels(settings, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if _, err := ref.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(3, 3))
	dense := 0
	for i := range 25 {
		pol := retrieval.DefaultPolicy()
		pol.EnableRerank = i%2 == 0
		q := retrieval.Query{Principal: cordontype.Principal{Tenant: "acme", Clearance: cordontype.Classification(i % 2)}, Text: reembedText(r, 1+i%4), Policy: pol}
		want, err := retrieval.New(ref).Retrieve(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := retrieval.New(st).Retrieve(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if !bytes.Equal(wb, gb) {
			t.Fatalf("model %s, query %q: the store differs from the reference\n%s", settings.Spec(), q.Text, firstDiff(wb, gb))
		}
		for _, c := range want.Chunks {
			if c.Cosine != nil {
				dense++
			}
		}
	}
	if dense == 0 {
		t.Fatalf("model %s: no query found a chunk on the dense side", settings.Spec())
	}
}
