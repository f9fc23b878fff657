#!/bin/bash
# Entrypoint of Cordon's test database image (deploy/pgvector/Dockerfile):
# the part of the official postgres image's entrypoint that tests use.
#
#   POSTGRES_USER      superuser made by initdb (default postgres)
#   POSTGRES_PASSWORD  its password (required unless POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_DB        database created at first start (default POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  pg_hba method for TCP clients (default scram-sha-256)
#   PGPORT             the server's port (default 5432); with --network host,
#                      pick a free one
#   /docker-entrypoint-initdb.d/*.sql, *.sh  run once, after the database exists
#
# On first start a temporary server (Unix socket only) creates the database,
# then the real one starts: "database system is ready to accept connections"
# is logged twice, as by the official image, so the same wait works.
set -euo pipefail

if [[ ${1:-} == -* ]]; then set -- postgres "$@"; fi
if [[ ${1:-} != postgres ]]; then exec "$@"; fi

if [[ $(id -u) -eq 0 ]]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
shift

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}

if [[ ! -s $PGDATA/PG_VERSION ]]; then
  if [[ -z ${POSTGRES_PASSWORD:-} && $auth != trust ]]; then
    echo "entrypoint: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of flags.
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
    --encoding=UTF8 --locale=C --no-sync ${POSTGRES_INITDB_ARGS:-}
  rm -f "$pwfile"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"

  # The server's own arguments, quoted for pg_ctl; none when the command is
  # a bare "postgres" (printf with no arguments would still print '').
  args=""
  if [[ $# -gt 0 ]]; then args=$(printf '%q ' "$@"); fi
  pg_ctl -D "$PGDATA" -w -o "$args -c listen_addresses=''" start
  psql=(psql -X -q -v ON_ERROR_STOP=1 --username "$user" --no-password)
  if [[ $db != postgres ]]; then
    "${psql[@]}" --dbname postgres --set db="$db" <<<'CREATE DATABASE :"db";'
  fi
  shopt -s nullglob
  for f in /docker-entrypoint-initdb.d/*; do
    case $f in
      *.sql) echo "entrypoint: running $f"; "${psql[@]}" --dbname "$db" -f "$f" ;;
      *.sh) echo "entrypoint: running $f"; . "$f" ;;
      *) echo "entrypoint: ignoring $f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  echo "PostgreSQL init process complete; ready for start up."
fi

exec postgres "$@"
