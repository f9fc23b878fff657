package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-rag/cordon/cordontype"
)

// TestMigrateBuildsColumnBlocks: a tenant left without column blocks by
// migration 00014 (it held chunks: stats.cols_ok false) and with postings
// rows as arrays (written before migration 00015) is ranked from the
// chunks table and the arrays as the reference ranks; 'cordon migrate'
// builds its blocks and packs its postings, says so, and the blocks then
// hold exactly its chunks, and both rank the same. Under churn
// (replacements and deletions) the blocks stay exact.
func TestMigrateBuildsColumnBlocks(t *testing.T) {
	dbURL := migrated(t)
	ctx := context.Background()
	m := newMirror(t, dbURL, cordontype.Principal{Tenant: "legacy", Clearance: cordontype.Confidential, Barriers: []string{"mna"}})
	doc := func(i, round int) cordontype.Document {
		var text strings.Builder
		for j := range 40 + i%30 {
			fmt.Fprintf(&text, "w%d ", (i*j+round)%97)
		}
		d := cordontype.Document{Tenant: "legacy", DocID: fmt.Sprintf("d%03d", i), Text: text.String(),
			Classification: cordontype.Classification(i % 4), AsOfTick: int64(i)}
		if i%5 == 0 {
			d.Barriers = []string{"mna"}
		}
		if i%7 == 0 {
			d.Barriers = []string{"trading"}
		}
		return d
	}
	for i := range 60 {
		m.put(doc(i, 0))
	}
	queries := []string{"w3 w17", "w5 w40 w41 w90", "w0", "w96 w1 w2"}
	m.check("written", queries...)
	if err := m.st.VerifyColumns(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
	// As migration 00014 leaves a tenant that held chunks, with its
	// postings as rows written before 00015 hold them.
	execSQL(t, dbURL, `DELETE FROM cordon_t_legacy.segments WHERE cols IS NOT NULL`)
	execSQL(t, dbURL, `UPDATE cordon_t_legacy.stats SET cols_ok = false`)
	execSQL(t, dbURL, `UPDATE cordon_t_legacy.postings p SET (chunks, tfs, terms, data) =
		(SELECT u.chunks, u.tfs, u.terms, NULL::bytea FROM cordon.unpack_postings(p.data) u)`)
	arrayRows := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_legacy.postings WHERE data IS NULL`)
	if arrayRows == 0 {
		t.Fatal("no postings rows as arrays")
	}
	m.check("read from the chunks table", queries...)
	out := string(cordonCLI(t, "migrate", "--database-url", dbURL))
	if !strings.Contains(out, "built the column blocks of tenant legacy (") {
		t.Fatalf("cordon migrate did not build the blocks:\n%s", out)
	}
	if !strings.Contains(out, fmt.Sprintf("packed the postings of tenant legacy (%d rows)", arrayRows)) {
		t.Fatalf("cordon migrate did not pack the %d array rows:\n%s", arrayRows, out)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_legacy.postings WHERE data IS NULL`); n != 0 {
		t.Fatalf("%d postings rows still arrays after cordon migrate", n)
	}
	if n := queryInt(t, dbURL, `SELECT count(*) FROM cordon_t_legacy.stats WHERE cols_ok`); n != 1 {
		t.Fatal("cols_ok still false after cordon migrate")
	}
	if err := m.st.VerifyColumns(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
	m.check("read from the built blocks", queries...)
	// Again: nothing to build.
	if out := string(cordonCLI(t, "migrate", "--database-url", dbURL)); strings.Contains(out, "built the column blocks") || strings.Contains(out, "packed") {
		t.Fatalf("a second cordon migrate built blocks or packed postings again:\n%s", out)
	}
	// Churn: replace a third, delete a third, one at a time.
	for i := range 60 {
		switch i % 3 {
		case 0:
			m.put(doc(i, 1))
		case 1:
			m.del(fmt.Sprintf("d%03d", i))
		}
	}
	m.check("after churn", queries...)
	if err := m.st.VerifyColumns(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
}
