package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func testRecord() Record {
	return Record{Seq: 7, At: time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC), Sub: "alice", Op: "retrieve", Query: "PMT-771 hold",
		Policy: `{"now_tick":120}`, ChunkIDs: []string{"pay-001::0"}, Considered: 9, ExcludedByEntitlement: 2, ExcludedByFreshness: 1,
		Degraded: []string{"rerank"}, IndexVersion: 4, RequestID: "req-1"}
}

// TestAuditHashUnchanged pins the hash of an unkeyed row to the value the
// service computed before keys existed, so rows already in audit tables
// keep verifying.
func TestAuditHashUnchanged(t *testing.T) {
	prev := make([]byte, 32)
	prev[0] = 1
	got := hex.EncodeToString(Hash(prev, testRecord()))
	if want := "f8b302074b8d88d8db866822b67cd587c642f6e7a6b490c5ea0506d149e1b634"; got != want {
		t.Fatalf("AuditHash = %s, want %s", got, want)
	}
}

// TestAuditMAC: the keyed hash depends on the key and on the key id, and
// is not the unkeyed hash.
func TestMAC(t *testing.T) {
	prev := make([]byte, 32)
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	r := testRecord()
	r.KeyID = "k1"
	m := MAC(k1, prev, r)
	if bytes.Equal(m, MAC(k2, prev, r)) {
		t.Errorf("the MAC does not depend on the key")
	}
	if bytes.Equal(m, Hash(prev, r)) {
		t.Errorf("the MAC equals the unkeyed hash")
	}
	r2 := r
	r2.KeyID = "k2"
	if bytes.Equal(m, MAC(k1, prev, r2)) {
		t.Errorf("the MAC does not cover the key id")
	}
	if !bytes.Equal(m, MAC(k1, prev, r)) {
		t.Errorf("the MAC is not deterministic")
	}
}

// TestChainAuditHashes: a batch chained with one hash state, reset per
// record, holds the hashes AuditMAC and AuditHash give each record on its
// own, each on the previous record's hash, keyed and unkeyed.
func TestChainAuditHashes(t *testing.T) {
	key := bytes.Repeat([]byte{7}, MinKeyBytes)
	tests := []struct {
		name string
		key  []byte
		hash func(prev []byte, r Record) []byte
	}{
		{name: "keyed", key: key, hash: func(prev []byte, r Record) []byte { return MAC(key, prev, r) }},
		{name: "unkeyed", hash: Hash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ws []*auditWaiter
			for i := range 5 {
				r := testRecord()
				r.Query, r.RequestID = strings.Repeat("q", i*70), "req-"+string(rune('a'+i))
				if i%2 == 1 {
					r.ChunkIDs, r.Degraded = nil, nil
				}
				if tt.key != nil {
					r.KeyID = "k1"
				}
				ws = append(ws, &auditWaiter{rec: r})
			}
			head := auditHead{seq: 41, hash: bytes.Repeat([]byte{9}, 32)}
			recs := chainAudit(ws, head, tt.key)
			prev := head.hash
			for i, r := range recs {
				if r.Seq != head.seq+1+int64(i) || !bytes.Equal(r.PrevHash, prev) {
					t.Fatalf("record %d: seq %d, prev %x; want %d, %x", i, r.Seq, r.PrevHash, head.seq+1+int64(i), prev)
				}
				if want := tt.hash(prev, r); !bytes.Equal(r.Hash, want) {
					t.Fatalf("record %d: hash %x, want %x", i, r.Hash, want)
				}
				prev = r.Hash
			}
		})
	}
}

func TestParseKeyring(t *testing.T) {
	key := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	tests := []struct {
		name, file, active string
		wantActive         string
		wantIDs            int
		wantErr            string
	}{
		{"one key is active", "k1 " + key(32) + "\n", "", "k1", 1, ""},
		{"comments and blank lines", "# rotated 2024-05\n\nk1 " + key(32) + "\n  k2 " + key(48) + "  \n", "k2", "k2", 2, ""},
		{"several keys, none named", "k1 " + key(32) + "\nk2 " + key(32) + "\n", "", "", 2, ""},
		{"active not in the file", "k1 " + key(32) + "\n", "k9", "", 0, `active key id "k9" is not in the keyring`},
		{"short key", "k1 " + key(16) + "\n", "", "", 0, "has 16 bytes, want at least 32"},
		{"not base64", "k1 not*base64\n", "", "", 0, "line 1: the key is not standard base64"},
		{"three fields", "k1 " + key(32) + " extra\n", "", "", 0, "line 1: want KEY_ID BASE64_KEY"},
		{"duplicate id", "k1 " + key(32) + "\nk1 " + key(32) + "\n", "", "", 0, `line 2: key id "k1" appears twice`},
		{"bad id", "k/1 " + key(32) + "\n", "", "", 0, `key id "k/1"`},
		{"empty", "# nothing\n", "", "", 0, "no keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKeyring([]byte(tt.file), tt.active)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrKeyring) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrKeyring with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Active != tt.wantActive || len(k.Keys) != tt.wantIDs {
				t.Fatalf("got active %q and %d keys, want %q and %d", k.Active, len(k.Keys), tt.wantActive, tt.wantIDs)
			}
		})
	}
}
