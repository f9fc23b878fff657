package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/retrieval"
)

// TestPackedCodec checks packed postings against hand-written bytes, a
// round trip of random rows, and the refusal of every truncation and of
// each malformed field.
func TestPackedCodec(t *testing.T) {
	term := appendPacked(nil, []int64{5, 6, 300}, []int32{1, 2, 1 << 30}, nil)
	want := []byte{1, 3,
		10, 2, 0xcc, 0x04, // 5, +1, +294 (zigzag: 588)
		1, 2, 0x80, 0x80, 0x80, 0x80, 0x04,
		0, // no runs: a term row
	}
	if !bytes.Equal(term, want) {
		t.Fatalf("term row\n got %v\nwant %v", term, want)
	}
	bucket := appendPacked(nil, []int64{9, 4, 7}, []int32{1, 1, 3}, []termRun{{term: []byte("ab"), n: 1}, {term: []byte("b"), n: 2}})
	want = []byte{1, 3,
		18, 9, 6, // 9, -5, +3
		1, 1, 3,
		2, 2, 'a', 'b', 1, 1, 'b', 2,
	}
	if !bytes.Equal(bucket, want) {
		t.Fatalf("bucket row\n got %v\nwant %v", bucket, want)
	}
	var chunks []int64
	var tfs []int32
	var runs []termRun
	if err := decodePacked(&chunks, &tfs, &runs, bucket); err != nil || !slices.Equal(chunks, []int64{9, 4, 7}) || !slices.Equal(tfs, []int32{1, 1, 3}) ||
		len(runs) != 2 || string(runs[0].term) != "ab" || runs[1].n != 2 {
		t.Fatalf("bucket row decoded to %v %v %v (err %v)", chunks, tfs, runs, err)
	}

	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 200 {
		n := 1 + rng.IntN(300)
		c := make([]int64, n)
		f := make([]int32, n)
		id := rng.Int64N(1<<50) - 1<<49
		for i := range c {
			id += 1 + rng.Int64N(1+int64(trial)*1000)
			c[i], f[i] = id, 1+rng.Int32N(math.MaxInt32)
		}
		data := appendPacked([]byte{7}, c, f, nil)[1:]
		gc, gf, gr := []int64{-1}, []int32{-1}, []termRun(nil)
		if err := decodePacked(&gc, &gf, &gr, data); err != nil || !slices.Equal(gc[1:], c) || !slices.Equal(gf[1:], f) || gr != nil {
			t.Fatalf("trial %d: round trip lost postings (err %v)", trial, err)
		}
	}

	for _, data := range [][]byte{term, bucket} {
		for i := range len(data) {
			if err := decodePacked(&chunks, &tfs, &runs, data[:i]); !errors.Is(err, errPacked) {
				t.Fatalf("%v truncated to %d bytes: err %v", data, i, err)
			}
		}
		if err := decodePacked(&chunks, &tfs, &runs, append(slices.Clone(data), 0)); !errors.Is(err, errPacked) {
			t.Fatalf("trailing byte accepted: %v", err)
		}
	}
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"format", []byte{2, 1, 2, 1, 0}},
		{"no postings", []byte{1, 0, 0}},
		{"count beyond the data", []byte{1, 0x7f, 2, 1, 0}},
		{"ids not ascending", []byte{1, 2, 4, 0, 1, 1, 0}},
		{"ids descending", []byte{1, 2, 4, 1, 1, 1, 0}},
		{"tf zero", []byte{1, 1, 2, 0, 0}},
		{"tf over int32", []byte{1, 1, 2, 0x80, 0x80, 0x80, 0x80, 0x08, 0}},
		{"id overflow", append(append([]byte{1, 2}, binary.AppendVarint(binary.AppendVarint(nil, math.MaxInt64), 1)...), 1, 1, 0)},
		{"more runs than postings", []byte{1, 1, 2, 1, 2, 1, 'a', 1, 1, 'b', 1}},
		{"run of zero", []byte{1, 2, 2, 2, 1, 1, 2, 1, 'a', 0, 1, 'b', 2}},
		{"runs short of the row", []byte{1, 2, 2, 2, 1, 1, 1, 1, 'a', 1}},
		{"run beyond the row", []byte{1, 2, 2, 2, 1, 1, 1, 1, 'a', 3}},
		{"terms out of order", []byte{1, 2, 2, 2, 1, 1, 2, 1, 'b', 1, 1, 'a', 1}},
		{"term twice", []byte{1, 2, 2, 2, 1, 1, 2, 1, 'a', 1, 1, 'a', 1}},
		{"ids not ascending in a run", []byte{1, 2, 4, 1, 1, 1, 1, 1, 'a', 2}},
		{"term beyond the data", []byte{1, 1, 2, 1, 1, 9, 'a', 1}},
		{"overlong varint", []byte{1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, f, r := []int64{42}, []int32{42}, []termRun{{n: 42}}
			if err := decodePacked(&c, &f, &r, tt.data); !errors.Is(err, errPacked) {
				t.Fatalf("decoded %v %v %v (err %v), want errPacked", c, f, r, err)
			}
			if len(c) != 1 || len(f) != 1 || len(r) != 1 {
				t.Fatalf("a refused row left %d chunks, %d tfs, %d runs appended", len(c)-1, len(f)-1, len(r)-1)
			}
		})
	}
}

