package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/store/postgres"
	"github.com/cordon-rag/cordon/store/postgres/audit"
)

func auditCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "audit",
		Summary: "verify a tenant's keyed, hash-chained audit log; export its head",
		Usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed] [--json]
       cordon audit head --tenant NAME [--audit-key-file FILE]

verify recomputes the chain of the tenant's audit log (one record per
retrieve, ground and assemble served over HTTP): each record's HMAC-SHA256
with the key its key id names (from the keyring file, the same file
'cordon serve' writes with; every key ever used must stay in it), or plain
SHA-256 for an unkeyed record. It says where the chain breaks: a modified,
inserted or deleted record, or one rewritten without the key, is reported
with its sequence number (BROKEN); a record whose key id is not in the
keyring is reported as unverifiable. A wrong key under the right key id is
told from tampering: when none of the records keyed with that id verifies
under the keyring's key while every record's sequence and links are intact,
it is reported as KEY MISMATCH (check the key file), not as tampering; a
record that fails while another record of its key id verifies is tampering.
Any of these exits 1. On success it prints the number of records, how many
are unkeyed, and the head hash. --json prints one object whose "status" is
ok, broken, key_mismatch, unverifiable or unkeyed (--require-keyed). A key
file readable by others, or by a group other than this process's, draws a
warning: whoever reads it can forge records.

head verifies the chain and prints its newest record as JSON
{"tenant", "seq", "hash", "key_id", "at"}: keep it somewhere the database's
owner cannot rewrite (a ticket, a WORM store) and pass it back with
'verify --anchor FILE' to detect the removal of the newest records or a
rewrite of the whole chain.

--require-keyed fails on any unkeyed record (for a log keyed from its first
record: an unkeyed record can then only be a forgery).

Examples:
  export CORDON_AUDIT_KEY_FILE=/etc/cordon/audit.keys
  cordon audit head --tenant wholesale > wholesale-head.json
  cordon audit verify --tenant wholesale --anchor wholesale-head.json
` + databaseHelp,
		Subs: []*cmdline.Command{
			{Name: "verify", Summary: "verify the tenant's audit chain", Run: runAudit, Usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed] [--json]

Recomputes the tenant's audit chain and says where it breaks, or that the
keyring's key does not match the records (exit 1), or prints the number of
records, how many are unkeyed, and the head hash. --json prints
{"tenant", "status", "records", "unkeyed", "key_ids", "head", "anchor_seq",
"seq", "key_id", "reason"}. 'cordon audit --help' says more.

Example:
  cordon audit verify --tenant wholesale --anchor wholesale-head.json
`},
			{Name: "head", Summary: "verify the chain and print its newest record", Run: runAudit, Usage: `Usage: cordon audit head --tenant NAME [--audit-key-file FILE]

Verifies the tenant's audit chain and prints its newest record as JSON, to
keep where the database's owner cannot rewrite it and pass back to
'verify --anchor FILE'. 'cordon audit --help' says more.

Example:
  cordon audit head --tenant wholesale > wholesale-head.json
`},
		},
	}
}

// auditVerifyJSON is the output of 'cordon audit verify --json'.
type auditVerifyJSON struct {
	Tenant string `json:"tenant"`
	// Status is ok, broken (tampered with at seq), key_mismatch (the
	// keyring's key of key_id verifies none of its records), unverifiable
	// (key_id is not in the keyring) or unkeyed (--require-keyed).
	Status    string   `json:"status"`
	Records   int64    `json:"records"`
	Unkeyed   int64    `json:"unkeyed"`
	KeyIDs    []string `json:"key_ids"`
	Head      string   `json:"head,omitempty"`
	AnchorSeq *int64   `json:"anchor_seq,omitempty"`
	Seq       int64    `json:"seq,omitempty"`
	KeyID     string   `json:"key_id,omitempty"`
	Reason    string   `json:"reason,omitempty"`
}

// auditKeyFileWarning says why a keyring file is too open, or "": whoever
// reads it can forge the records its keys write. Readable by others is
// always too open; readable by its group too, unless that group is this
// process's own (a Kubernetes Secret volume is mode 0440 with the pod's
// fsGroup, which is the process's group and nobody else's).
func auditKeyFileWarning(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	mode := info.Mode().Perm()
	switch gid, known := fileGroup(info); {
	case mode&0o004 != 0:
		return fmt.Sprintf("the audit key file %s is readable by others (mode %04o): whoever reads it can forge audit records; chmod 0600 it (or 0400)", path, mode)
	case mode&0o040 != 0 && (!known || gid != os.Getegid()):
		return fmt.Sprintf("the audit key file %s is readable by its group (mode %04o): whoever reads it can forge audit records; chmod 0600 it (or 0400)", path, mode)
	}
	return ""
}

