#!/usr/bin/env bash
# Throwaway local PostgreSQL 15 + pgvector cluster for Cordon's tests.
#
#   scripts/db.sh start [DIR]   fresh cluster in DIR, prints its URL on stdout
#   scripts/db.sh stop  [DIR]   stop it and delete DIR (no error if not running)
#   scripts/db.sh url   [DIR]   print the URL of the running cluster
#   scripts/db.sh standby PRIMARY_URL DIR
#                               hot standby of the cluster at PRIMARY_URL in DIR,
#                               prints its URL (same database name)
#   scripts/db.sh halt DIR      stop DIR's server at once (as a crash), keep DIR
#   scripts/db.sh resume DIR    start DIR's server again on its port
#
# DIR defaults to $CORDON_DB_DIR or <repo>/.tmp/pg. Only the URL goes to
# stdout; everything else goes to stderr, so `url=$(scripts/db.sh start)` works.
# Durability is switched off (fsync etc.): the data is disposable.
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin
DB_NAME=${CORDON_DB_NAME:-cordon_test}
FIRST_PORT=${CORDON_DB_PORT:-54329}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { echo "db.sh: $*" >&2; }
die() { echo "db.sh: ERROR: $*" >&2; exit 1; }

usage() {
  cat <<EOF
Usage: scripts/db.sh start|stop|url [DIR] | standby PRIMARY_URL DIR | halt DIR | resume DIR

  start [DIR]  Install PG15+pgvector if needed, (re)create a throwaway cluster in
               DIR on a free 127.0.0.1 port, create database '$DB_NAME' with the
               vector extension, write the URL to DIR/url and print it.
               A cluster already running in DIR is stopped and wiped first.
  stop [DIR]   Stop the cluster (fast shutdown) and remove DIR.
  url [DIR]    Print the URL of the cluster running in DIR.
  standby PRIMARY_URL DIR
               Hot standby (streaming replication, pg_basebackup -R) of the
               cluster at PRIMARY_URL, which must accept replication
               connections from 127.0.0.1 as postgres (clusters made by
               'start' do), in DIR on a free port; prints its URL, with the
               database of PRIMARY_URL. 'stop DIR' removes it.
  halt DIR     Stop DIR's server immediately (as a crash would), keeping DIR.
  resume DIR   Start DIR's server again on the port it had.

DIR defaults to \$CORDON_DB_DIR, else $REPO/.tmp/pg.
Env: CORDON_DB_NAME (default cordon_test), CORDON_DB_PORT (first port to try, 54329).
EOF
}

# Layout: DIR/url, DIR/rundir -> RUNDIR, RUNDIR/{data,sock,postgres.log}.
# RUNDIR is normally DIR itself; see pick_rundir for when it is not.
resolve_dir() {
  local d=${1:-${CORDON_DB_DIR:-$REPO/.tmp/pg}}
  DIR=$(realpath -m -- "$d")
  case $DIR in /|"$REPO"|/root|/home|/tmp) die "refusing to use '$DIR' as a throwaway cluster dir" ;; esac
}

# initdb/postgres refuse to run as root, so as root we run them as an
# unprivileged system user; as a normal user we run them directly.
setup_runner() {
  RUN=()
  PGUSER_OS=$(id -un)
  if [[ $(id -u) -eq 0 ]]; then
    if id postgres >/dev/null 2>&1; then
      PGUSER_OS=postgres
    else
      PGUSER_OS=cordonpg
      id "$PGUSER_OS" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PGUSER_OS" ||
        die "could not create system user $PGUSER_OS"
    fi
    RUN=(runuser -u "$PGUSER_OS" --)
  fi
}

# Run a PG binary as the cluster owner. cd / first: PG tools call getcwd() and
# fail if the owner cannot read the caller's working directory.
as_owner() { (cd / && "${RUN[@]}" "$@"); }

