package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file routes the query path's reads (RankVersion, Rank, IDF,
// LoadChunks) to streaming replicas. Writes, tenant DDL, migrations, the
// audit log and every other statement stay on the primary.
//
// Read-your-writes: after a write, Position returns the primary's WAL
// position, a Token at or past the write's commit record. A read whose
// context carries a token (WithConsistency) runs on a replica only if that
// replica has replayed the WAL up to the token, checked on the connection
// that then serves the read, before the read's snapshot is taken (replay
// only moves forward on a running standby, and a restart drops the
// connection); otherwise it runs on the primary. A read without a token may
// be served by any healthy replica within Options.ReplicaMaxLag of the
// primary (any, however far behind, when it is 0): it sees a committed state
// of the index, perhaps not the latest.

// DefaultReplicaBackoff is how long a replica that failed a read is left
// out of the rotation when Options.ReplicaBackoff is 0.
const DefaultReplicaBackoff = 5 * time.Second

// Token is a consistency token: a WAL position (an LSN) of the primary.
// The zero Token asks for nothing.
type Token uint64

// String formats t as PostgreSQL prints an LSN ("16/B374D848").
func (t Token) String() string {
	return fmt.Sprintf("%X/%X", uint64(t)>>32, uint32(t))
}

// ParseToken parses a token in the form String writes.
func ParseToken(s string) (Token, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if ok && hi != "" && lo != "" && len(hi) <= 8 && len(lo) <= 8 {
		h, err1 := strconv.ParseUint(hi, 16, 32)
		l, err2 := strconv.ParseUint(lo, 16, 32)
		if err1 == nil && err2 == nil {
			return Token(h<<32 | l), nil
		}
	}
	return 0, fmt.Errorf("invalid consistency token %q: want a WAL position such as 16/B374D848, as a write returned it", s)
}

type tokenKey struct{}

// WithConsistency returns ctx carrying t: reads under it see at least the
// state of the primary at t (every write whose Position was at or before t).
func WithConsistency(ctx context.Context, t Token) context.Context {
	if t == 0 {
		return ctx
	}
	return context.WithValue(ctx, tokenKey{}, t)
}

func tokenFrom(ctx context.Context) Token {
	t, _ := ctx.Value(tokenKey{}).(Token)
	return t
}

// replica is one read replica's pool and health.
type replica struct {
	pool *pgxpool.Pool
	// downUntil (unix nanoseconds) keeps a replica that failed out of the
	// rotation until then.
	downUntil atomic.Int64
	served    atomic.Int64 // reads answered
	behind    atomic.Int64 // tokened reads it had not replayed far enough for
	failed    atomic.Int64 // reads that failed on it and went to the primary
	lagging   atomic.Int64 // untokened reads skipped under the lag bound
	// caughtUpAt (unix nanoseconds) is the latest time the lag monitor
	// knows the replica holds every commit before (see replicalag.go).
	caughtUpAt atomic.Int64
}

// ReplicaStats counts one replica's reads.
type ReplicaStats struct {
	// Served is the number of reads the replica answered.
	Served int64
	// Behind is the number of reads carrying a token the replica had not
	// replayed yet (they went to another replica or the primary).
	Behind int64
	// Failed is the number of reads that failed on the replica and were
	// answered by the primary; each one took it out of the rotation for
	// the backoff.
	Failed int64
	// Lagging is the number of reads without a token it was skipped for,
	// further behind than Options.ReplicaMaxLag.
	Lagging int64
	// Healthy is false while the replica is out of the rotation after a
	// failed read (for the backoff).
	Healthy bool
	// Lag is how far behind the primary the replica is known to be at
	// most: the time since the lag monitor last saw it hold every commit
	// of the primary (sampled every second, or four times within
	// Options.ReplicaMaxLag), counted from the store's opening until it is
	// first seen to catch up.
	Lag time.Duration
	// OverLag is true while Lag is above Options.ReplicaMaxLag (when set):
	// reads without a token skip the replica.
	OverLag bool
}

// ReadStats reports where the query path's reads went.
type ReadStats struct {
	// Primary is the number of reads the primary answered.
	Primary int64
	// Replicas has one entry per Options.Replicas URL, in order.
	Replicas []ReplicaStats
}