// loadAuditKeyring reads a keyring file (audit.ParseKeyring).
func loadAuditKeyring(path, active string) (*audit.Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit key file: %w", err)
	}
	k, err := audit.ParseKeyring(data, active)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func runAudit(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	action := c.Name
	fs := cmdline.NewFlagSet(c)
	dbURL := cmdline.DatabaseFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose log to verify; required")
	keyFile := cmdline.EnvString(fs, env, "audit-key-file", "CORDON_AUDIT_KEY_FILE", "", "audit keyring file, one 'KEY_ID BASE64_KEY' per line")
	var anchorFile *string
	requireKeyed, asJSON := new(bool), new(bool)
	if action == "verify" {
		anchorFile = fs.String("anchor", "", "a head printed by 'cordon audit head' that must still be in the chain")
		requireKeyed = fs.Bool("require-keyed", false, "fail on any unkeyed record")
		asJSON = fs.Bool("json", false, `print the outcome as one JSON object ("status": ok, broken, key_mismatch, unverifiable or unkeyed)`)
	}
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 0 {
		return fmt.Errorf("%w: %s needs --tenant NAME and no arguments", cmdline.ErrUsage, action)
	}
	var keys *audit.Keyring
	if *keyFile != "" {
		k, err := loadAuditKeyring(*keyFile, "")
		if err != nil {
			return err
		}
		keys = k
		if w := auditKeyFileWarning(*keyFile); w != "" {
			fmt.Fprintf(env.Stderr, "cordon audit %s: warning: %s\n", action, w)
		}
	}
	var anchors []audit.Head
	if anchorFile != nil && *anchorFile != "" {
		data, err := os.ReadFile(*anchorFile)
		if err != nil {
			return fmt.Errorf("anchor: %w", err)
		}
		var a audit.Head
		if err := json.Unmarshal(data, &a); err != nil || a.Seq < 0 || (a.Seq > 0 && len(a.Hash) != 64) {
			return fmt.Errorf("%w: %s is not a head printed by 'cordon audit head'", cmdline.ErrUsage, *anchorFile)
		}
		anchors = append(anchors, a)
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{AuditKeys: keys})
	if err != nil {
		return err
	}
	defer st.Close()
	sum, err := st.VerifyAudit(ctx, *tenant, anchors...)
	var br *audit.Break
	var uk *audit.UnknownKeyError
	var mm *audit.KeyMismatchError
	out := auditVerifyJSON{Tenant: *tenant, KeyIDs: []string{}}
	switch {
	case errors.As(err, &br):
		out.Status, out.Seq, out.Reason = "broken", br.Seq, br.Reason
		err = fmt.Errorf("the audit log of tenant %q has been tampered with at seq %d", *tenant, br.Seq)
		if !*asJSON {
			fmt.Fprintf(env.Stdout, "BROKEN: tenant %s: %s\n", *tenant, br.Error())
		}
	case errors.As(err, &mm):
		out.Status, out.Seq, out.KeyID, out.Reason = "key_mismatch", mm.Seq, mm.KeyID, mm.Error()
		err = fmt.Errorf("the audit log of tenant %q cannot be verified: the keyring's key %q is not the one its records were written with", *tenant, mm.KeyID)
		if !*asJSON {
			fmt.Fprintf(env.Stdout, "KEY MISMATCH: tenant %s: none of the %d records keyed with key id %q (from seq %d) verifies under the keyring's key %q, and every record's links are intact: check that %s holds the key the service writes with (a wrong key; if the key is right, every one of those records was rewritten)\n",
				*tenant, mm.Rows, mm.KeyID, mm.Seq, mm.KeyID, *keyFile)
		}
	case errors.As(err, &uk):
		out.Status, out.Seq, out.KeyID = "unverifiable", uk.Seq, uk.KeyID
		out.Reason = fmt.Sprintf("record seq %d is keyed with key id %q, which is not in the keyring", uk.Seq, uk.KeyID)
		if keys == nil {
			out.Reason += " (no keyring given: pass --audit-key-file or set CORDON_AUDIT_KEY_FILE)"
		}
		err = fmt.Errorf("the audit log of tenant %q cannot be verified from seq %d: unknown key id %q", *tenant, uk.Seq, uk.KeyID)
		if !*asJSON {
			fmt.Fprintf(env.Stdout, "UNVERIFIABLE: tenant %s: %s\n", *tenant, out.Reason)
		}
	case err != nil:
		return err
	}
	if out.Status != "" {
		if *asJSON {
			if werr := writeJSON(env.Stdout, out); werr != nil {
				return werr
			}
		}
		return err
	}
	if action == "head" {
		b, _ := json.Marshal(sum.Last)
		fmt.Fprintf(env.Stdout, "%s\n", b)
		return nil
	}
	if *asJSON {
		out.Status, out.Records, out.Unkeyed, out.Head = "ok", sum.Rows, sum.Unkeyed, sum.Head
		if sum.KeyIDs != nil {
			out.KeyIDs = sum.KeyIDs
		}
		if len(anchors) > 0 {
			out.AnchorSeq = &anchors[0].Seq
		}
		var err error
		if *requireKeyed && sum.Unkeyed > 0 {
			out.Status = "unkeyed"
			err = fmt.Errorf("the audit log of tenant %q has %d unkeyed records (--require-keyed)", *tenant, sum.Unkeyed)
		}
		if werr := writeJSON(env.Stdout, out); werr != nil {
			return werr
		}
		return err
	}
	keying := "keyed"
	switch {
	case sum.Rows == 0:
		keying = "empty"
	case sum.Unkeyed == sum.Rows:
		keying = "UNKEYED (plain SHA-256: anyone who can write the database could have rewritten it)"
	case sum.Unkeyed > 0:
		keying = fmt.Sprintf("records 1-%d unkeyed (written before a key was configured, sealed by the keyed record %d), the rest keyed", sum.Unkeyed, sum.Unkeyed+1)
	}
	if len(sum.KeyIDs) > 0 {
		keying += " with key ids " + strings.Join(sum.KeyIDs, ", ")
	}
	fmt.Fprintf(env.Stdout, "ok: tenant %s: %d records, chain intact, %s, head %s\n", *tenant, sum.Rows, keying, sum.Head)
	if len(anchors) > 0 {
		fmt.Fprintf(env.Stdout, "ok: the anchored head at seq %d is in the chain\n", anchors[0].Seq)
	}
	if *requireKeyed && sum.Unkeyed > 0 {
		return fmt.Errorf("the audit log of tenant %q has %d unkeyed records (--require-keyed)", *tenant, sum.Unkeyed)
	}
	return nil
}
