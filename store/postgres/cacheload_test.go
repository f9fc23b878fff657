package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/embed/embedtest"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/index/memindex"
	"github.com/cordon-rag/cordon/store/memory"
)

// loadDocs are documents of several chunks each (small windows), with
// sections, repeated and non-ASCII terms, barriers and every
// classification, some replaced and some deleted after they are written.
func loadDocs(tenant string) []cordontype.Document {
	words := []string{"wire", "hold", "Zürich", "ledger", "release", "naïve", "payment", "ÉCLAIR", "review", "sanctions", "42", "x-ray"}
	var docs []cordontype.Document
	for i := range 24 {
		var b strings.Builder
		fmt.Fprintf(&b, "# Section %d\n\n", i)
		for j := range 30 + 7*i {
			b.WriteString(words[(i*j+j/3)%len(words)])
			if j%11 == 10 {
				b.WriteString(".\n\n## Part\n\n")
			} else {
				b.WriteString(" ")
			}
		}
		var barriers []string
		if i%3 == 1 {
			barriers = []string{"deal-b", "deal-a"}
		}
		docs = append(docs, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("doc-%02d", (i*7)%24), Text: b.String(),
			Classification: cordontype.Classification(i % 4), Barriers: barriers, AsOfTick: int64(10 * i)})
	}
	return docs
}

// TestStoredChunksAreThePreparedOnes: reading a tenant's stored chunk rows
// gives exactly the prepared chunks its write made (chunk fields, terms in
// first-occurrence order, term frequencies, vectors, NormSq), for the
// hashing model and a model whose vectors only the store has, under both
// statistics scopes; an index built from them equals one built from
// index.Prepare field for field; and the cache, loading them, answers as the
// reference does.
func TestStoredChunksAreThePreparedOnes(t *testing.T) {
	url := testDatabase(t)
	ctx := context.Background()
	toy := &embedtest.Toy{Dims: 24}
	reg := embedtest.Registry("toy-24", toy)
	small := index.DefaultSettings()
	small.Chunking.MaxWords, small.Chunking.OverlapWords = 20, 5
	model := small
	model.Model, model.Dims = "toy-24", 24
	tests := []struct {
		name     string
		settings index.Settings
	}{
		{"hash", small},
		{"model", model},
	}
	for _, tt := range tests {
		for _, scope := range []bm25.Scope{bm25.ScopeEntitled, bm25.ScopeTenant} {
			t.Run(fmt.Sprintf("%s/%s", tt.name, scope), func(t *testing.T) {
				settings := tt.settings
				settings.Statistics = scope
				tenant := fmt.Sprintf("load_%s_%s", tt.name, scope)
				w, err := Open(ctx, url, Options{AutoCreate: &settings, Models: reg})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Close)
				ref, err := memory.NewWithModels(settings, reg)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string][]index.PreparedChunk{}
				docs := loadDocs(tenant)
				for i, doc := range docs {
					if _, err := w.Put(ctx, doc); err != nil {
						t.Fatalf("put %s: %v", doc.DocID, err)
					}
					if _, err := ref.Put(ctx, doc); err != nil {
						t.Fatal(err)
					}
					if i%5 == 4 {
						if _, err := w.Delete(ctx, tenant, doc.DocID); err != nil {
							t.Fatal(err)
						}
						if _, err := ref.Delete(ctx, tenant, doc.DocID); err != nil {
							t.Fatal(err)
						}
						delete(want, doc.DocID)
						continue
					}
					pcs, err := index.Prepare(&doc, settings)
					if err != nil {
						t.Fatal(err)
					}
					if !settings.Spec().IsHash() {
						if err := index.Vectorize(ctx, reg, settings.Spec(), pcs); err != nil {
							t.Fatal(err)
						}
					}
					want[doc.DocID] = pcs
				}
				ids := slices.Sorted(func(yield func(string) bool) {
					for id := range want {
						if !yield(id) {
							return
						}
					}
				})
				if len(ids) < 15 {
					t.Fatalf("only %d documents stored", len(ids))
				}

				got, order := readStored(t, w, tenant, "", nil)
				if !slices.Equal(order, ids) {
					t.Fatalf("documents read in order %v, want %v", order, ids)
				}
				chunks := 0
				refs := map[int64]bool{}
				for _, id := range ids {
					chunks += len(want[id])
					// Each chunk names its own row; Prepare knows no rows.
					for i := range got[id] {
						if ref := got[id][i].Ref; ref <= 0 || refs[ref] {
							t.Fatalf("document %s chunk %d: row id %d, want a positive id of its own", id, i, ref)
						}
						refs[got[id][i].Ref] = true
						got[id][i].Ref = 0
					}
					if !reflect.DeepEqual(got[id], want[id]) {
						t.Fatalf("document %s: stored chunks read as\n  %+v\nwant (index.Prepare)\n  %+v", id, got[id], want[id])
					}
				}
				if chunks < 2*len(ids) {
					t.Fatalf("%d chunks for %d documents: want several chunks a document", chunks, len(ids))
				}
				some := []string{ids[0], ids[3], "missing"}
				part, order := readStored(t, w, tenant, ` WHERE c.doc_id = ANY($1)`, some)
				for i := range part[ids[3]] {
					part[ids[3]][i].Ref = 0
				}
				if !slices.Equal(order, some[:2]) || !reflect.DeepEqual(part[ids[3]], want[ids[3]]) {
					t.Fatalf("a subset read documents %v, want %v with their prepared chunks", order, some[:2])
				}

				built, stored := memindex.New(settings), memindex.New(settings)
				for _, id := range ids {
					built.Put(id, want[id])
					stored.Put(id, got[id])
				}
				if !reflect.DeepEqual(built, stored) {
					t.Fatal("the index built from the stored chunks differs from the one built by index.Prepare")
				}

				// The cache loads the tenant and answers as the reference.
				f := &cacheFixture{t: t, url: url, ref: ref, models: reg}
				f.sql = f.open(Options{Models: reg})
				cached := f.open(Options{CacheBytes: 1 << 30, Models: reg})
				for _, text := range []string{"wire ledger", "Zürich payment review", "naïve x-ray 42"} {
					q := cacheQuery(tenant, text)
					q.Principal.Clearance = cordontype.Restricted
					q.Principal.Barriers = []string{"deal-a", "deal-b"}
					f.check(text, cached, q)
					f.check(text+" (internal)", cached, cacheQuery(tenant, text))
				}
				if st := cached.CacheStats(); st.Loads != 1 || st.MemoryAnswers < 6 || st.SQLAnswers != 0 {
					t.Fatalf("%+v: want one load and every answer from memory", st)
				}
			})
		}
	}
}

