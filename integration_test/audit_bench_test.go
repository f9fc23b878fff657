package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/store/postgres"
)

// BenchmarkAuditAppend measures audit appends per second to one tenant
// with 1, 8 and 32 concurrent appenders (keyed chain, one store with 16
// connections). It uses only AppendAudit, so it runs unchanged on any
// version of the store.
func BenchmarkAuditAppend(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			dbURL := newDatabase(b)
			if _, err := postgres.Migrate(ctx, dbURL); err != nil {
				b.Fatal(err)
			}
			st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 16, AuditKeys: testKeyring("k1")})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.CreateTenant(ctx, "acme", index.DefaultSettings()); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := st.AppendAudit(ctx, "acme", postgres.AuditRecord{Sub: "s", Op: "retrieve", Policy: "{}", Query: "PMT-771 hold"}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
		})
	}
}
