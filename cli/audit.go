package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cordon-rag/cordon/store/postgres"
)

func auditCommand() *command {
	return &command{
		name:    "audit",
		summary: "verify a tenant's keyed, hash-chained audit log; export its head",
		usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed]
       cordon audit head --tenant NAME [--audit-key-file FILE]

verify recomputes the chain of the tenant's audit log (one record per
retrieve, ground and assemble served over HTTP): each record's HMAC-SHA256
with the key its key id names (from the keyring file, the same file
'cordon serve' writes with; every key ever used must stay in it), or plain
SHA-256 for an unkeyed record. It says where the chain breaks: a modified,
inserted or deleted record, or one rewritten without the key, is reported
with its sequence number; a record whose key id is not in the keyring is
reported as unverifiable. Either way the command exits 1. On success it
prints the number of records, how many are unkeyed, and the head hash.

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
		subs: []*command{
			{name: "verify", summary: "verify the tenant's audit chain", run: runAudit, usage: `Usage: cordon audit verify --tenant NAME [--audit-key-file FILE] [--anchor FILE] [--require-keyed]

Recomputes the tenant's audit chain and says where it breaks (exit 1), or
prints the number of records, how many are unkeyed, and the head hash.
'cordon audit --help' says more.

Example:
  cordon audit verify --tenant wholesale --anchor wholesale-head.json
`},
			{name: "head", summary: "verify the chain and print its newest record", run: runAudit, usage: `Usage: cordon audit head --tenant NAME [--audit-key-file FILE]

Verifies the tenant's audit chain and prints its newest record as JSON, to
keep where the database's owner cannot rewrite it and pass back to
'verify --anchor FILE'. 'cordon audit --help' says more.

Example:
  cordon audit head --tenant wholesale > wholesale-head.json
`},
		},
	}
}

// loadAuditKeyring reads a keyring file (postgres.ParseAuditKeyring).
func loadAuditKeyring(path, active string) (*postgres.AuditKeyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit key file: %w", err)
	}
	k, err := postgres.ParseAuditKeyring(data, active)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func runAudit(ctx context.Context, env Env, c *command, args []string) error {
	action := c.name
	fs := newFlagSet(c, env)
	dbURL := databaseFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose log to verify; required")
	keyFile := envString(fs, env, "audit-key-file", "CORDON_AUDIT_KEY_FILE", "", "audit keyring file, one 'KEY_ID BASE64_KEY' per line")
	var anchorFile *string
	var requireKeyed *bool
	if action == "verify" {
		anchorFile = fs.String("anchor", "", "a head printed by 'cordon audit head' that must still be in the chain")
		requireKeyed = fs.Bool("require-keyed", false, "fail on any unkeyed record")
	}
	if err := parseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *tenant == "" || fs.NArg() != 0 {
		return fmt.Errorf("%w: %s needs --tenant NAME and no arguments", errUsage, action)
	}
	var keys *postgres.AuditKeyring
	if *keyFile != "" {
		k, err := loadAuditKeyring(*keyFile, "")
		if err != nil {
			return err
		}
		keys = k
	}
	var anchors []postgres.AuditHead
	if anchorFile != nil && *anchorFile != "" {
		data, err := os.ReadFile(*anchorFile)
		if err != nil {
			return fmt.Errorf("anchor: %w", err)
		}
		var a postgres.AuditHead
		if err := json.Unmarshal(data, &a); err != nil || a.Seq < 0 || (a.Seq > 0 && len(a.Hash) != 64) {
			return fmt.Errorf("%w: %s is not a head printed by 'cordon audit head'", errUsage, *anchorFile)
		}
		anchors = append(anchors, a)
	}
	url, err := needDatabaseURL(env, *dbURL)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url, postgres.Options{AuditKeys: keys})
	if err != nil {
		return err
	}
	defer st.Close()
	sum, err := st.VerifyAudit(ctx, *tenant, anchors...)
	var br *postgres.AuditBreak
	var uk *postgres.AuditUnknownKeyError
	switch {
	case errors.As(err, &br):
		fmt.Fprintf(env.Stdout, "BROKEN: tenant %s: %s\n", *tenant, br.Error())
		return fmt.Errorf("the audit log of tenant %q has been tampered with at seq %d", *tenant, br.Seq)
	case errors.As(err, &uk):
		fmt.Fprintf(env.Stdout, "UNVERIFIABLE: tenant %s: record seq %d is keyed with key id %q, which is not in the keyring", *tenant, uk.Seq, uk.KeyID)
		if keys == nil {
			fmt.Fprint(env.Stdout, " (no keyring given: pass --audit-key-file or set CORDON_AUDIT_KEY_FILE)")
		}
		fmt.Fprintln(env.Stdout)
		return fmt.Errorf("the audit log of tenant %q cannot be verified from seq %d: unknown key id %q", *tenant, uk.Seq, uk.KeyID)
	case err != nil:
		return err
	}
	if action == "head" {
		b, _ := json.Marshal(sum.Last)
		fmt.Fprintf(env.Stdout, "%s\n", b)
		return nil
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
