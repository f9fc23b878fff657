package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
)

// TestConcurrentWritesKeepStatisticsExact: many goroutines put, replace and
// delete documents of one tenant at once. Afterwards N, df and lengths must
// equal those of the reference store fed the same final documents, which the
// replay comparison checks through scores of many queries.
func TestConcurrentWritesKeepStatisticsExact(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 6, 2
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings, MaxConns: 16})
	vocab := []string{"hold", "release", "wire", "card", "fraud", "limit", "sanctions", "officer", "refund", "swift"}
	const workers, opsPerWorker = 8, 40
	var mu sync.Mutex
	final := map[string]*cordontype.Document{} // doc id -> last committed version (nil: deleted)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range opsPerWorker {
				// Each worker owns its doc ids, so its last operation on an id
				// is that id's final state; all workers share the tenant's
				// statistics rows.
				id := fmt.Sprintf("w%d-d%d", w, r.IntN(5))
				if r.IntN(4) == 0 {
					if _, err := st.Delete(ctx, "busy", id); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					final[id] = nil
					mu.Unlock()
					continue
				}
				words := make([]byte, 0, 128)
				for j := 0; j < 3+r.IntN(20); j++ {
					words = append(words, vocab[r.IntN(len(vocab))]...)
					words = append(words, ' ')
				}
				d := cordontype.Document{Tenant: "busy", DocID: id, Text: fmt.Sprintf("# op %d\n%s", i, words), Classification: cordontype.Public}
				if _, err := st.Put(ctx, d); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				final[id] = &d
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	// Statistics rows agree with the chunks.
	var live int64
	var sumLen int64
	for _, d := range final {
		if d == nil {
			continue
		}
		pcs, err := index.Prepare(d, settings)
		if err != nil {
			t.Fatal(err)
		}
		live += int64(len(pcs))
		for _, pc := range pcs {
			sumLen += int64(pc.Chunk.Length)
		}
	}
	if n := queryInt(t, dbURL, `SELECT n_chunks FROM cordon_t_busy.stats`); n != live {
		t.Fatalf("stats.n_chunks = %d, want %d", n, live)
	}
	if n := queryInt(t, dbURL, `SELECT sum_len FROM cordon_t_busy.stats`); n != sumLen {
		t.Fatalf("stats.sum_len = %d, want %d", n, sumLen)
	}
	// Scores over every vocabulary term equal the reference's, fed the final
	// documents: df, N and avgdl are exact.
	var steps []any
	for id, d := range final {
		if d != nil {
			steps = append(steps, map[string]any{"op": "put", "document": map[string]any{
				"tenant": "busy", "doc_id": id, "text": d.Text, "classification": "public"}})
		}
	}
	var queries []any
	for _, v := range vocab {
		queries = append(queries, map[string]any{"op": "retrieve", "principal": map[string]any{"tenant": "busy", "clearance": "public"},
			"query": v + " " + vocab[(len(v))%len(vocab)], "policy": map[string]any{"enable_rerank": false, "limit": 1000, "top_n": 1000}})
	}
	cfg := map[string]any{"max_words": 6, "overlap_words": 2}
	refScript, _ := json.Marshal(map[string]any{"config": cfg, "steps": append(steps, queries...)})
	ref := runMemory(t, refScript)
	qScript, _ := json.Marshal(map[string]any{"config": cfg, "steps": queries})
	got := runPostgresKeep(t, dbURL, qScript)
	refLines := bytes.Split(bytes.TrimSpace(ref), []byte("\n"))
	want := bytes.Join(refLines[len(steps):], []byte("\n"))
	if !bytes.Equal(bytes.TrimSpace(got), want) {
		t.Fatalf("after concurrent writes, postgres scores differ from the reference\n%s", firstDiff(want, bytes.TrimSpace(got)))
	}
}

// runPostgresKeep runs a script on the existing tenants of dbURL.
func runPostgresKeep(t *testing.T, dbURL string, script []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	st := openStore(t, dbURL, postgres.Options{})
	if err := runWith(st, script, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
