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
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// testBlock builds a block of chunks with ids, each with the vector
// vectors[i], documents and barrier sets cycling through a few.
func testBlock(ids []int64, gone []int64, vectors [][]int32) (*colBlock, []byte, int) {
	b := &colBlock{}
	sets := [][]string{nil, {"mna"}, {"deal-x", "mna"}, {"ünïcode"}}
	for i, id := range ids {
		b.add(id, int32(10+i), int64(100*i), int64(1000+i), int16(i%4), sets[i%len(sets)], fmt.Sprintf("doc-%d", i%3))
	}
	b.setGone(gone)
	dims := 0
	if len(vectors) > 0 {
		dims = len(vectors[0])
	}
	raw, width := dimsOf(vectors, dims)
	return b, raw, width
}

func TestColBlockRoundTrip(t *testing.T) {
	b, _, _ := testBlock([]int64{3, 7, 8, 20, 1 << 40}, []int64{9, 2, 9}, nil)
	if !slices.Equal(b.gone, []int64{2, 9}) {
		t.Fatalf("setGone: %v, want sorted, each once", b.gone)
	}
	enc := b.encode()
	var got colBlock
	if err := decodeCols(enc, &got); err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{
		"ids": {b.ids, got.ids}, "gone": {b.gone, got.gone}, "lengths": {b.lengths, got.lengths}, "norms": {b.norms, got.norms},
		"ticks": {b.ticks, got.ticks}, "classes": {b.classes, got.classes}, "set": {b.set, got.set}, "doc": {b.doc, got.doc},
		"docs": {b.docs, got.docs},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: %v, decoded %v", name, pair[0], pair[1])
		}
	}
	for i := range b.sets {
		if !slices.Equal(b.sets[i], got.sets[i]) {
			t.Errorf("set %d: %q, decoded %q", i, b.sets[i], got.sets[i])
		}
	}
	if !bytes.Equal(got.encode(), enc) {
		t.Error("encoding the decoded block gives other bytes")
	}
	// Every truncation, a trailing byte, another format and ids out of
	// order are refused.
	for n := range len(enc) {
		if err := decodeCols(enc[:n], &colBlock{}); !errors.Is(err, errColBlock) {
			t.Fatalf("truncated to %d of %d bytes: %v, want a refusal", n, len(enc), err)
		}
	}
	if err := decodeCols(append(slices.Clone(enc), 0), &colBlock{}); !errors.Is(err, errColBlock) {
		t.Errorf("a trailing byte: %v", err)
	}
	other := slices.Clone(enc)
	other[0] = 3
	if err := decodeCols(other, &colBlock{}); !errors.Is(err, errColBlock) {
		t.Errorf("format 3: %v", err)
	}
	// Format 1, as blocks written before format 2 hold it, decodes to the
	// same block, and every truncation of it is refused.
	v1 := b.encodeV1()
	var old colBlock
	if err := decodeCols(v1, &old); err != nil || !sameColumns(&old, &got) {
		t.Fatalf("format 1 decoded to %+v (err %v), want %+v", old, err, got)
	}
	for n := range len(v1) {
		if err := decodeCols(v1[:n], &colBlock{}); !errors.Is(err, errColBlock) {
			t.Fatalf("format 1 truncated to %d of %d bytes: %v, want a refusal", n, len(v1), err)
		}
	}
	if len(enc) >= len(v1) {
		t.Errorf("format 2 takes %d bytes, format 1 %d", len(enc), len(v1))
	}
	swapped := &colBlock{}
	swapped.add(5, 1, 1, 1, 0, nil, "d")
	swapped.add(4, 1, 1, 1, 0, nil, "d")
	if err := decodeCols(swapped.encode(), &colBlock{}); !errors.Is(err, errColBlock) {
		t.Errorf("ids out of order: %v", err)
	}
}

func TestDimsWidth(t *testing.T) {
	for _, c := range []struct {
		top   int32
		width int
	}{{0, 1}, {127, 1}, {-128, 2}, {128, 2}, {32767, 2}, {-32768, 4}, {40000, 4}, {-(1 << 30), 4}} {
		vecs := [][]int32{{1, c.top, -1}, {0, 3, c.top}}
		raw, width := dimsOf(vecs, 3)
		if width != c.width {
			t.Errorf("component %d: width %d, want %d", c.top, width, c.width)
		}
		for d := range 3 {
			for i, v := range vecs {
				if got := component(raw[(d*2+i)*width:], width); got != v[d] {
					t.Errorf("component %d: dimension %d of chunk %d reads %d, want %d", c.top, d, i, got, v[d])
				}
			}
		}
	}
}

