package postgres

import (
	"context"
	"sync"
	"time"
)

// A lag bound for reads without a consistency token (Options.ReplicaMaxLag),
// and each replica's lag as ReadStats reports it.
//
// A monitor samples the primary's WAL position and then each replica's
// replay position every interval (every second without a bound: only the
// stats read it then). A replica that has replayed past a
// position the primary had at time T holds every transaction committed
// before T: its lag is at most now - T. The monitor keeps recent samples
// of the primary and records, per replica, the latest such T
// (caughtUpAt). A read without a token goes to a replica only while
// now - caughtUpAt <= ReplicaMaxLag; otherwise the replica is skipped
// (counted as Lagging) like a failed one, and the primary answers if no
// replica qualifies. Until the monitor has seen a replica catch up, it is
// skipped. ReadStats reports now - caughtUpAt as the replica's lag, counted
// from the monitor's start until it is first seen to catch up.

// lagSample is the primary's WAL position at a time.
type lagSample struct {
	at  int64 // unix nanoseconds
	lsn Token
}

// lagMonitor samples positions until stopped.
type lagMonitor struct {
	stop    chan struct{}
	done    sync.WaitGroup
	started int64 // unix nanoseconds
}

// lagInterval is how often the monitor samples for a bound of maxLag: four
// times within the bound, at least every 10 ms and at most every second;
// every second without a bound (maxLag 0).
func lagInterval(maxLag time.Duration) time.Duration {
	if maxLag <= 0 {
		return time.Second
	}
	return min(max(maxLag/4, 10*time.Millisecond), time.Second)
}

// startLagMonitor starts sampling when the store has replicas.
func (s *Store) startLagMonitor() {
	if len(s.replicas) == 0 {
		return
	}
	m := &lagMonitor{stop: make(chan struct{}), started: time.Now().UnixNano()}
	s.lag = m
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		tick := time.NewTicker(lagInterval(s.opts.ReplicaMaxLag))
		defer tick.Stop()
		var samples []lagSample
		for {
			samples = s.sampleLag(samples)
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

func (m *lagMonitor) close() {
	if m != nil {
		close(m.stop)
		m.done.Wait()
	}
}

// maxLagSamples bounds the samples kept: a replica further behind than the
// oldest one is lagging whatever the bound.
const maxLagSamples = 256

// sampleLag takes one sample of the primary and updates each replica's
// caughtUpAt; it returns the samples to keep.
func (s *Store) sampleLag(samples []lagSample) []lagSample {
	ctx, cancel := context.WithTimeout(context.Background(), max(s.opts.ReplicaMaxLag, time.Second))
	defer cancel()
	at := time.Now().UnixNano()
	if p, err := s.Position(ctx); err == nil {
		samples = append(samples, lagSample{at: at, lsn: p})
		if len(samples) > maxLagSamples {
			samples = samples[len(samples)-maxLagSamples:]
		}
	}
	for _, r := range s.replicas {
		var lsn *string
		if err := r.pool.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&lsn); err != nil || lsn == nil {
			continue // unreachable, or not a standby: it keeps its last time
		}
		replayed, err := ParseToken(*lsn)
		if err != nil {
			continue
		}
		// The latest sample the replica has replayed past.
		for i := len(samples) - 1; i >= 0; i-- {
			if samples[i].lsn <= replayed {
				if samples[i].at > r.caughtUpAt.Load() {
					r.caughtUpAt.Store(samples[i].at)
				}
				break
			}
		}
	}
	return samples
}

// fresh reports whether r may serve a read without a token under the lag
// bound, at now (unix nanoseconds).
func (s *Store) fresh(r *replica, now int64) bool {
	if s.opts.ReplicaMaxLag <= 0 {
		return true
	}
	return now-r.caughtUpAt.Load() <= int64(s.opts.ReplicaMaxLag)
}

// lagOf is how far behind the primary r is known to be at most, at now
// (unix nanoseconds): the time since the monitor last saw it hold every
// commit, or since the monitor started if it has not seen that yet. It is
// 0 without a monitor (a store without replicas).
func (s *Store) lagOf(r *replica, now int64) time.Duration {
	if s.lag == nil {
		return 0
	}
	return time.Duration(max(now-max(r.caughtUpAt.Load(), s.lag.started), 0))
}
