package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cordon-rag/cordon/store/postgres/internal/pgexec"
)

// Record is one row of a tenant's audit log: who asked what, under which
// policy, what came back and from which index version. Seq, At, KeyID,
// PrevHash and Hash are set by [Log.Append].
type Record struct {
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
	// KeyID names the key of the row's MAC; "" marks an unkeyed row
	// (plain SHA-256).
	KeyID    string
	PrevHash []byte
	Hash     []byte
}

// canonicalAudit is the hashed form of a record: a struct, so encoding/json
// writes its fields in this fixed order; times are Unix microseconds, the
// precision timestamptz keeps. key_id is omitted when empty, so an unkeyed
// row hashes exactly as rows written before keys existed.
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
	KeyID                 string   `json:"key_id,omitempty"`
}

// writeAudit feeds h the previous row's hash (32 zero bytes for the first
// row), the length of the row's canonical JSON and the JSON itself.
func writeAudit(h hash.Hash, prev []byte, r Record) []byte {
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
		RequestID: r.RequestID, KeyID: r.KeyID,
	})
	h.Write(prev)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
	return h.Sum(nil)
}

// AuditHash is the hash of an unkeyed row: SHA-256 over the previous row's
// hash, the length of the canonical JSON and the canonical JSON itself.
// Anyone who can write the table can recompute it; a keyed row uses
// [AuditMAC].
func Hash(prev []byte, r Record) []byte { return writeAudit(sha256.New(), prev, r) }

// AuditMAC is the hash of a keyed row: HMAC-SHA256 with key over the same
// bytes as [AuditHash] (whose canonical JSON then includes r.KeyID).
func MAC(key, prev []byte, r Record) []byte {
	return writeAudit(hmac.New(sha256.New, key), prev, r)
}

// genesisHash is the prev_hash of a chain's first row.
var genesisHash = make([]byte, sha256.Size)

// MinKeyBytes is the shortest audit key accepted: SHA-256's output
// size (RFC 2104 advises against keys shorter than the hash output).
const MinKeyBytes = 32

var auditKeyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keyring holds the keys of keyed audit chains, which the database
// never holds. Keys maps a key id to its key; Active names the key new rows
// are written with ("" writes unkeyed rows). Verification uses every key, so
// rows written with an older key verify as long as that key stays in Keys.
type Keyring struct {
	Active string
	Keys   map[string][]byte
}

// Validate checks key ids, key lengths and that Active is in Keys.
func (k *Keyring) Validate() error {
	for id, key := range k.Keys {
		if !auditKeyIDPattern.MatchString(id) {
			return fmt.Errorf("%w: key id %q: want 1-64 of A-Z a-z 0-9 . _ -", ErrKeyring, id)
		}
		if len(key) < MinKeyBytes {
			return fmt.Errorf("%w: key %q has %d bytes, want at least %d", ErrKeyring, id, len(key), MinKeyBytes)
		}
	}
	if _, ok := k.Keys[k.Active]; k.Active != "" && !ok {
		return fmt.Errorf("%w: the active key id %q is not in the keyring", ErrKeyring, k.Active)
	}
	return nil
}

// ParseKeyring reads a keyring file: one "KEY_ID BASE64_KEY" per line
// (standard base64 of at least [MinKeyBytes] bytes); blank lines and
// lines starting with # are ignored. active names the key to write with;
// when it is "" and the file holds exactly one key, that key is active.
func ParseKeyring(data []byte, active string) (*Keyring, error) {
	k := &Keyring{Keys: map[string][]byte{}}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want KEY_ID BASE64_KEY", ErrKeyring, i+1)
		}
		key, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: the key is not standard base64", ErrKeyring, i+1)
		}
		if _, dup := k.Keys[f[0]]; dup {
			return nil, fmt.Errorf("%w: line %d: key id %q appears twice", ErrKeyring, i+1, f[0])
		}
		k.Keys[f[0]] = key
	}
	if len(k.Keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrKeyring)
	}
	k.Active = active
	if active == "" && len(k.Keys) == 1 {
		for id := range k.Keys {
			k.Active = id
		}
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k, nil
}

func auditTable(schema string) string { return pgx.Identifier{schema, "audit"}.Sanitize() }