// TestMergeColBlocks: a merge keeps the chunks no merged block deletes, in
// id order, with their columns and vectors (widened to the widest block's
// width), applies the tombstones naming merged chunks and carries the
// others.
func TestMergeColBlocks(t *testing.T) {
	a, ra, wa := testBlock([]int64{1, 2, 6}, nil, [][]int32{{1, -2}, {3, 4}, {5, 127}})
	b, rb, wb := testBlock([]int64{4, 5}, []int64{2, 9}, [][]int32{{-300, 7}, {8, 9}})
	c, rc, wc := testBlock(nil, []int64{4}, nil)
	if wa != 1 || wb != 2 {
		t.Fatalf("widths %d and %d, want 1 and 2", wa, wb)
	}
	blocks := []storedBlock{{block: -1, b: *a}, {block: -2, b: *b}, {block: -3, b: *c}}
	out, dims, width, err := mergeColBlocks(blocks, []rawDims{{ra, wa}, {rb, wb}, {rc, wc}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.ids, []int64{1, 5, 6}) || !slices.Equal(out.gone, []int64{9}) {
		t.Fatalf("merged ids %v gone %v, want [1 5 6] and [9]", out.ids, out.gone)
	}
	if width != 2 {
		t.Errorf("width %d, want 2", width)
	}
	want := [][]int32{{1, -2}, {8, 9}, {5, 127}}
	for d := range 2 {
		for i := range want {
			if got := component(dims[(d*3+i)*width:], width); got != want[i][d] {
				t.Errorf("dimension %d of chunk %d: %d, want %d", d, out.ids[i], got, want[i][d])
			}
		}
	}
	// Chunk 5 was chunk 1 of b: its columns follow it.
	if out.lengths[1] != b.lengths[1] || out.norms[1] != b.norms[1] || out.ticks[1] != b.ticks[1] || out.classes[1] != b.classes[1] ||
		out.docs[out.doc[1]] != b.docs[b.doc[1]] || !slices.Equal(out.sets[out.set[1]], b.sets[b.set[1]]) {
		t.Error("chunk 5's columns did not follow it")
	}
	// A chunk in two blocks is a broken store, not a merge.
	dup, rd, wd := testBlock([]int64{6}, nil, [][]int32{{0, 0}})
	if _, _, _, err := mergeColBlocks(append(blocks, storedBlock{block: -4, b: *dup}), []rawDims{{ra, wa}, {rb, wb}, {rc, wc}, {rd, wd}}); !errors.Is(err, errColBlock) {
		t.Errorf("a chunk in two blocks: %v", err)
	}
}

func FuzzDecodeCols(f *testing.F) {
	b, _, _ := testBlock([]int64{1, 2, 3}, []int64{7}, nil)
	f.Add(b.encode())
	f.Add(b.encodeV1())
	f.Add([]byte{colFormat, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var got colBlock
		if err := decodeCols(data, &got); err != nil {
			if !errors.Is(err, errColBlock) {
				t.Fatalf("refusal %v does not wrap errColBlock", err)
			}
			return
		}
		for _, enc := range [][]byte{got.encode(), got.encodeV1()} {
			var again colBlock
			if err := decodeCols(enc, &again); err != nil || !sameColumns(&again, &got) {
				t.Fatalf("a decoded block, encoded again, decodes to %+v (err %v), want %+v", again, err, got)
			}
		}
	})
}

// sameColumns reports whether a and b hold the same chunks, tombstones,
// sets and documents (an empty column equal to a missing one).
func sameColumns(a, b *colBlock) bool {
	eq := func(x, y any) bool {
		return reflect.ValueOf(x).Len() == 0 && reflect.ValueOf(y).Len() == 0 || reflect.DeepEqual(x, y)
	}
	if len(a.sets) != len(b.sets) {
		return false
	}
	for i := range a.sets {
		if !eq(a.sets[i], b.sets[i]) {
			return false
		}
	}
	return eq(a.ids, b.ids) && eq(a.gone, b.gone) && eq(a.lengths, b.lengths) && eq(a.norms, b.norms) && eq(a.ticks, b.ticks) &&
		eq(a.classes, b.classes) && eq(a.set, b.set) && eq(a.doc, b.doc) && eq(a.docs, b.docs)
}

// encodeV1 renders b's cols value in format 1, as blocks written before
// format 2 hold it.
func (b *colBlock) encodeV1() []byte {
	le := binary.LittleEndian
	out := b.appendHead(nil, colFormatV1)
	for _, x := range b.ids {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.gone {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.lengths {
		out = le.AppendUint32(out, uint32(x))
	}
	for _, x := range b.norms {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.ticks {
		out = le.AppendUint64(out, uint64(x))
	}
	for _, x := range b.classes {
		out = le.AppendUint16(out, uint16(x))
	}
	for _, x := range b.set {
		out = le.AppendUint32(out, x)
	}
	for _, x := range b.doc {
		out = le.AppendUint32(out, x)
	}
	return b.appendLabels(out)
}

// TestColumnsBuiltForOlderTenant: a tenant that held chunks before its
// column blocks existed (stats.cols_ok false, no blocks) is ranked from
// the chunks table, and its next write starts a build of the blocks in the
// background, which then hold exactly its chunks and rank as the chunks
// table does.
func TestColumnsBuiltForOlderTenant(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, settings := openAutoCreate(t, dbURL)
	var docs []cordontype.Document
	for i := range 40 {
		docs = append(docs, cordontype.Document{Tenant: "old", DocID: fmt.Sprintf("d%02d", i), Classification: cordontype.Classification(i % 3),
			Text: fmt.Sprintf("wire transfer %d hold release ledger %d margin swap desk %d", i, i%7, i%5)})
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, "old", "d03"); err != nil {
		t.Fatal(err)
	}
	scan, err := Open(ctx, dbURL, Options{ChunkScan: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scan.Close)
	rankOn := func(s *Store) retrieval.Rankings { return rankText(t, s, settings, "old", "wire ledger 3") }
	rank := func() retrieval.Rankings { return rankOn(s) }
	want := rank()
	if len(want.Dense) == 0 || len(want.Lexical) == 0 || len(want.Docs) == 0 {
		t.Fatalf("the query found too little to compare: %+v", want)
	}
	blocks := func() (n int64) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM cordon_t_old.segments WHERE cols IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if blocks() == 0 {
		t.Fatal("no column blocks after the writes")
	}
	// As migration 00014 leaves a tenant that held chunks.
	if _, err := s.pool.Exec(ctx, `DELETE FROM cordon_t_old.segments WHERE cols IS NOT NULL; UPDATE cordon_t_old.stats SET cols_ok = false`); err != nil {
		t.Fatal(err)
	}
	if got := rank(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from the chunks table:\n%+v\nwant\n%+v", got, want)
	}
	if err := s.VerifyColumns(ctx, "old"); err != nil {
		t.Fatalf("verify with cols_ok false: %v", err)
	}
	if _, err := s.Put(ctx, cordontype.Document{Tenant: "old", DocID: "zz", Text: "unrelated words entirely", Classification: cordontype.Public}); err != nil {
		t.Fatal(err)
	}
	s.builds.wait() // the write started the build in the background
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT cols_ok FROM cordon_t_old.stats`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if !ok || blocks() == 0 {
		t.Fatalf("after a write: cols_ok %v with %d blocks, want the blocks built", ok, blocks())
	}
	if err := s.VerifyColumns(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if got, want := rank(), rankOn(scan); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from the built blocks:\n%+v\nfrom the chunks table:\n%+v", got, want)
	}
}

// TestColumnTombstonesCollected: when tombstones outnumber a quarter of
// the blocks' chunks, a merge takes every block and drops them, and the
// blocks still hold exactly the tenant's chunks.
func TestColumnTombstonesCollected(t *testing.T) {
	defer func(n int64) { colGoneMin = n }(colGoneMin)
	colGoneMin = 8
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, _ := openAutoCreate(t, dbURL)
	var docs []cordontype.Document
	for i := range 30 {
		docs = append(docs, cordontype.Document{Tenant: "tomb", DocID: fmt.Sprintf("d%02d", i), Text: fmt.Sprintf("alpha beta %d", i), Classification: cordontype.Public})
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := s.Delete(ctx, "tomb", fmt.Sprintf("d%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var gone, chunks int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(postings - cols_n), 0)::bigint, coalesce(sum(cols_n), 0)::bigint FROM cordon_t_tomb.segments WHERE cols IS NOT NULL`).Scan(&gone, &chunks); err != nil {
		t.Fatal(err)
	}
	if chunks-gone != 18 || chunks == 30 {
		t.Errorf("after deleting 12 of 30: %d chunks and %d tombstones in the blocks, want 18 live and the deleted ones collected", chunks, gone)
	}
	if err := s.VerifyColumns(ctx, "tomb"); err != nil {
		t.Fatal(err)
	}
}

// TestIDRank: the constant-time lookup agrees with a binary search for
// ids in the set, between them and outside it, and declines a set too
// spread out.
func TestIDRank(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + r.IntN(300)
		var ids []int64
		id := int64(r.IntN(1000))
		for range n {
			id += 1 + int64(r.IntN(1+trial%70))
			ids = append(ids, id)
		}
		rank := newIDRank(ids)
		spread := uint64(ids[len(ids)-1]-ids[0])/64 > uint64(len(ids))
		if (rank.words == nil) != spread {
			t.Fatalf("trial %d: indexed %v, want %v for %d ids over %d", trial, rank.words != nil, !spread, len(ids), ids[len(ids)-1]-ids[0])
		}
		if rank.words == nil {
			continue
		}
		for probe := ids[0] - 70; probe <= ids[len(ids)-1]+70; probe++ {
			wantAt, wantFound := slices.BinarySearch(ids, probe)
			at, found := rank.of(probe)
			if found != wantFound || found && at != wantAt {
				t.Fatalf("trial %d, id %d: (%d, %v), want (%d, %v)", trial, probe, at, found, wantAt, wantFound)
			}
		}
	}
}

// rankText ranks text for an Internal principal of tenant without
// barriers on s (lexical, dense and documents), failing t on an error.
func rankText(t *testing.T, s *Store, settings index.Settings, tenant, text string) retrieval.Rankings {
	t.Helper()
	ctx := context.Background()
	r := retrieval.RankRequest{Principal: cordontype.Principal{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}},
		Tokens: analysis.Tokenize(text), Terms: analysis.TokenSet(text), NowTick: 10, TopN: 10, Docs: true}
	q, err := s.EmbedQuery(ctx, settings.Spec(), text, r.Terms)
	if err != nil {
		t.Fatal(err)
	}
	r.Dense = q
	rk, err := s.Rank(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return rk
}

// openAutoCreate opens a store on dbURL that creates tenants with the
// default settings, closed when the test ends.
func openAutoCreate(t *testing.T, dbURL string) (*Store, index.Settings) {
	t.Helper()
	settings := index.DefaultSettings()
	s, err := Open(context.Background(), dbURL, Options{AutoCreate: &settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, settings
}

// TestColumnsFormat1Read: column blocks written before format 2 (made
// here by rewriting every block's cols in format 1) rank exactly as
// before, verify, and keep doing so through later writes and deletes,
// whose merges read them and write format 2.
func TestColumnsFormat1Read(t *testing.T) {
	defer func(n int64) { colGoneMin = n }(colGoneMin)
	colGoneMin = 4
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, settings := openAutoCreate(t, dbURL)
	doc := func(i int) cordontype.Document {
		return cordontype.Document{Tenant: "v1", DocID: fmt.Sprintf("d%02d", i), Classification: cordontype.Classification(i % 3),
			Text: fmt.Sprintf("wire transfer %d hold release ledger %d margin swap desk %d", i, i%7, i%5)}
	}
	var docs []cordontype.Document
	for i := range 40 {
		docs = append(docs, doc(i))
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	scan, err := Open(ctx, dbURL, Options{ChunkScan: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scan.Close)
	rankOn := func(s *Store) retrieval.Rankings { return rankText(t, s, settings, "v1", "wire ledger 3") }
	format := func(f byte) (n int64) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM cordon_t_v1.segments WHERE cols IS NOT NULL AND get_byte(cols, 0) = $1`, int(f)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	want := rankOn(s)
	if len(want.Dense) == 0 || len(want.Lexical) == 0 || len(want.Docs) == 0 || format(colFormat) == 0 {
		t.Fatalf("the query found too little to compare: %+v", want)
	}
	// Every block's cols in format 1.
	tb := tablesFor("cordon_t_v1")
	if err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT block FROM cordon_t_v1.segments WHERE cols IS NOT NULL`)
		if err != nil {
			return err
		}
		blocks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		stored, _, err := readColBlocks(ctx, tx, tb, blocks)
		if err != nil {
			return err
		}
		for _, sb := range stored {
			if _, err := tx.Exec(ctx, `UPDATE cordon_t_v1.segments SET cols = $1 WHERE block = $2`, sb.b.encodeV1(), sb.block); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if format(colFormat) != 0 || format(colFormatV1) == 0 {
		t.Fatalf("%d blocks in format 2 and %d in format 1, want all in format 1", format(colFormat), format(colFormatV1))
	}
	if got := rankOn(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from format-1 blocks:\n%+v\nwant\n%+v", got, want)
	}
	if err := s.VerifyColumns(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	// Tombstones past colGoneMin and a quarter of the chunks make a merge
	// take every block.
	for i := range 12 {
		if _, err := s.Delete(ctx, "v1", fmt.Sprintf("d%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, doc(41)); err != nil {
		t.Fatal(err)
	}
	if n := format(colFormatV1); n != 0 {
		t.Errorf("%d blocks still in format 1 after a merge of every block", n)
	}
	if err := s.VerifyColumns(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if got, want := rankOn(s), rankOn(scan); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranked from the merged blocks:\n%+v\nfrom the chunks table:\n%+v", got, want)
	}
}

// TestSQLPathRefusesMalformedRows: on the SQL path, a stored postings row
// or column block that does not decode fails the query with an error that
// says so (never a panic or a partial ranking), whichever of the batch's
// results holds it, and the store's connection stays usable: the same
// store then ranks the tenant again once the row is repaired.
func TestSQLPathRefusesMalformedRows(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, settings := openAutoCreate(t, dbURL)
	// One connection: a batch left unread would fail the next query.
	one, err := Open(ctx, dbURL, Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	var docs []cordontype.Document
	for i := range 30 {
		docs = append(docs, cordontype.Document{Tenant: "malformed", DocID: fmt.Sprintf("d%02d", i),
			Text: fmt.Sprintf("wire transfer %d hold release ledger %d margin", i, i%7)})
	}
	if _, err := s.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	rank := func() (retrieval.Rankings, error) {
		text := "wire ledger"
		r := retrieval.RankRequest{Principal: cordontype.Principal{Tenant: "malformed", Clearance: cordontype.Internal, Barriers: []string{}},
			Tokens: analysis.Tokenize(text), Terms: analysis.TokenSet(text), NowTick: 10, TopN: 10, Docs: true}
		q, err := one.EmbedQuery(ctx, settings.Spec(), text, r.Terms)
		if err != nil {
			t.Fatal(err)
		}
		r.Dense = q
		return one.Rank(ctx, r)
	}
	want, err := rank()
	if err != nil || len(want.Lexical) == 0 || len(want.Dense) == 0 {
		t.Fatalf("ranked %+v, %v; want hits on both sides", want, err)
	}
	for _, c := range []struct {
		name, corrupt, repair string
		want                  error
	}{
		// A trailing byte is refused by either decoder; taking it off
		// restores the row as stored.
		{"postings", `UPDATE cordon_t_malformed.postings SET data = data || '\x00'::bytea WHERE term = 'wire' AND data IS NOT NULL`,
			`UPDATE cordon_t_malformed.postings SET data = substring(data FROM 1 FOR length(data) - 1) WHERE term = 'wire'`, errPacked},
		{"column block", `UPDATE cordon_t_malformed.segments SET cols = cols || '\x00'::bytea WHERE cols IS NOT NULL`,
			`UPDATE cordon_t_malformed.segments SET cols = substring(cols FROM 1 FOR length(cols) - 1) WHERE cols IS NOT NULL`, errColBlock},
	} {
		t.Run(c.name, func(t *testing.T) {
			tag, err := s.pool.Exec(ctx, c.corrupt)
			if err != nil || tag.RowsAffected() == 0 {
				t.Fatalf("corrupting: %v, %d rows", err, tag.RowsAffected())
			}
			if rk, err := rank(); !errors.Is(err, c.want) {
				t.Fatalf("ranked %+v, %v; want an error wrapping %v", rk, err, c.want)
			}
			if _, err := s.pool.Exec(ctx, c.repair); err != nil {
				t.Fatal(err)
			}
			if got, err := rank(); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("after the repair: %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

// TestReadColumnWidths: a column written at each width (1, 2, 4 and 8
// bytes an offset) reads back as written, and a value just outside the
// range the reader allows is refused wherever it stands.
func TestReadColumnWidths(t *testing.T) {
	for _, c := range []struct {
		width byte
		vs    []int64
	}{
		{1, []int64{5, 9, 5 + 255}},
		{2, []int64{-7, -7 + 1000, 3}},
		{4, []int64{1 << 20, 1<<20 + 70000, 1<<20 + 5}},
		{8, []int64{-1 << 40, 1 << 41, 0, math.MaxInt64 - 1}},
	} {
		enc := appendColumn(nil, c.vs)
		r := &colReader{buf: enc}
		if got := readColumn[int64](r, len(c.vs), math.MinInt64, math.MaxInt64); enc[0] != c.width || r.err != nil || !slices.Equal(got, c.vs) || len(r.buf) != 0 {
			t.Errorf("width %d (want %d): read %v (err %v, %d bytes left), want %v", enc[0], c.width, got, r.err, len(r.buf), c.vs)
		}
		lo, hi := slices.Min(c.vs), slices.Max(c.vs)
		for i := range c.vs {
			for _, v := range []int64{lo - 1, hi + 1} {
				out := slices.Clone(c.vs)
				out[i] = v
				r := &colReader{buf: appendColumn(nil, out)}
				if got := readColumn[int64](r, len(out), lo, hi); !errors.Is(r.err, errColBlock) {
					t.Errorf("width %d: %v, value %d outside [%d, %d]: read %v, err %v", c.width, out, i, lo, hi, got, r.err)
				}
			}
		}
	}
}

// TestSQLPathPartsMatchOnePart: the SQL path's lexical side scored in
// many parts (of a few chunks each) ranks exactly as in one part and as
// the in-memory query path, every score to the bit, for principals that
// see all, some or few of the chunks, with and without a freshness
// contract, over a tenant with deleted and replaced chunks.
func TestSQLPathPartsMatchOnePart(t *testing.T) {
	defer func(n int, f func() int) { lexicalPart, lexicalParts = n, f }(lexicalPart, lexicalParts)
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, settings := openAutoCreate(t, dbURL)
	cached, err := Open(ctx, dbURL, Options{CacheBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cached.Close)
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"wire", "ledger", "margin", "swap", "desk", "hold", "release", "fee", "loan", "rate", "bond", "fx"}
	var docs []cordontype.Document
	for i := range 120 {
		var text []string
		for range 20 + rng.IntN(60) {
			text = append(text, words[int(float64(len(words))*rng.Float64()*rng.Float64())])
		}
		var barriers []string
		if i%5 == 0 {
			barriers = []string{"mna"}
		}
		docs = append(docs, cordontype.Document{Tenant: "parts", DocID: fmt.Sprintf("d%03d", i), Text: strings.Join(text, " "),
			Classification: cordontype.Classification(i % 3), Barriers: barriers, AsOfTick: int64(i % 40)})
	}
	principals := churn(t, s, "parts", docs, 9, 4, " wire wire fx")
	stale := int64(15)
	queries := []string{"wire ledger", "fx bond rate loan", "swap", "desk hold release fee margin wire"}
	// rankOf may run on any goroutine; rank fails the test on an error.
	rankOf := func(st *Store, p cordontype.Principal, text string, maxStale *int64) (retrieval.Rankings, error) {
		r := retrieval.RankRequest{Principal: p, Tokens: analysis.Tokenize(text), Terms: analysis.TokenSet(text),
			NowTick: 40, MaxStaleTicks: maxStale, TopN: 10, Docs: true}
		q, err := st.EmbedQuery(ctx, settings.Spec(), text, r.Terms)
		if err != nil {
			return retrieval.Rankings{}, err
		}
		r.Dense = q
		return st.Rank(ctx, r)
	}
	rank := func(st *Store, p cordontype.Principal, text string, maxStale *int64) retrieval.Rankings {
		t.Helper()
		rk, err := rankOf(st, p, text, maxStale)
		if err != nil {
			t.Fatal(err)
		}
		return rk
	}
	compared := 0
	for _, p := range principals {
		for _, text := range queries {
			for _, maxStale := range []*int64{nil, &stale} {
				lexicalPart, lexicalParts = 1<<30, func() int { return 1 }
				one := rank(s, p, text, maxStale)
				lexicalPart, lexicalParts = 3, func() int { return 9 }
				many := rank(s, p, text, maxStale)
				mem := rank(cached, p, text, maxStale)
				if !reflect.DeepEqual(many, one) || !reflect.DeepEqual(mem, one) {
					t.Fatalf("%+v %q stale %v:\nin parts %+v\nin one   %+v\nin memory %+v", p, text, maxStale, many, one, mem)
				}
				if len(one.Lexical) > 0 {
					compared++
				}
			}
		}
	}
	if compared < len(principals)*len(queries) {
		t.Errorf("only %d rankings had lexical hits", compared)
	}
	// The same queries at once, from eight goroutines: buffers reused from
	// query to query are never shared by two.
	lexicalPart, lexicalParts = 3, func() int { return 4 }
	type ask struct {
		p        cordontype.Principal
		text     string
		maxStale *int64
	}
	var asks []ask
	for _, p := range principals {
		for _, text := range queries {
			asks = append(asks, ask{p, text, nil}, ask{p, text, &stale})
		}
	}
	want := make([]retrieval.Rankings, len(asks))
	for i, a := range asks {
		want[i] = rank(s, a.p, a.text, a.maxStale)
	}
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 3 {
				for k := range asks {
					i := (k + g*5 + round) % len(asks)
					a := asks[i]
					got, err := rankOf(s, a.p, a.text, a.maxStale)
					if err == nil && !reflect.DeepEqual(got, want[i]) {
						err = fmt.Errorf("%+v %q stale %v: ranked at once with others, the ranking differs from the one ranked alone", a.p, a.text, a.maxStale)
					}
					if err != nil {
						errs <- err.Error()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestColSlab: blocks decoded one after another into a slab that starts
// too small for them decode exactly as without one, each keeping its
// columns when the slab grows past it, and again once the slab is reused.
func TestColSlab(t *testing.T) {
	var encs [][]byte
	var want []colBlock
	for k := range 4 {
		var ids []int64
		for i := range 50 + 40*k {
			ids = append(ids, int64(1000*k+3*i))
		}
		b, _, _ := testBlock(ids, []int64{int64(k)}, nil)
		var w colBlock
		if err := decodeCols(b.encode(), &w); err != nil {
			t.Fatal(err)
		}
		encs, want = append(encs, b.encode()), append(want, w)
	}
	slab := &colSlab{i64: make([]int64, 10)}
	for round := range 2 {
		slab.used = [5]int{}
		got := make([]colBlock, len(encs))
		for k, enc := range encs {
			if err := decodeColsIn(enc, &got[k], slab); err != nil {
				t.Fatal(err)
			}
			got[k].qdims = [][]byte{slab.bytes([]byte{byte(k), 1, 2})}
		}
		for k := range got {
			if !sameColumns(&got[k], &want[k]) || !bytes.Equal(got[k].qdims[0], []byte{byte(k), 1, 2}) {
				t.Fatalf("round %d, block %d: decoded into the slab %+v, want %+v", round, k, got[k], want[k])
			}
		}
	}
}

// churn writes docs (of tenant, classified up to Confidential, some behind
// the barrier "mna") on s in two batches, deletes every step-th and puts
// docs[again] again with more text, so that the tenant holds deleted and
// replaced chunks; it returns principals that see all of it, some and
// little.
func churn(t *testing.T, s *Store, tenant string, docs []cordontype.Document, step, again int, more string) []cordontype.Principal {
	t.Helper()
	ctx := context.Background()
	half := len(docs) / 2
	if _, err := s.PutBatch(ctx, docs[:half]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBatch(ctx, docs[half:]); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(docs); i += step {
		if _, err := s.Delete(ctx, tenant, docs[i].DocID); err != nil {
			t.Fatal(err)
		}
	}
	d := docs[again]
	d.Text += more
	if _, err := s.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
	return []cordontype.Principal{
		{Tenant: tenant, Clearance: cordontype.Confidential, Barriers: []string{"mna"}},
		{Tenant: tenant, Clearance: cordontype.Internal, Barriers: []string{}},
		{Tenant: tenant, Clearance: cordontype.Public, Barriers: []string{}},
	}
}