// TestAppendPostingsRow checks a COPY tuple of the postings table: term,
// block (the row's own when set), n and the packed postings.
func TestAppendPostingsRow(t *testing.T) {
	p := &postingList{chunks: []int64{5, 6}, tfs: []int32{1, 2}}
	data := appendPacked(nil, p.chunks, p.tfs, nil)
	head := []byte{0, 4, // fields
		0, 0, 0, 4, 'w', 'i', 'r', 'e',
		0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9,
		0, 0, 0, 4, 0, 0, 0, 2,
		0, 0, 0, byte(len(data))}
	if got := appendPostingsRow(nil, segmentRow{key: "wire", list: p}, 9); !bytes.Equal(got, append(slices.Clone(head), data...)) {
		t.Fatalf("row\n got %v\nwant %v", got, append(head, data...))
	}
	got := appendPostingsRow(nil, segmentRow{key: "wire", block: 3, list: p}, 9)
	if got[21] != 3 {
		t.Fatalf("row in block %d, want its own block 3", got[21])
	}
}

// TestDecodeRow: a row is read from its packed postings or, written
// before packing, from its arrays, and a row holding both is refused.
func TestDecodeRow(t *testing.T) {
	p := &postingList{chunks: []int64{4, 9, 2}, tfs: []int32{1, 3, 2}}
	terms := []string{"ab", "ab", "c"}
	rawChunks, rawTfs, rawTerms := arrayFields(p, terms)
	packed := appendPacked(nil, p.chunks, p.tfs, []termRun{{term: []byte("ab"), n: 2}, {term: []byte("c"), n: 1}})
	for _, raw := range [][][]byte{{rawChunks, rawTfs, rawTerms, nil}, {nil, nil, nil, packed}} {
		var chunks []int64
		var tfs []int32
		var runs []termRun
		var names [][]byte
		if err := decodeRow(&chunks, &tfs, &runs, &names, raw); err != nil || !slices.Equal(chunks, p.chunks) || !slices.Equal(tfs, p.tfs) ||
			len(runs) != 2 || string(runs[0].term) != "ab" || runs[0].n != 2 || string(runs[1].term) != "c" || runs[1].n != 1 {
			t.Fatalf("decoded %v %v %v (err %v)", chunks, tfs, runs, err)
		}
	}
	var chunks []int64
	var tfs []int32
	var runs []termRun
	var names [][]byte
	if err := decodeRow(&chunks, &tfs, &runs, &names, [][]byte{rawChunks, rawTfs, nil, packed}); !errors.Is(err, errPacked) {
		t.Fatalf("a row with both forms: err %v", err)
	}
	if err := decodeRow(&chunks, &tfs, &runs, &names, [][]byte{rawChunks, rawTfs, rawTerms[:len(rawTerms)-5], nil}); !errors.Is(err, errArrayFormat) {
		t.Fatalf("a row with a truncated terms array: err %v", err)
	}
}