// AppendAudit appends r to tenant's audit log and returns it as stored (with
// its sequence number, time, key id and hashes), once the record is
// committed. The row is keyed with the store's active audit key
// (Options.AuditKeys), else unkeyed; a chain whose newest row is keyed is
// never continued unkeyed ([ErrKeyRequired]). Concurrent appends
// share transactions, those of different tenants too (group commit, see
// auditgroup.go); a transaction holds the advisory lock of each tenant it
// writes and reads each chain head under it, or checks the head it
// chained on, so no chain forks, across processes too. When ctx ends
// first, AppendAudit returns its error and the record may still be
// written.
func (s *Log) Append(ctx context.Context, tenant string, r Record) (Record, error) {
	schema, err := s.schema(tenant)
	if err != nil {
		return r, err
	}
	var key []byte
	r.KeyID = ""
	if k := s.keys; k != nil && k.Active != "" {
		r.KeyID, key = k.Active, k.Keys[k.Active]
	}
	w := &auditWaiter{ctx: ctx, rec: r, done: make(chan struct{})}
	if err := s.appendGrouped(ctx, tenant, schema, key, w); err != nil {
		if errors.Is(err, pgexec.ErrTenantNotFound) {
			return r, fmt.Errorf("append audit: %w: %q", pgexec.ErrTenantNotFound, tenant)
		}
		return r, fmt.Errorf("append audit record for tenant %q: %w", tenant, err)
	}
	return w.rec, nil
}

// Break says where a tenant's audit chain breaks. It is returned by
// [Log.Verify] as an error.
type Break struct {
	Seq    int64
	Reason string
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit chain breaks at seq %d: %s", b.Seq, b.Reason)
}

// UnknownKeyError is returned by [Log.Verify] when a row names a
// key id that is not in the store's keyring: that row, and so the chain
// after it, cannot be verified.
type UnknownKeyError struct {
	Seq   int64
	KeyID string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("cannot verify the audit chain at seq %d: key id %q is not in the keyring", e.Seq, e.KeyID)
}

// KeyMismatchError is returned by [Log.Verify] when no row keyed
// with a key id verifies under the keyring's key of that id while every
// row's sequence and links are intact: the keyring's key is not the one the
// rows were written with. Tampering without the key changes some rows and
// leaves the others verifying under the right key, which is reported as an
// [*Break] instead.
type KeyMismatchError struct {
	KeyID string
	// Seq is the first row keyed with KeyID; Rows counts the rows keyed
	// with it, none of which verifies.
	Seq, Rows int64
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("cannot verify the audit chain: none of the %d rows keyed with key id %q (the first at seq %d) verifies under the keyring's key %q, while every row's links are intact: the keyring's key is not the one they were written with (or every one of those rows was rewritten)",
		e.Rows, e.KeyID, e.Seq, e.KeyID)
}

// Head is a chain's newest row, as exported for anchoring outside the
// database and given back to [Log.Verify] to check against.
type Head struct {
	Tenant string    `json:"tenant"`
	Seq    int64     `json:"seq"`
	Hash   string    `json:"hash"` // hex
	KeyID  string    `json:"key_id"`
	At     time.Time `json:"at"`
}

// Summary describes a verified chain.
type Summary struct {
	Rows int64
	Head string // hex of the last row's hash, for anchoring elsewhere
	// Last is the newest row (zero Seq for an empty chain).
	Last Head
	// Unkeyed counts the rows chained without a key; they are always the
	// first Unkeyed rows (a keyed chain never goes back to unkeyed).
	Unkeyed int64
	// KeyIDs lists the key ids of the keyed rows, sorted.
	KeyIDs []string
}