// readStored reads tenant's chunk rows through forEachStoredDoc, with
// where and its argument ids, and returns them by document and the order
// of the documents.
func readStored(t *testing.T, s *Store, tenant, where string, ids []string) (map[string][]index.PreparedChunk, []string) {
	t.Helper()
	ctx := context.Background()
	out := map[string][]index.PreparedChunk{}
	var order []string
	_, err := s.inSnapshot(ctx, tenant, func(tx pgx.Tx, ti tenantInfo, _ statsRow) error {
		args := []any{binaryRows}
		if ids != nil {
			args = append(args, ids)
		}
		rows, err := tx.Query(ctx, chunkRowsSQL(ti, where), args...)
		if err != nil {
			return err
		}
		return forEachStoredDoc(rows, ti, true, false, func(d *storedDoc) error {
			out[d.docID] = d.pcs
			order = append(order, d.docID)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, order
}

func TestDecodeVector(t *testing.T) {
	enc := func(dims int, fs ...float32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(dims))
		b = binary.BigEndian.AppendUint16(b, 0)
		for _, f := range fs {
			b = binary.BigEndian.AppendUint32(b, math.Float32bits(f))
		}
		return b
	}
	tests := []struct {
		name string
		raw  []byte
		dims int
		want []int32
	}{
		{"integers", enc(3, 1, -7, 0), 3, []int32{1, -7, 0}},
		{"the bound", enc(2, index.MaxCount, -index.MaxCount), 2, []int32{index.MaxCount, -index.MaxCount}},
		{"negative zero", enc(1, float32(math.Copysign(0, -1))), 1, []int32{0}},
		{"a fraction", enc(2, 1, 0.5), 2, nil},
		{"beyond the bound", enc(1, index.MaxCount+2), 1, nil},
		{"NaN", enc(1, float32(math.NaN())), 1, nil},
		{"other dimensions", enc(2, 1, 2), 3, nil},
		{"short", enc(3, 1, 2), 3, nil},
		{"no header", []byte{0, 1}, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeVector(tt.raw, tt.dims)
			if tt.want == nil {
				if !errors.Is(err, errChunkRow) {
					t.Fatalf("decodeVector = %v, %v; want an errChunkRow error", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("decodeVector = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