// TestIDSet checks membership over a sparse range and outside it.
func TestIDSet(t *testing.T) {
	ids := []int64{1000, 3, 64, 65, 127, 128}
	s := newIDSet(ids)
	for id := int64(-2); id < 1100; id++ {
		if s.has(id) != slices.Contains(ids, id) {
			t.Fatalf("has(%d) = %v", id, s.has(id))
		}
	}
	if (idSet{}).has(0) {
		t.Fatal("the empty set holds 0")
	}
}

// FuzzDecodePacked: the decoder never panics on arbitrary bytes, and what
// it accepts encodes back to postings that decode the same.
func FuzzDecodePacked(f *testing.F) {
	f.Add(appendPacked(nil, []int64{5, 6, 300}, []int32{1, 2, 1 << 30}, nil))
	f.Add(appendPacked(nil, []int64{9, 4, 7}, []int32{1, 1, 3}, []termRun{{term: []byte("ab"), n: 1}, {term: []byte("b"), n: 2}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var chunks []int64
		var tfs []int32
		var runs []termRun
		if decodePacked(&chunks, &tfs, &runs, data) != nil {
			return
		}
		again := appendPacked(nil, chunks, tfs, runs)
		var c2 []int64
		var f2 []int32
		var r2 []termRun
		if err := decodePacked(&c2, &f2, &r2, again); err != nil || !slices.Equal(c2, chunks) || !slices.Equal(f2, tfs) ||
			!slices.EqualFunc(r2, runs, func(a, b termRun) bool { return bytes.Equal(a.term, b.term) && a.n == b.n }) {
			t.Fatalf("re-encoded postings decode differently (err %v)", err)
		}
	})
}

// TestArrayPostingsRead: rows written before packed postings (arrays,
// made here with the migration's own cordon.unpack_postings, as its
// downgrade does) rank exactly as packed ones, alone and mixed with
// packed rows; a merge reads them, and a collection (in batches of three
// rows here) rewrites every one packed without changing a ranking.
func TestArrayPostingsRead(t *testing.T) {
	defer func(n int) { collectBatch = n }(collectBatch)
	collectBatch = 3
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, settings := openAutoCreate(t, dbURL)
	var docs []cordontype.Document
	for i := range 60 {
		docs = append(docs, cordontype.Document{Tenant: "arr", DocID: fmt.Sprintf("d%02d", i), Classification: cordontype.Classification(i % 3),
			Text: fmt.Sprintf("wire transfer %d hold release ledger %d margin swap desk %d rare%d", i, i%7, i%5, i)})
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	rank := func() retrieval.Rankings { return rankText(t, s, settings, "arr", "wire ledger 3 rare7") }
	count := func(where string) (n int64) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM cordon_t_arr.postings WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	want := rank()
	if len(want.Lexical) == 0 || len(want.Docs) == 0 || count(`term LIKE '#%'`) == 0 || count(`data IS NULL`) != 0 {
		t.Fatalf("the tenant is too small to compare: %+v, %d bucket rows", want, count(`term LIKE '#%'`))
	}
	toArrays := func(where string) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, `UPDATE cordon_t_arr.postings p SET (chunks, tfs, terms, data) =
			(SELECT u.chunks, u.tfs, u.terms, NULL::bytea FROM cordon.unpack_postings(p.data) u)
			WHERE p.data IS NOT NULL AND `+where); err != nil {
			t.Fatal(err)
		}
	}
	toArrays(`p.term < 'm'`)
	if count(`data IS NULL`) == 0 || count(`data IS NOT NULL`) == 0 {
		t.Fatal("want rows of both forms")
	}
	if got := rank(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from mixed rows:\n%+v\nwant\n%+v", got, want)
	}
	toArrays(`true`)
	if got := rank(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from array rows:\n%+v\nwant\n%+v", got, want)
	}
	// A delete and a write leave a dead chunk's postings in array rows for
	// the collection to drop.
	if _, err := s.Delete(ctx, "arr", "d59"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, cordontype.Document{Tenant: "arr", DocID: "d59", Classification: docs[59].Classification, Text: docs[59].Text}); err != nil {
		t.Fatal(err)
	}
	want = rank()
	tb := tablesFor("cordon_t_arr")
	if err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error { return collectPostings(ctx, tx, tb) }); err != nil {
		t.Fatal(err)
	}
	if n := count(`data IS NULL`); n != 0 {
		t.Fatalf("%d rows still in arrays after a collection", n)
	}
	if got := rank(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked after the collection:\n%+v\nwant\n%+v", got, want)
	}
	// EachPosting gives every stored posting once, under its term.
	var stored int64
	if err := s.pool.QueryRow(ctx, `SELECT sum(n)::bigint FROM cordon_t_arr.postings`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[int64]bool{}
	var n int64
	if err := s.EachPosting(ctx, "arr", func(term string, chunk int64, tf int32) error {
		if seen[term] == nil {
			seen[term] = map[int64]bool{}
		}
		if seen[term][chunk] || tf < 1 {
			return fmt.Errorf("term %q chunk %d tf %d: again, or tf below 1", term, chunk, tf)
		}
		seen[term][chunk] = true
		n++
		return nil
	}); err != nil || n != stored || len(seen["rare7"]) != 1 || len(seen["wire"]) != 60 {
		t.Fatalf("EachPosting: %d postings (err %v), want %d; rare7 in %d chunks, wire in %d", n, err, stored, len(seen["rare7"]), len(seen["wire"]))
	}
	if err := s.EachPosting(ctx, "nobody", func(string, int64, int32) error { return nil }); !errors.Is(err, ErrTenantNotFound) {
		t.Fatalf("EachPosting of an unknown tenant: %v", err)
	}
}

