package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
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
	checkAgainstReplay(t, dbURL, steps, vocab, map[string]any{"tenant": "busy", "clearance": "public"}, "concurrent writes")
}

// checkAgainstReplay queries the tenants of dbURL, as principal, with a
// query per vocab word, and requires the answers of a reference store that
// replayed steps one after the other, byte for byte.
func checkAgainstReplay(t *testing.T, dbURL string, steps []any, vocab []string, principal map[string]any, after string) {
	t.Helper()
	var queries []any
	for _, v := range vocab {
		queries = append(queries, map[string]any{"op": "retrieve", "principal": principal,
			"query": v + " " + vocab[(len(v))%len(vocab)], "policy": map[string]any{"enable_rerank": false, "limit": retrieval.DefaultMaxLimit, "top_n": retrieval.DefaultMaxTopN}})
	}
	cfg := map[string]any{"max_words": 6, "overlap_words": 2}
	refScript, _ := json.Marshal(map[string]any{"config": cfg, "steps": append(steps, queries...)})
	ref := runMemory(t, refScript)
	qScript, _ := json.Marshal(map[string]any{"config": cfg, "steps": queries})
	got := runPostgresKeep(t, dbURL, qScript)
	refLines := bytes.Split(bytes.TrimSpace(ref), []byte("\n"))
	want := bytes.Join(refLines[len(steps):], []byte("\n"))
	if !bytes.Equal(bytes.TrimSpace(got), want) {
		t.Fatalf("after %s, postgres scores differ from the reference\n%s", after, firstDiff(want, bytes.TrimSpace(got)))
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

// TestConcurrentWritesOfSharedDocuments: writers put batches of documents
// drawn from one small pool of doc ids (in any order, so batches overlap),
// replace them with other labels and delete them, all at once on one
// tenant. No write may fail (no deadlock, no duplicate key), and afterwards
// every statistic must equal what the stored rows give: N and the length
// sum, each label set's counters, each document's chunks those of its
// stored text, the version the number of committed writes, and the scores
// those of the reference store fed the stored documents.
func TestConcurrentWritesOfSharedDocuments(t *testing.T) {
	ctx := context.Background()
	dbURL := migrated(t)
	settings := index.DefaultSettings()
	settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 6, 2
	st := openStore(t, dbURL, postgres.Options{AutoCreate: &settings, MaxConns: 16})
	vocab := []string{"hold", "release", "wire", "card", "fraud", "limit", "sanctions", "officer", "refund", "swift"}
	barrierSets := [][]string{nil, {"mna"}, {"trading"}, {"mna", "trading"}}
	const workers, opsPerWorker, pool = 8, 30, 12
	var writes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for i := range opsPerWorker {
				if r.IntN(5) == 0 {
					existed, err := st.Delete(ctx, "shared", fmt.Sprintf("d%d", r.IntN(pool)))
					if err != nil {
						errs <- err
						return
					}
					if existed {
						writes.Add(1)
					}
					continue
				}
				docs := make([]cordontype.Document, 1+r.IntN(5))
				for j := range docs {
					words := make([]byte, 0, 128)
					for range 3 + r.IntN(20) {
						words = append(words, vocab[r.IntN(len(vocab))]...)
						words = append(words, ' ')
					}
					docs[j] = cordontype.Document{Tenant: "shared", DocID: fmt.Sprintf("d%d", r.IntN(pool)),
						Text:           fmt.Sprintf("# w%d op %d\n%s", w, i, words),
						Classification: cordontype.Classification(r.IntN(4)), Barriers: barrierSets[r.IntN(len(barrierSets))]}
				}
				if _, err := st.PutBatch(ctx, docs); err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	if v := queryInt(t, dbURL, `SELECT version FROM cordon_t_shared.stats`); v != writes.Load() {
		t.Fatalf("stats.version = %d, want %d (one per committed write)", v, writes.Load())
	}
	for _, check := range []struct{ name, sql string }{
		{"n_chunks", `SELECT (SELECT n_chunks FROM cordon_t_shared.stats) - (SELECT count(*) FROM cordon_t_shared.chunks)`},
		{"sum_len", `SELECT (SELECT sum_len FROM cordon_t_shared.stats) - (SELECT coalesce(sum(length), 0) FROM cordon_t_shared.chunks)`},
		{"label_stats", `SELECT count(*) FROM (
			SELECT classification, barriers, n_chunks, sum_len FROM cordon_t_shared.label_stats WHERE n_chunks > 0 OR sum_len > 0
			EXCEPT SELECT classification, barriers, count(*), sum(length) FROM cordon_t_shared.chunks GROUP BY classification, barriers) d`},
		{"label_stats sum", `SELECT (SELECT count(*) FROM cordon_t_shared.chunks) - (SELECT coalesce(sum(n_chunks), 0) FROM cordon_t_shared.label_stats)`},
		{"chunk labels", `SELECT count(*) FROM cordon_t_shared.chunks c JOIN cordon_t_shared.documents d USING (doc_id)
			WHERE (c.classification, c.barriers, c.as_of_tick) IS DISTINCT FROM (d.classification, d.barriers, d.as_of_tick)`},
	} {
		if n := queryInt(t, dbURL, check.sql); n != 0 {
			t.Errorf("%s: %d rows off, want 0", check.name, n)
		}
	}
	// The stored documents, fed to the reference store, give the same
	// chunks and scores.
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT d.doc_id, d.text, d.classification, d.barriers, (SELECT count(*) FROM cordon_t_shared.chunks c WHERE c.doc_id = d.doc_id)
		FROM cordon_t_shared.documents d ORDER BY d.doc_id`)
	if err != nil {
		t.Fatal(err)
	}
	var steps []any
	for rows.Next() {
		var d cordontype.Document
		var class int16
		var chunks int64
		if err := rows.Scan(&d.DocID, &d.Text, &class, &d.Barriers, &chunks); err != nil {
			t.Fatal(err)
		}
		d.Tenant, d.Classification = "shared", cordontype.Classification(class)
		pcs, err := index.Prepare(&d, settings)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(pcs)) != chunks {
			t.Errorf("document %s has %d chunks stored, its text makes %d", d.DocID, chunks, len(pcs))
		}
		steps = append(steps, map[string]any{"op": "put", "document": map[string]any{
			"tenant": "shared", "doc_id": d.DocID, "text": d.Text, "classification": d.Classification.String(), "barriers": d.Barriers}})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatal("no document survived; the test proves nothing")
	}
	checkAgainstReplay(t, dbURL, steps, vocab,
		map[string]any{"tenant": "shared", "clearance": "restricted", "barriers": []string{"mna", "trading"}},
		"concurrent writes of shared documents")
}
