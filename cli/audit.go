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
		Summary: "verify tenants' keyed, hash-chained audit logs; export a head",
		Usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed] [--json]
       cordon audit verify --all [--audit-key-file FILE] [--require-keyed] [--json]
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

verify --all verifies every tenant's log in turn (name order): one line per
tenant, then a summary "N tenants: A ok, B failed"; it exits 1 when any
tenant's log fails, naming them. With --json it prints one object
{"status": "ok" or "failed", "ok", "failed", "tenants": [...]}, each tenant
as 'verify --json' prints it.

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
  cordon audit verify --all --json
` + databaseHelp,
		Subs: []*cmdline.Command{
			{Name: "verify", Summary: "verify a tenant's audit chain, or every tenant's (--all)", Run: runAudit, Usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed] [--json]
       cordon audit verify --all [--audit-key-file FILE] [--require-keyed] [--json]

Recomputes the tenant's audit chain and says where it breaks, or that the
keyring's key does not match the records (exit 1), or prints the number of
records, how many are unkeyed, and the head hash. --json prints
{"tenant", "status", "records", "unkeyed", "key_ids", "head", "anchor_seq",
"seq", "key_id", "reason"}. --all does so for every tenant, then prints a
summary, and exits 1 when any fails; with --json, one object {"status",
"ok", "failed", "tenants": [...]}. 'cordon audit --help' says more.

Examples:
  cordon audit verify --tenant wholesale --anchor wholesale-head.json
  cordon audit verify --all --json
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
	tenantHelp := "tenant whose log to verify; required"
	if action == "verify" {
		tenantHelp = "tenant whose log to verify; required unless --all"
	}
	tenant := fs.String("tenant", "", tenantHelp)
	keyFile := cmdline.EnvString(fs, env, "audit-key-file", "CORDON_AUDIT_KEY_FILE", "", "audit keyring file, one 'KEY_ID BASE64_KEY' per line")
	var anchorFile *string
	requireKeyed, asJSON, all := new(bool), new(bool), new(bool)
	if action == "verify" {
		all = fs.Bool("all", false, "verify every tenant's log, one after another (instead of --tenant)")
		anchorFile = fs.String("anchor", "", "a head printed by 'cordon audit head' that must still be in the chain")
		requireKeyed = fs.Bool("require-keyed", false, "fail on any unkeyed record")
		asJSON = fs.Bool("json", false, `print the outcome as one JSON object ("status": ok, broken, key_mismatch, unverifiable or unkeyed)`)
	}
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0, !*all && *tenant == "":
		if action == "verify" {
			return fmt.Errorf("%w: verify needs --tenant NAME or --all, and no arguments", cmdline.ErrUsage)
		}
		return fmt.Errorf("%w: %s needs --tenant NAME and no arguments", cmdline.ErrUsage, action)
	case *all && *tenant != "":
		return fmt.Errorf("%w: verify takes --tenant NAME or --all, not both", cmdline.ErrUsage)
	case *all && *anchorFile != "":
		return fmt.Errorf("%w: --anchor is one tenant's head: use it with --tenant, not --all", cmdline.ErrUsage)
	}
	check := auditCheck{keyFile: *keyFile, requireKeyed: *requireKeyed}
	if *keyFile != "" {
		k, err := loadAuditKeyring(*keyFile, "")
		if err != nil {
			return err
		}
		check.keys = k
		if w := auditKeyFileWarning(*keyFile); w != "" {
			fmt.Fprintf(env.Stderr, "cordon audit %s: warning: %s\n", action, w)
		}
	}
	if anchorFile != nil && *anchorFile != "" {
		data, err := os.ReadFile(*anchorFile)
		if err != nil {
			return fmt.Errorf("anchor: %w", err)
		}
		var a audit.Head
		if err := json.Unmarshal(data, &a); err != nil || a.Seq < 0 || (a.Seq > 0 && len(a.Hash) != 64) {
			return fmt.Errorf("%w: %s is not a head printed by 'cordon audit head'", cmdline.ErrUsage, *anchorFile)
		}
		check.anchors = append(check.anchors, a)
	}
	url, err := cmdline.NeedDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{AuditKeys: check.keys})
	if err != nil {
		return err
	}
	defer st.Close()
	if *all {
		return verifyAllAudit(ctx, env, st, check, *asJSON)
	}
	out, text, sum, err := check.verify(ctx, st, *tenant)
	if out.Status == "" {
		return err // the log could not be read
	}
	if action == "head" {
		if err != nil {
			fmt.Fprint(env.Stdout, text)
			return err
		}
		b, _ := json.Marshal(sum.Last)
		fmt.Fprintf(env.Stdout, "%s\n", b)
		return nil
	}
	if *asJSON {
		if werr := writeJSON(env.Stdout, out); werr != nil {
			return werr
		}
		return err
	}
	fmt.Fprint(env.Stdout, text)
	return err
}

// auditCheck is what verifying a tenant's audit log checks against.
type auditCheck struct {
	keys         *audit.Keyring
	keyFile      string       // where keys came from, for messages
	anchors      []audit.Head // heads that must still be in the chain
	requireKeyed bool         // an unkeyed record fails
}

// verify verifies tenant's audit log. It returns the outcome as
// 'verify --json' prints it and as text lines, the chain's summary, and an
// error when the log fails verification (out.Status is then not "ok") or
// cannot be read (out.Status is then "").
func (c auditCheck) verify(ctx context.Context, st *postgres.Store, tenant string) (out auditVerifyJSON, text string, sum audit.Summary, err error) {
	sum, err = st.VerifyAudit(ctx, tenant, c.anchors...)
	var br *audit.Break
	var uk *audit.UnknownKeyError
	var mm *audit.KeyMismatchError
	out = auditVerifyJSON{Tenant: tenant, KeyIDs: []string{}}
	switch {
	case errors.As(err, &br):
		out.Status, out.Seq, out.Reason = "broken", br.Seq, br.Reason
		text = fmt.Sprintf("BROKEN: tenant %s: %s\n", tenant, br.Error())
		return out, text, sum, fmt.Errorf("the audit log of tenant %q has been tampered with at seq %d", tenant, br.Seq)
	case errors.As(err, &mm):
		out.Status, out.Seq, out.KeyID, out.Reason = "key_mismatch", mm.Seq, mm.KeyID, mm.Error()
		text = fmt.Sprintf("KEY MISMATCH: tenant %s: none of the %d records keyed with key id %q (from seq %d) verifies under the keyring's key %q, and every record's links are intact: check that %s holds the key the service writes with (a wrong key; if the key is right, every one of those records was rewritten)\n",
			tenant, mm.Rows, mm.KeyID, mm.Seq, mm.KeyID, c.keyFile)
		return out, text, sum, fmt.Errorf("the audit log of tenant %q cannot be verified: the keyring's key %q is not the one its records were written with", tenant, mm.KeyID)
	case errors.As(err, &uk):
		out.Status, out.Seq, out.KeyID = "unverifiable", uk.Seq, uk.KeyID
		out.Reason = fmt.Sprintf("record seq %d is keyed with key id %q, which is not in the keyring", uk.Seq, uk.KeyID)
		if c.keys == nil {
			out.Reason += " (no keyring given: pass --audit-key-file or set CORDON_AUDIT_KEY_FILE)"
		}
		text = fmt.Sprintf("UNVERIFIABLE: tenant %s: %s\n", tenant, out.Reason)
		return out, text, sum, fmt.Errorf("the audit log of tenant %q cannot be verified from seq %d: unknown key id %q", tenant, uk.Seq, uk.KeyID)
	case err != nil:
		return auditVerifyJSON{}, "", sum, err
	}
	out.Status, out.Records, out.Unkeyed, out.Head = "ok", sum.Rows, sum.Unkeyed, sum.Head
	if sum.KeyIDs != nil {
		out.KeyIDs = sum.KeyIDs
	}
	if len(c.anchors) > 0 {
		out.AnchorSeq = &c.anchors[0].Seq
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
	text = fmt.Sprintf("ok: tenant %s: %d records, chain intact, %s, head %s\n", tenant, sum.Rows, keying, sum.Head)
	if len(c.anchors) > 0 {
		text += fmt.Sprintf("ok: the anchored head at seq %d is in the chain\n", c.anchors[0].Seq)
	}
	if c.requireKeyed && sum.Unkeyed > 0 {
		out.Status = "unkeyed"
		return out, text, sum, fmt.Errorf("the audit log of tenant %q has %d unkeyed records (--require-keyed)", tenant, sum.Unkeyed)
	}
	return out, text, sum, nil
}

// auditVerifyAllJSON is the output of 'cordon audit verify --all --json'.
type auditVerifyAllJSON struct {
	// Status is ok when every tenant's log verified, else failed.
	Status  string            `json:"status"`
	OK      int               `json:"ok"`
	Failed  int               `json:"failed"`
	Tenants []auditVerifyJSON `json:"tenants"`
}

// verifyAllAudit verifies every tenant's audit log, in name order, and
// fails when any of them fails.
func verifyAllAudit(ctx context.Context, env Env, st *postgres.Store, check auditCheck, asJSON bool) error {
	ts, err := st.Tenants(ctx)
	if err != nil {
		return err
	}
	all := auditVerifyAllJSON{Tenants: []auditVerifyJSON{}}
	var failed []string
	for _, t := range ts {
		out, text, _, err := check.verify(ctx, st, t.Name)
		if out.Status == "" {
			return fmt.Errorf("tenant %q: %w", t.Name, err)
		}
		all.Tenants = append(all.Tenants, out)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s)", t.Name, out.Status))
		}
		if !asJSON {
			fmt.Fprint(env.Stdout, text)
		}
	}
	all.Failed, all.OK = len(failed), len(ts)-len(failed)
	all.Status = "ok"
	if len(failed) > 0 {
		all.Status = "failed"
	}
	if asJSON {
		if err := writeJSON(env.Stdout, all); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "%d tenants: %d ok, %d failed\n", len(ts), all.OK, all.Failed)
	}
	if len(failed) > 0 {
		return fmt.Errorf("the audit logs of %d of %d tenants failed verification: %s", len(failed), len(ts), strings.Join(failed, ", "))
	}
	return nil
}