// TestReadSegmentsDropsDeleted: a merge's read of segments keeps the
// postings of chunks that still exist and drops those of deleted ones
// when the tenant counts dead postings; with none counted it keeps every
// posting without asking.
func TestReadSegmentsDropsDeleted(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, _ := openAutoCreate(t, dbURL)
	var docs []cordontype.Document
	for i := range 10 {
		docs = append(docs, cordontype.Document{Tenant: "rs", DocID: fmt.Sprintf("d%02d", i), Classification: cordontype.Public,
			Text: fmt.Sprintf("ledger margin swap %d", i)})
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var gone []int64
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM cordon_t_rs.chunks WHERE doc_id IN ('d03', 'd07')`)
		if err != nil {
			return err
		}
		gone, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	}); err != nil || len(gone) == 0 {
		t.Fatalf("chunks of the documents to delete: %v, %v", gone, err)
	}
	for _, id := range []string{"d03", "d07"} {
		if _, err := s.Delete(ctx, "rs", id); err != nil {
			t.Fatal(err)
		}
	}
	// What readSegments returns over every block, with the tenant's dead
	// count and with none.
	read := func(dead int64) map[int64]int {
		t.Helper()
		held := map[int64]int{}
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT DISTINCT block FROM cordon_t_rs.postings`)
			if err != nil {
				return err
			}
			blocks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			lists, err := readSegments(ctx, tx, tablesFor("cordon_t_rs"), blocks, dead)
			for _, p := range lists {
				for _, c := range p.chunks {
					held[c]++
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return held
	}
	var dead int64
	if err := s.pool.QueryRow(ctx, `SELECT dead_postings FROM cordon_t_rs.stats`).Scan(&dead); err != nil || dead == 0 {
		t.Fatalf("dead_postings %d, %v: want the deletes counted", dead, err)
	}
	kept, all := read(dead), read(0)
	for _, c := range gone {
		if kept[c] != 0 {
			t.Errorf("chunk %d of a deleted document: %d postings kept", c, kept[c])
		}
		if all[c] == 0 {
			t.Errorf("chunk %d: no posting read with no dead count; the test deleted nothing stored", c)
		}
	}
	if len(kept) != len(all)-len(gone) || len(kept) == 0 {
		t.Errorf("%d chunks kept of %d read, %d deleted", len(kept), len(all), len(gone))
	}
}