// ReadStats returns the read routing counters.
func (s *Store) ReadStats() ReadStats {
	out := ReadStats{Primary: s.primaryReads.Load()}
	now := time.Now().UnixNano()
	for _, r := range s.replicas {
		out.Replicas = append(out.Replicas, ReplicaStats{
			Served: r.served.Load(), Behind: r.behind.Load(), Failed: r.failed.Load(), Lagging: r.lagging.Load(),
			Healthy: r.downUntil.Load() <= now, Lag: s.lagOf(r, now), OverLag: !s.fresh(r, now),
		})
	}
	return out
}

// HasReplicas reports whether reads may go to replicas.
func (s *Store) HasReplicas() bool { return len(s.replicas) > 0 }

// Position returns the primary's current WAL insert position: a token at
// or past the commit of every write that returned before the call. Pass it
// to WithConsistency to read one's own writes on a replica.
func (s *Store) Position(ctx context.Context) (Token, error) {
	var lsn string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", classify(err))
	}
	return ParseToken(lsn)
}

// openReplicas connects to each replica URL with the primary's pool
// settings. A replica that cannot be reached now is not an error: it is
// tried again on later reads.
func openReplicas(ctx context.Context, urls []string, configure func(*pgxpool.Config)) ([]*replica, error) {
	var out []*replica
	for i, u := range urls {
		cfg, err := parseConfig(u)
		if err != nil {
			closeReplicas(out)
			return nil, fmt.Errorf("replica %d: %w", i+1, err)
		}
		configure(cfg)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			closeReplicas(out)
			return nil, fmt.Errorf("replica %d: connect: %w", i+1, classify(err))
		}
		out = append(out, &replica{pool: pool})
	}
	return out, nil
}

func closeReplicas(rs []*replica) {
	for _, r := range rs {
		r.pool.Close()
	}
}

// onReader runs fn on a connection to a healthy replica that has replayed
// past ctx's token, else on a connection to the primary. A replica that
// fails (unreachable, a recovery conflict, any error but the caller's own
// cancellation) is left out of the rotation for the backoff and fn runs
// again on the primary: a replica's failure never reaches the caller.
// fn must be safe to run twice.
func (s *Store) onReader(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	if len(s.replicas) > 0 {
		tok := tokenFrom(ctx)
		start := int(s.nextReplica.Add(1))
		now := time.Now().UnixNano()
		for i := range s.replicas {
			r := s.replicas[(start+i)%len(s.replicas)]
			if r.downUntil.Load() > now {
				continue
			}
			if tok == 0 && !s.fresh(r, now) {
				r.lagging.Add(1)
				continue
			}
			done, err := s.tryReplica(ctx, r, tok, fn)
			if done {
				return err
			}
		}
	}
	s.primaryReads.Add(1)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(err)
	}
	defer conn.Release()
	return fn(conn)
}

// tryReplica runs fn on r if r has replayed past tok. done reports whether
// fn ran to its end there (err is then fn's error, or the caller's
// cancellation).
func (s *Store) tryReplica(ctx context.Context, r *replica, tok Token, fn func(*pgxpool.Conn) error) (done bool, err error) {
	fail := func(err error) (bool, error) {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		r.failed.Add(1)
		r.downUntil.Store(time.Now().Add(s.backoff()).UnixNano())
		return false, nil
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Release()
	if tok != 0 {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, tok.String()).Scan(&ok); err != nil {
			return fail(err)
		}
		if !ok {
			r.behind.Add(1)
			return false, nil
		}
	}
	if err := fn(conn); err != nil && (conn.Conn().IsClosed() || replicaFault(err)) {
		return fail(err)
	} else if err != nil {
		// The replica answered with an error (a chunk the principal may
		// not see, say): that is the read's answer.
		r.served.Add(1)
		return true, err
	}
	r.served.Add(1)
	return true, nil
}

// replicaFault reports whether err is the replica's failure rather than the
// read's answer: the database was unreachable, the connection broke, or the
// server refused or cancelled the read (a conflict with recovery, a
// shutdown, exhausted resources).
func replicaFault(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58":
			return true
		}
		return false
	}
	return errors.Is(err, ErrUnavailable) || pgconn.Timeout(err)
}

func (s *Store) backoff() time.Duration {
	if s.opts.ReplicaBackoff > 0 {
		return s.opts.ReplicaBackoff
	}
	return DefaultReplicaBackoff
}
