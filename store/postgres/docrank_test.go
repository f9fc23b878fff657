package postgres

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/analysis"
	"github.com/cordon-rag/cordon/bm25"
	"github.com/cordon-rag/cordon/cordontype"
	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/retrieval"
)

// docRankEvidence is the document ranking in its plain form, the
// reference docRankColumns must equal: one evidence record per document
// (its tf for every term, ranked by its first posting's verdict), scored
// by retrieval.RankDocs.
func docRankEvidence(req *retrieval.RankRequest, qp queryPostings, sc chunkScan, at [][][]int32, sumLen int64, entitled bool, p bm25.Params) []retrieval.DocHit {
	terms := len(req.Terms)
	slot := make([]int32, len(sc.docNames)) // 1 + the document's index in docs
	var docs []retrieval.DocEvidence
	eachDocPosting(qp, sc, at, entitled, func(i int, pos int32, tf int64, v int32) {
		num := sc.docNum[pos]
		if slot[num] == 0 {
			docs = append(docs, retrieval.DocEvidence{DocID: sc.docNames[num], Length: sc.docLens[num], TF: make([]int64, terms), Ranked: v == verdictKeep})
			slot[num] = int32(len(docs))
		}
		docs[slot[num]-1].TF[i] += tf
	})
	df := make([]int64, terms)
	for _, d := range docs {
		for i, tf := range d.TF {
			if tf > 0 {
				df[i]++
			}
		}
	}
	return retrieval.RankDocs(req, docs, retrieval.DocScope{N: sc.docN, SumLen: sumLen, DF: df}, p)
}

// TestDocRankColumnsMatchesEvidence: the document ranking of the column
// blocks equals the plain per-document evidence scored by
// retrieval.RankDocs, every score to the bit and every tie in order, for
// random queries (the service profile's combined terms, and plain
// weighted terms), principals that see all, some or few documents, with
// and without a freshness contract, several top_n, both statistics
// scopes, over tenants with deleted and replaced documents.
func TestDocRankColumnsMatchesEvidence(t *testing.T) {
	ctx := context.Background()
	dbURL := testDatabase(t)
	s, err := Open(ctx, dbURL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	rng := rand.New(rand.NewPCG(3, 5))
	words := []string{"wire", "wires", "wired", "ledger", "ledgers", "margin", "swap", "swapping", "desk", "hold", "holding",
		"release", "fee", "fees", "loan", "rate", "rates", "bond", "fx", "settle", "settlement"}
	text := func(n int) string {
		var w []string
		for range n {
			w = append(w, words[int(float64(len(words))*rng.Float64()*rng.Float64())])
		}
		return strings.Join(w, " ")
	}
	for _, scope := range []bm25.Scope{bm25.ScopeEntitled, bm25.ScopeTenant} {
		tenant := "docrank_" + string(scope)
		settings := index.DefaultSettings()
		settings.Statistics = scope
		settings.Chunking.MaxWords, settings.Chunking.OverlapWords = 12, 3
		if _, err := s.CreateTenant(ctx, tenant, settings); err != nil {
			t.Fatal(err)
		}
		var docs []cordontype.Document
		for i := range 90 {
			var barriers []string
			if i%4 == 0 {
				barriers = []string{"mna"}
			}
			docs = append(docs, cordontype.Document{Tenant: tenant, DocID: fmt.Sprintf("d%03d", i), Title: text(1 + rng.IntN(3)),
				Text: "# " + text(2) + "\n\n" + text(5+rng.IntN(50)), Classification: cordontype.Classification(i % 3),
				Barriers: barriers, AsOfTick: int64(i % 40)})
		}
		principals := churn(t, s, tenant, docs, 11, 5, " wire wire fx settlement")
		stale := int64(15)
		compared, hits := 0, 0
		for q := range 40 {
			qtext := text(1 + rng.IntN(6))
			terms := analysis.TokenSet(qtext)
			pol := retrieval.ServicePolicy()
			pol.BM25F = q%2 == 0
			all, weights, combined := retrieval.LexicalTerms(analysis.Tokenize(qtext), terms, pol)
			p := principals[q%len(principals)]
			req := retrieval.RankRequest{Principal: p, Tokens: analysis.Tokenize(qtext), Terms: all, Weights: weights,
				Combined: combined, IDF: pol.IDF, NowTick: 40, TopN: []int{0, 1, 3, 50}[q%4], Docs: true}
			if q%3 == 0 {
				req.MaxStaleTicks = &stale
			}
			_, err := s.inSnapshot(ctx, tenant, func(tx pgx.Tx, ti tenantInfo, st statsRow) error {
				if !st.colsOK {
					return fmt.Errorf("tenant %s has no column blocks", tenant)
				}
				req.Combined = req.Combined.ForTenant(ti.settings.Stems(), ti.settings.NormFields())
				_, sumLen, err := scopeTotals(ctx, tx, ti, st, req.Principal)
				if err != nil {
					return err
				}
				filterArgs := []any{int16(p.Clearance), p.Barriers, req.NowTick, req.MaxStaleTicks}
				qp, sc, err := scanTx(ctx, tx, ti, st, req, nil, req.Terms, filterArgs, true)
				defer qp.release()
				if err != nil {
					return err
				}
				entitled := ti.settings.Statistics.Entitled()
				at, _ := qp.positions(sc, entitled)
				got := docRankColumns(&req, qp, sc, at, sumLen, entitled, ti.settings.BM25)
				want := docRankEvidence(&req, qp, sc, at, sumLen, entitled, ti.settings.BM25)
				if !reflect.DeepEqual(got, want) {
					return fmt.Errorf("query %q (%+v, top_n %d, combined %v):\ngot  %+v\nwant %+v", qtext, p, req.TopN, req.Combined != nil, got, want)
				}
				compared++
				hits += len(got)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if compared != 40 || hits < 200 {
			t.Errorf("scope %s: %d rankings compared, %d hits: too little to compare", scope, compared, hits)
		}
	}
}

// TestTopFloor: the k-th largest positive value, 0 with fewer, +Inf for k
// <= 0, against a sort.
func TestTopFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		xs := make([]float64, rng.IntN(40))
		for i := range xs {
			xs[i] = float64(rng.IntN(9) - 3) // ties, zeros and negatives
		}
		k := rng.IntN(12) - 1
		var pos []float64
		for _, x := range xs {
			if x > 0 {
				pos = append(pos, x)
			}
		}
		slices.SortFunc(pos, func(a, b float64) int { return cmp.Compare(b, a) })
		want := 0.0
		switch {
		case k <= 0:
			want = math.Inf(1)
		case len(pos) >= k:
			want = pos[k-1]
		}
		if got := topFloor(xs, k); got != want {
			t.Fatalf("trial %d: topFloor(%v, %d) = %v, want %v", trial, xs, k, got, want)
		}
	}
}
