package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cordon-rag/cordon/internal/cmdline"
	"github.com/cordon-rag/cordon/server"
)

func tokenCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:    "token",
		Summary: "mint a development bearer token (HS256)",
		Usage: `Usage: cordon token --sub NAME [--tenant T] [--clearance LEVEL] [--barrier L]... [--role R]... [--ttl 1h]

Signs a JWT with $CORDON_JWT_HS256_SECRET (at least 32 bytes), the secret a
development 'cordon serve' verifies with. Production tokens come from your
identity provider (see --jwks-file, --jwks-url, --oidc-issuer of serve).
Roles: reader, writer, auditor, admin (repeat --role, or comma-separate).

--clearance defaults to public, while 'cordon ingest' stores files as
internal unless --classification says otherwise: a reader token without
--clearance sees only public documents. It is still minted (a narrower
token is never widened on the caller's behalf), with a warning on stderr
naming --clearance; pass --clearance public to mean it.

Example:
  export CORDON_JWT_HS256_SECRET=$(head -c 32 /dev/urandom | base64)
  TOKEN=$(cordon token --sub alice --tenant wholesale --clearance confidential --role reader,writer)
  curl -H "Authorization: Bearer $TOKEN" ...
`,
		Run: runToken,
	}
}

func runToken(ctx context.Context, env Env, c *cmdline.Command, args []string) error {
	fs := cmdline.NewFlagSet(c)
	sub := fs.String("sub", "", "subject (who the token is for); required")
	tenant := fs.String("tenant", "", "tenant claim")
	clearance := fs.String("clearance", "public", "clearance: public, internal, confidential or restricted")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	var barriers, roles cmdline.ListFlag
	fs.Var(&barriers, "barrier", "barrier label held (repeatable)")
	fs.Var(&roles, "role", "role: reader, writer, auditor, admin (repeatable)")
	if err := cmdline.ParseFlags(fs, c, env, args); err != nil {
		return err
	}
	if *sub == "" {
		return fmt.Errorf("%w: --sub is required", cmdline.ErrUsage)
	}
	clearanceGiven := false
	fs.Visit(func(f *flag.Flag) { clearanceGiven = clearanceGiven || f.Name == "clearance" })
	if *ttl <= 0 {
		return fmt.Errorf("%w: --ttl must be positive", cmdline.ErrUsage)
	}
	secret := env.Getenv("CORDON_JWT_HS256_SECRET")
	if secret == "" {
		return fmt.Errorf("%w: set CORDON_JWT_HS256_SECRET (at least %d bytes)", cmdline.ErrUsage, server.MinHS256SecretLen)
	}
	for _, r := range roles {
		// The server ignores roles it does not know; here one is a typo.
		if !server.IsRole(r) {
			return fmt.Errorf("%w: unknown role %q (want reader, writer, auditor or admin)", cmdline.ErrUsage, r)
		}
	}
	now := time.Now()
	claims := server.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: *sub, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(*ttl))},
		Tenant:           *tenant, Clearance: *clearance, Barriers: barriers, Roles: roles,
	}
	// Check the claims as the server will, so a typo fails here, not at
	// the first request.
	if _, err := server.IdentityFromClaims(claims); err != nil {
		return fmt.Errorf("%w: %w", cmdline.ErrUsage, err)
	}
	tok, err := server.MintHS256(secret, claims)
	if err != nil {
		return err
	}
	if !clearanceGiven && slices.Contains(roles, server.RoleReader) {
		fmt.Fprintln(env.Stderr, "cordon token: warning: no --clearance, so this reader token has clearance public and sees only public documents, "+
			"while 'cordon ingest' stores files as internal by default: pass --clearance internal (or confidential, restricted), "+
			"or --clearance public to mean it")
	}
	fmt.Fprintln(env.Stdout, tok)
	return nil
}
