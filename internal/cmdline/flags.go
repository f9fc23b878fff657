package cmdline

import (
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// EnvString registers a string flag whose default is the environment variable.
func EnvString(fs *flag.FlagSet, env Env, name, envName, def, usage string) *string {
	p := new(string)
	EnvStringVar(fs, env, p, name, envName, def, usage)
	return p
}

// EnvStringVar is [EnvString] into p.
func EnvStringVar(fs *flag.FlagSet, env Env, p *string, name, envName, def, usage string) {
	if v := env.Getenv(envName); v != "" {
		def = v
	}
	fs.StringVar(p, name, def, usage+" ($"+envName+")")
}

// EnvInt64 registers an int64 flag whose default is the environment
// variable; a value there that is no integer is a usage error.
func EnvInt64(fs *flag.FlagSet, env Env, name, envName string, def int64, usage string) (*int64, error) {
	p := new(int64)
	return p, EnvInt64Var(fs, env, p, name, envName, def, usage)
}

// EnvInt64Var is [EnvInt64] into p. The flag is registered even when the
// environment's value is refused, so that the error is the one reported.
func EnvInt64Var(fs *flag.FlagSet, env Env, p *int64, name, envName string, def int64, usage string) error {
	var err error
	if s := env.Getenv(envName); s != "" {
		if v, perr := strconv.ParseInt(s, 10, 64); perr != nil {
			err = fmt.Errorf("%w: $%s=%q is not an integer", ErrUsage, envName, s)
		} else {
			def = v
		}
	}
	fs.Int64Var(p, name, def, usage+" ($"+envName+")")
	return err
}

// EnvDuration registers a duration flag whose default is the environment
// variable; a value there that is no duration is a usage error.
func EnvDuration(fs *flag.FlagSet, env Env, name, envName string, def time.Duration, usage string) (*time.Duration, error) {
	p := new(time.Duration)
	return p, EnvDurationVar(fs, env, p, name, envName, def, usage)
}

// EnvDurationVar is [EnvDuration] into p, registered as [EnvInt64Var] is.
func EnvDurationVar(fs *flag.FlagSet, env Env, p *time.Duration, name, envName string, def time.Duration, usage string) error {
	var err error
	if s := env.Getenv(envName); s != "" {
		if v, perr := time.ParseDuration(s); perr != nil {
			err = fmt.Errorf("%w: $%s=%q is not a duration such as 30s", ErrUsage, envName, s)
		} else {
			def = v
		}
	}
	fs.DurationVar(p, name, def, usage+" ($"+envName+")")
	return err
}

// EnvBool reads a boolean environment variable: "1" or "true" is true.
func EnvBool(env Env, name string) bool {
	v := env.Getenv(name)
	return v == "1" || v == "true"
}

// RedactURL hides a URL's password.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		if s == "" {
			return ""
		}
		return "[unparsable, redacted]"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "REDACTED")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// DatabaseFlag registers --database-url on fs.
func DatabaseFlag(fs *flag.FlagSet) *string {
	p := new(string)
	DatabaseFlagVar(fs, p)
	return p
}

// DatabaseFlagVar is [DatabaseFlag] into p.
func DatabaseFlagVar(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "database-url", "", "PostgreSQL URL (default $CORDON_DATABASE_URL, else the libpq PG* environment variables)")
}

// pgEnvVars are the libpq environment variables pgx reads
// (pgconn.ParseConfig); any of them set makes the environment the database
// when no URL is given.
var pgEnvVars = []string{"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE",
	"PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGTARGETSESSIONATTRS"}

// LibpqEnvURL is a URL that names nothing: pgx takes every setting from
// the PG* environment variables and libpq's defaults.
const LibpqEnvURL = "postgres://"

// DatabaseURL resolves the database: the flag, else $CORDON_DATABASE_URL,
// else the PG* environment when any of its variables is set (LibpqEnvURL),
// else "" (the store then says that no database was given).
func DatabaseURL(env Env, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if u := env.Getenv("CORDON_DATABASE_URL"); u != "" {
		return u
	}
	for _, v := range pgEnvVars {
		if env.Getenv(v) != "" {
			return LibpqEnvURL
		}
	}
	return ""
}

// NeedDatabaseURL is DatabaseURL for a command that cannot run without
// one: none is a usage error that says how to give one.
func NeedDatabaseURL(env Env, flagValue string) (string, error) {
	if u := DatabaseURL(env, flagValue); u != "" {
		return u, nil
	}
	return "", fmt.Errorf("%w: no database: pass --database-url, set CORDON_DATABASE_URL, or set the libpq variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE)", ErrUsage)
}
