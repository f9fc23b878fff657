package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AuditRecord is one row of a tenant's audit log: who asked what, under which
// policy, what came back and from which index version. Seq, At, PrevHash and
// Hash are set by [Store.AppendAudit].
type AuditRecord struct {
	Seq                   int64
	At                    time.Time
	Sub                   string
	Op                    string // retrieve, ground or assemble
	Query                 string
	Policy                string // the request's policy, as canonical JSON
	ChunkIDs              []string
	Considered            int64
	ExcludedByEntitlement int64
	ExcludedByFreshness   int64
	Degraded              []string
	IndexVersion          int64
	RequestID             string
	PrevHash              []byte
	Hash                  []byte
}

// canonicalAudit is the hashed form of a record: a struct, so encoding/json
// writes its fields in this fixed order; times are Unix microseconds, the
// precision timestamptz keeps.
type canonicalAudit struct {
	Seq                   int64    `json:"seq"`
	AtMicros              int64    `json:"at_us"`
	Sub                   string   `json:"sub"`
	Op                    string   `json:"op"`
	Query                 string   `json:"query"`
	Policy                string   `json:"policy"`
	ChunkIDs              []string `json:"chunk_ids"`
	Considered            int64    `json:"considered"`
	ExcludedByEntitlement int64    `json:"excluded_by_entitlement"`
	ExcludedByFreshness   int64    `json:"excluded_by_freshness"`
	Degraded              []string `json:"degraded"`
	IndexVersion          int64    `json:"index_version"`
	RequestID             string   `json:"request_id"`
}

// AuditHash is SHA-256 over the previous row's hash (32 zero bytes for the
// first row), the length of the canonical JSON and the canonical JSON itself.
func AuditHash(prev []byte, r AuditRecord) []byte {
	nz := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	b, _ := json.Marshal(canonicalAudit{
		Seq: r.Seq, AtMicros: r.At.UnixMicro(), Sub: r.Sub, Op: r.Op, Query: r.Query, Policy: r.Policy,
		ChunkIDs: nz(r.ChunkIDs), Considered: r.Considered, ExcludedByEntitlement: r.ExcludedByEntitlement,
		ExcludedByFreshness: r.ExcludedByFreshness, Degraded: nz(r.Degraded), IndexVersion: r.IndexVersion,
		RequestID: r.RequestID,
	})
	h := sha256.New()
	h.Write(prev)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
	return h.Sum(nil)
}

// genesisHash is the prev_hash of a chain's first row.
var genesisHash = make([]byte, sha256.Size)

func auditTable(schema string) string { return pgx.Identifier{schema, "audit"}.Sanitize() }

// AppendAudit appends r to tenant's audit log and returns it as stored (with
// its sequence number, time and hashes). Appends to one tenant are serialised
// by a transaction-scoped advisory lock, so the chain never forks.
func (s *Store) AppendAudit(ctx context.Context, tenant string, r AuditRecord) (AuditRecord, error) {
	t, found, err := lookupTenant(ctx, s.pool, tenant)
	if err != nil {
		return r, err
	}
	if !found {
		return r, fmt.Errorf("append audit: %w: %q", ErrTenantNotFound, tenant)
	}
	table := auditTable(t.schema)
	err = s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "cordon.audit:"+t.schema); err != nil {
			return classify(err)
		}
		var last int64
		prev := genesisHash
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM `+table+` ORDER BY seq DESC LIMIT 1`).Scan(&last, &prev)
		if err != nil && err != pgx.ErrNoRows {
			return classify(err)
		}
		r.Seq = last + 1
		r.At = time.Now().UTC().Truncate(time.Microsecond)
		if r.ChunkIDs == nil {
			r.ChunkIDs = []string{}
		}
		if r.Degraded == nil {
			r.Degraded = []string{}
		}
		r.PrevHash = prev
		r.Hash = AuditHash(prev, r)
		_, err = tx.Exec(ctx, `INSERT INTO `+table+`
			(seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
			 excluded_by_freshness, degraded, index_version, request_id, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			r.Seq, r.At, r.Sub, r.Op, r.Query, r.Policy, r.ChunkIDs, r.Considered, r.ExcludedByEntitlement,
			r.ExcludedByFreshness, r.Degraded, r.IndexVersion, r.RequestID, r.PrevHash, r.Hash)
		return classify(err)
	})
	if err != nil {
		return r, fmt.Errorf("append audit record for tenant %q: %w", tenant, err)
	}
	return r, nil
}

// AuditBreak says where a tenant's audit chain breaks. It is returned by
// [Store.VerifyAudit] as an error.
type AuditBreak struct {
	Seq    int64
	Reason string
}

func (b *AuditBreak) Error() string {
	return fmt.Sprintf("audit chain breaks at seq %d: %s", b.Seq, b.Reason)
}

// AuditSummary describes a verified chain.
type AuditSummary struct {
	Rows int64
	Head string // hex of the last row's hash, for anchoring elsewhere
}

// VerifyAudit recomputes tenant's audit chain in one snapshot. It returns an
// [*AuditBreak] at the first row whose sequence number, previous hash or own
// hash is wrong. Deleting the newest rows is only detectable against a head
// hash kept elsewhere (AuditSummary.Head), see docs/operations.md.
func (s *Store) VerifyAudit(ctx context.Context, tenant string) (AuditSummary, error) {
	var sum AuditSummary
	t, found, err := lookupTenant(ctx, s.pool, tenant)
	if err != nil {
		return sum, err
	}
	if !found {
		return sum, fmt.Errorf("verify audit: %w: %q", ErrTenantNotFound, tenant)
	}
	err = s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
			       excluded_by_freshness, degraded, index_version, request_id, prev_hash, hash
			FROM `+auditTable(t.schema)+` ORDER BY seq`)
		if err != nil {
			return classify(err)
		}
		defer rows.Close()
		prev := genesisHash
		var want int64 = 1
		for rows.Next() {
			var r AuditRecord
			if err := rows.Scan(&r.Seq, &r.At, &r.Sub, &r.Op, &r.Query, &r.Policy, &r.ChunkIDs, &r.Considered,
				&r.ExcludedByEntitlement, &r.ExcludedByFreshness, &r.Degraded, &r.IndexVersion, &r.RequestID,
				&r.PrevHash, &r.Hash); err != nil {
				return err
			}
			switch {
			case r.Seq != want:
				return &AuditBreak{Seq: r.Seq, Reason: fmt.Sprintf("expected seq %d: rows are missing", want)}
			case !bytes.Equal(r.PrevHash, prev):
				return &AuditBreak{Seq: r.Seq, Reason: "prev_hash does not match the previous row's hash"}
			case !bytes.Equal(AuditHash(prev, r), r.Hash):
				return &AuditBreak{Seq: r.Seq, Reason: "the row's content does not match its hash (it was modified)"}
			}
			prev = r.Hash
			want++
			sum.Rows++
		}
		if err := rows.Err(); err != nil {
			return classify(err)
		}
		if sum.Rows > 0 {
			sum.Head = hex.EncodeToString(prev)
		}
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("verify audit of tenant %q: %w", tenant, err)
	}
	return sum, nil
}
