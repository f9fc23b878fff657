package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/index"
	"github.com/cordon-rag/cordon/internal/proccpu"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
	"github.com/cordon-rag/cordon/store/postgres/migrate"
)

// BenchmarkAuditAppend measures audit appends per second to one tenant
// with 1, 8 and 32 concurrent appenders, and spread over 20 tenants with 8
// and 32 (keyed chains, one store with 16 connections), and the CPU each
// append costs: in this process
// (cpu-us/append) and, when the database runs on this machine, in its
// backends (pg-cpu-us/append). It uses only AppendAudit, so it runs
// unchanged on any version of the store.
func BenchmarkAuditAppend(b *testing.B) {
	for _, c := range []struct{ tenants, clients int }{{1, 1}, {1, 8}, {1, 32}, {20, 8}, {20, 32}} {
		tenants, clients := c.tenants, c.clients
		name := fmt.Sprintf("clients=%d", clients)
		if tenants > 1 {
			// Each append goes to the next of the tenants in turn.
			name = fmt.Sprintf("tenants=%d,clients=%d", tenants, clients)
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			dbURL := newDatabase(b)
			if _, err := migrate.Up(ctx, dbURL); err != nil {
				b.Fatal(err)
			}
			st, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 16, AuditKeys: testKeyring("k1")})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			names := []string{"acme"}
			for i := 1; i < tenants; i++ {
				names = append(names, fmt.Sprintf("acme%d", i))
			}
			for _, tn := range names {
				if _, err := st.CreateTenant(ctx, tn, index.DefaultSettings()); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			pg0, pgOK := backendCPU(ctx, st)
			cpu0 := proccpu.Self()
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						if _, err := st.AppendAudit(ctx, names[i%int64(len(names))], audit.Record{Sub: "s", Op: "retrieve", Policy: "{}", Query: "PMT-771 hold"}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
			if a := st.AuditStats(); a.Commits > 0 {
				b.ReportMetric(float64(a.Records)/float64(a.Commits), "records/commit")
			}
			b.ReportMetric(float64((proccpu.Self()-cpu0).Microseconds())/float64(b.N), "cpu-us/append")
			if pg1, ok := backendCPU(ctx, st); ok && pgOK {
				var d time.Duration
				for pid, t := range pg1 {
					d += t - pg0[pid] // a backend started during the run counts from 0
				}
				b.ReportMetric(float64(d.Microseconds())/float64(b.N), "pg-cpu-us/append")
			}
		})
	}
}

// backendCPU is the CPU time of each backend of st's database, read from
// /proc; ok is false when a backend is not a process of this machine.
func backendCPU(ctx context.Context, st *postgres.Store) (map[int32]time.Duration, bool) {
	rows, err := st.Pool().Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return nil, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, false
	}
	out := map[int32]time.Duration{}
	for _, pid := range pids {
		d, err := proccpu.Of(int(pid))
		if err != nil {
			return nil, false
		}
		out[pid] = d
	}
	return out, true
}