# The cluster owner must be able to reach DIR (a repo under /root is not
# reachable by 'postgres'), and unix socket paths are limited to ~107 bytes.
# If either fails, keep the data in a private dir under /tmp instead; DIR then
# only holds `url` and a `rundir` pointer.
pick_rundir() {
  local sock_path="$DIR/sock/.s.PGSQL.$FIRST_PORT"
  mkdir -p "$DIR"
  if [[ ${#sock_path} -lt 100 ]] && { [[ ${#RUN[@]} -eq 0 ]] || as_owner test -x "$(dirname "$DIR")"; }; then
    RUNDIR=$DIR
  else
    RUNDIR=$(mktemp -d /tmp/cordon-pg.XXXXXX)
    log "cluster owner cannot use $DIR directly; data lives in $RUNDIR"
  fi
  echo "$RUNDIR" >"$DIR/rundir"
}

load_rundir() {
  RUNDIR=""
  if [[ -f $DIR/rundir ]]; then RUNDIR=$(<"$DIR/rundir"); fi
  if [[ -z $RUNDIR && -d $DIR/data ]]; then RUNDIR=$DIR; fi
}

is_running() {
  [[ -n $RUNDIR && -f $RUNDIR/data/postmaster.pid ]] &&
    as_owner "$PG_BIN/pg_ctl" status -D "$RUNDIR/data" >/dev/null 2>&1
}

stop_cluster() {
  load_rundir
  if is_running; then
    log "stopping cluster in $RUNDIR/data"
    as_owner "$PG_BIN/pg_ctl" stop -D "$RUNDIR/data" -m fast -w -t 60 >&2 ||
      as_owner "$PG_BIN/pg_ctl" stop -D "$RUNDIR/data" -m immediate -w >&2 ||
      die "could not stop the cluster in $RUNDIR/data"
  fi
  if [[ -n $RUNDIR && $RUNDIR != "$DIR" ]]; then rm -rf -- "$RUNDIR"; fi
  rm -rf -- "$DIR"
}

# A port is free if nothing accepts a connection on it. This is only a hint
# (another process may grab it); start_cluster retries on bind failure.
port_free() { ! timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
next_free_port() {
  local p=$1
  while ! port_free "$p"; do
    p=$((p + 1))
    [[ $p -lt $((FIRST_PORT + 200)) ]] || die "no free port in $FIRST_PORT..$p"
  done
  echo "$p"
}

psql_at() { # PORT DB SQL
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3" >&2
}

on_start_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then log "start failed; cleaning up"; stop_cluster || true; fi
}

# launch DATA LOGFILE FIRST_PORT: start the server of DATA on the first free
# port from FIRST_PORT, print the port.
launch() {
  local data=$1 logf=$2 port=$3 attempt
  for attempt in 1 2 3 4 5; do
    port=$(next_free_port "$port")
    log "starting postgres on 127.0.0.1:$port"
    [[ ! -f $logf ]] || : >"$logf"   # keep owner; pg_ctl creates it otherwise
    if as_owner "$PG_BIN/pg_ctl" start -D "$data" -l "$logf" -o "-p $port" -w -t 60 >/dev/null 2>&1; then
      break
    fi
    # Lost a race for the port: try the next one. Anything else is fatal.
    if grep -qE 'could not (bind|create listen socket)|Address already in use' "$logf" 2>/dev/null; then
      log "port $port taken, retrying"
      port=$((port + 1))
      continue
    fi
    tail -n 30 "$logf" >&2 2>/dev/null || true
    die "postgres failed to start (log: $logf)"
  done
  is_running || die "postgres failed to start after $attempt attempts (log: $logf)"
  echo "$port"
}

# fresh_rundir wipes DIR (stopping a cluster there), arms the cleanup trap
# and prepares RUNDIR and its socket folder, owned by the cluster's user.
fresh_rundir() {
  setup_runner
  if [[ -e $DIR ]]; then
    log "removing previous cluster dir $DIR"
    stop_cluster
  fi
  # If anything after this fails, don't leave a half-started postgres behind.
  trap on_start_exit EXIT
  pick_rundir
  mkdir -p "$RUNDIR/sock"
  [[ ${#RUN[@]} -eq 0 ]] || chown -R "$PGUSER_OS": "$RUNDIR"
  chmod 700 "$RUNDIR"
}

cmd_start() {
  [[ $DB_NAME =~ ^[a-z_][a-z0-9_]*$ ]] || die "invalid database name '$DB_NAME'"
  bash "$REPO/scripts/pg-install.sh" || die "scripts/pg-install.sh failed"
  fresh_rundir
  local data=$RUNDIR/data sock=$RUNDIR/sock logf=$RUNDIR/postgres.log

  log "initdb $data (owner $PGUSER_OS)"
  as_owner "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C --no-sync --no-instructions >"$RUNDIR/initdb.log" 2>&1 ||
    { cat "$RUNDIR/initdb.log" >&2; die "initdb failed"; }

  # Throwaway cluster: trade durability for speed. Only loopback TCP, and the
  # socket inside RUNDIR so we never collide with /var/run/postgresql.
  cat >>"$data/postgresql.conf" <<EOF

# --- scripts/db.sh (throwaway test cluster) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF

  local port
  port=$(launch "$data" "$logf" "$FIRST_PORT")

  psql_at "$port" postgres "CREATE DATABASE $DB_NAME" || die "CREATE DATABASE $DB_NAME failed"
  psql_at "$port" "$DB_NAME" "CREATE EXTENSION IF NOT EXISTS vector" ||
    die "CREATE EXTENSION vector failed (is pgvector installed for PG15?)"

  local url="postgres://postgres@127.0.0.1:$port/$DB_NAME?sslmode=disable"
  echo "$url" >"$DIR/url"
  trap - EXIT
  log "ready: $url"
  echo "$url"
}

cmd_stop() {
  setup_runner
  if [[ -e $DIR ]]; then stop_cluster; log "stopped; removed $DIR"; else log "nothing at $DIR"; fi
}

cmd_url() {
  setup_runner
  load_rundir
  if ! is_running || [[ ! -f $DIR/url ]]; then
    die "no running cluster in $DIR (run: scripts/db.sh start)"
  fi
  cat "$DIR/url"
}

cmd_standby() {
  local primary=$1
  [[ $primary =~ ^postgres(ql)?://([^@/]*@)?(127\.0\.0\.1|localhost):([0-9]+)/([a-z_][a-z0-9_]*)(\?.*)?$ ]] ||
    die "standby: want a primary URL like postgres://postgres@127.0.0.1:PORT/DB, got '$primary'"
  local pport=${BASH_REMATCH[4]} db=${BASH_REMATCH[5]}
  fresh_rundir
  local data=$RUNDIR/data sock=$RUNDIR/sock logf=$RUNDIR/postgres.log
  log "pg_basebackup from 127.0.0.1:$pport into $data"
  as_owner "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres -D "$data" -R -X stream \
    --no-sync --checkpoint=fast >"$RUNDIR/basebackup.log" 2>&1 ||
    { cat "$RUNDIR/basebackup.log" >&2; die "pg_basebackup failed (does the primary allow replication connections from 127.0.0.1?)"; }
  cat >>"$data/postgresql.conf" <<EOF

# --- scripts/db.sh standby ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
hot_standby = on
EOF
  local port
  port=$(launch "$data" "$logf" "$((pport + 1))")
  echo "$port" >"$DIR/port"
  local url="postgres://postgres@127.0.0.1:$port/$db?sslmode=disable"
  echo "$url" >"$DIR/url"
  trap - EXIT
  log "standby ready: $url"
  echo "$url"
}

cmd_halt() {
  setup_runner
  load_rundir
  is_running || die "no running server in $DIR"
  as_owner "$PG_BIN/pg_ctl" stop -D "$RUNDIR/data" -m immediate -w >&2
}

cmd_resume() {
  setup_runner
  load_rundir
  [[ -n $RUNDIR && -f $DIR/port ]] || die "no halted server in $DIR"
  ! is_running || die "the server in $DIR is running"
  local port
  port=$(<"$DIR/port")
  as_owner "$PG_BIN/pg_ctl" start -D "$RUNDIR/data" -l "$RUNDIR/postgres.log" -o "-p $port" -w -t 60 >/dev/null 2>&1 ||
    { tail -n 30 "$RUNDIR/postgres.log" >&2; die "postgres failed to start again (log: $RUNDIR/postgres.log)"; }
}

case ${1:-} in
  start) resolve_dir "${2:-}"; cmd_start ;;
  stop)  resolve_dir "${2:-}"; cmd_stop ;;
  url)   resolve_dir "${2:-}"; cmd_url ;;
  standby)
    [[ $# -eq 3 ]] || { usage >&2; exit 2; }
    resolve_dir "$3"; cmd_standby "$2" ;;
  halt)   [[ $# -eq 2 ]] || { usage >&2; exit 2; }; resolve_dir "$2"; cmd_halt ;;
  resume) [[ $# -eq 2 ]] || { usage >&2; exit 2; }; resolve_dir "$2"; cmd_resume ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