// VerifyAudit recomputes tenant's audit chain in one snapshot: each row's
// sequence number, previous hash, and own hash (an HMAC with the key its
// key id names, from the store's keyring, or SHA-256 for an unkeyed row).
// It returns an [*Break] at the first row that is wrong, an unkeyed
// row after a keyed one included, and an [*UnknownKeyError] at the
// first row whose key is not in the keyring.
//
// A wrong key is told from tampering by the rows keyed with the same key
// id: a row whose MAC fails is a break when another row keyed with that id
// verifies (the key is right), and when none does while the whole chain's
// sequence and links hold, the result is an [*KeyMismatchError]. So a
// MAC failure before any row of its key id verified is held until the
// chain's end or the next row of that id decides it. Each anchor (a head exported
// earlier) must still be in the chain with the same hash: removing the
// newest rows, or rewriting the whole chain, is detectable only that way.
func (s *Log) Verify(ctx context.Context, tenant string, anchors ...Head) (Summary, error) {
	var sum Summary
	for _, a := range anchors {
		if a.Tenant != "" && a.Tenant != tenant {
			return sum, fmt.Errorf("verify audit of tenant %q: the anchor is for tenant %q", tenant, a.Tenant)
		}
	}
	schema, found, err := s.lookup(ctx, s.pool, tenant)
	if err != nil {
		return sum, err
	}
	if !found {
		return sum, fmt.Errorf("verify audit: %w: %q", pgexec.ErrTenantNotFound, tenant)
	}
	var keys map[string][]byte
	if s.keys != nil {
		keys = s.keys.Keys
	}
	err = pgexec.InTx(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT seq, at, sub, op, query, policy, chunk_ids, considered, excluded_by_entitlement,
			       excluded_by_freshness, degraded, index_version, request_id, key_id, prev_hash, hash
			FROM `+auditTable(schema)+` ORDER BY seq`)
		if err != nil {
			return pgexec.Classify(err)
		}
		defer rows.Close()
		prev := genesisHash
		var want int64 = 1
		var r Record
		keyed := map[string]bool{}
		// Per key id: whether a row verified, the first row whose MAC
		// failed before one did, and the rows keyed with it.
		verified := map[string]bool{}
		firstFailed := map[string]int64{}
		keyRows := map[string]int64{}
		for rows.Next() {
			r = Record{}
			if err := rows.Scan(&r.Seq, &r.At, &r.Sub, &r.Op, &r.Query, &r.Policy, &r.ChunkIDs, &r.Considered,
				&r.ExcludedByEntitlement, &r.ExcludedByFreshness, &r.Degraded, &r.IndexVersion, &r.RequestID,
				&r.KeyID, &r.PrevHash, &r.Hash); err != nil {
				return err
			}
			switch {
			case r.Seq != want:
				return &Break{Seq: r.Seq, Reason: fmt.Sprintf("expected seq %d: rows are missing", want)}
			case !bytes.Equal(r.PrevHash, prev):
				return &Break{Seq: r.Seq, Reason: "prev_hash does not match the previous row's hash"}
			case r.KeyID == "" && len(keyed) > 0:
				return &Break{Seq: r.Seq, Reason: "an unkeyed row follows keyed rows (a keyed chain never goes back to unkeyed: the row was rewritten without the key)"}
			}
			var h []byte
			if r.KeyID == "" {
				h = Hash(prev, r)
				sum.Unkeyed++
			} else {
				key, ok := keys[r.KeyID]
				if !ok {
					return &UnknownKeyError{Seq: r.Seq, KeyID: r.KeyID}
				}
				h = MAC(key, prev, r)
				keyed[r.KeyID] = true
				keyRows[r.KeyID]++
			}
			modified := &Break{Seq: r.Seq, Reason: "the row's content does not match its hash (it was modified)"}
			switch {
			case hmac.Equal(h, r.Hash) && r.KeyID != "":
				if seq, held := firstFailed[r.KeyID]; held {
					// The key verifies this row, so the earlier one was
					// modified.
					return &Break{Seq: seq, Reason: modified.Reason}
				}
				verified[r.KeyID] = true
			case hmac.Equal(h, r.Hash):
			case r.KeyID == "" || verified[r.KeyID]:
				return modified
			default:
				if _, held := firstFailed[r.KeyID]; !held {
					firstFailed[r.KeyID] = r.Seq
				}
			}
			for _, a := range anchors {
				if a.Seq == r.Seq && !strings.EqualFold(a.Hash, hex.EncodeToString(r.Hash)) {
					return &Break{Seq: r.Seq, Reason: fmt.Sprintf("the row's hash differs from the anchored head %s (the chain was rewritten)", a.Hash)}
				}
			}
			prev = r.Hash
			want++
			sum.Rows++
		}
		if err := rows.Err(); err != nil {
			return pgexec.Classify(err)
		}
		if len(firstFailed) > 0 {
			var mm *KeyMismatchError
			for id, seq := range firstFailed {
				if mm == nil || seq < mm.Seq {
					mm = &KeyMismatchError{KeyID: id, Seq: seq, Rows: keyRows[id]}
				}
			}
			return mm
		}
		for _, a := range anchors {
			if a.Seq > sum.Rows {
				return &Break{Seq: a.Seq, Reason: fmt.Sprintf("the chain ends at seq %d but a head at seq %d was anchored (the newest rows were removed)", sum.Rows, a.Seq)}
			}
		}
		if sum.Rows > 0 {
			sum.Head = hex.EncodeToString(prev)
			sum.Last = Head{Tenant: tenant, Seq: r.Seq, Hash: sum.Head, KeyID: r.KeyID, At: r.At.UTC()}
		} else {
			sum.Last = Head{Tenant: tenant}
		}
		for id := range keyed {
			sum.KeyIDs = append(sum.KeyIDs, id)
		}
		slices.Sort(sum.KeyIDs)
		return nil
	})
	if err != nil {
		return sum, fmt.Errorf("verify audit of tenant %q: %w", tenant, err)
	}
	return sum, nil
}
