#!/usr/bin/env bash
# Throwaway Citus cluster for Cordon's tests: a coordinator and two workers,
# PostgreSQL 15 + Citus + pgvector, on loopback.
#
#   scripts/citus-cluster.sh start [DIR]   fresh cluster in DIR, prints the coordinator URL
#   scripts/citus-cluster.sh stop  [DIR]   stop it and delete DIR (no error if not running)
#   scripts/citus-cluster.sh url   [DIR]   print the coordinator URL of the running cluster
#
# DIR defaults to $CORDON_CITUS_DIR or <repo>/.tmp/citus. Only the URL goes to
# stdout, so `url=$(scripts/citus-cluster.sh start)` works. Ports: the first
# three free ones from $CORDON_CITUS_PORT (default 54340). Citus itself is
# built and installed once per machine by scripts/citus-install.sh.
#
# Every node gets database $CORDON_DB_NAME (default cordon_test) with the
# citus and vector extensions; the coordinator is registered with its host
# and the two workers are added, so the coordinator URL is all a client needs
# (the workers' addresses are in its pg_dist_node). Durability is off: the
# data is disposable.
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin
DB_NAME=${CORDON_DB_NAME:-cordon_test}
FIRST_PORT=${CORDON_CITUS_PORT:-54340}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODES=(coord worker1 worker2)

log() { echo "citus-cluster: $*" >&2; }
die() { echo "citus-cluster: ERROR: $*" >&2; exit 1; }

usage() {
  cat <<EOF
Usage: scripts/citus-cluster.sh start|stop|url [DIR]

  start [DIR]  Install PG15 + pgvector + Citus if needed, (re)create a cluster
               of a coordinator and two workers in DIR on free 127.0.0.1 ports
               (from $FIRST_PORT), create database '$DB_NAME' with citus and
               vector on every node, add the workers, print the coordinator URL.
  stop [DIR]   Stop the three servers and remove DIR.
  url [DIR]    Print the coordinator URL of the cluster running in DIR.

DIR defaults to \$CORDON_CITUS_DIR, else $REPO/.tmp/citus.
Env: CORDON_DB_NAME (default cordon_test), CORDON_CITUS_PORT (first port, 54340),
CORDON_CITUS_SRC (the Citus source tarball, see scripts/citus-install.sh).
EOF
}

resolve_dir() {
  local d=${1:-${CORDON_CITUS_DIR:-$REPO/.tmp/citus}}
  DIR=$(realpath -m -- "$d")
  case $DIR in /|"$REPO"|/root|/home|/tmp) die "refusing to use '$DIR' as a throwaway cluster dir" ;; esac
}

# As root, initdb and postgres run as an unprivileged system user (as in
# scripts/db.sh).
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

as_owner() { (cd / && "${RUN[@]}" "$@"); }

# The data lives in DIR when the cluster owner can reach it and socket paths
# stay short, else in a private dir under /tmp (DIR/rundir names it).
pick_rundir() {
  mkdir -p "$DIR"
  if [[ ${#DIR} -lt 70 ]] && { [[ ${#RUN[@]} -eq 0 ]] || as_owner test -x "$(dirname "$DIR")"; }; then
    RUNDIR=$DIR
  else
    RUNDIR=$(mktemp -d /tmp/cordon-citus.XXXXXX)
    log "cluster owner cannot use $DIR directly; data lives in $RUNDIR"
  fi
  echo "$RUNDIR" >"$DIR/rundir"
}

load_rundir() {
  RUNDIR=""
  if [[ -f $DIR/rundir ]]; then RUNDIR=$(<"$DIR/rundir"); fi
}

node_running() { # NODE
  [[ -n $RUNDIR && -f $RUNDIR/$1/data/postmaster.pid ]] &&
    as_owner "$PG_BIN/pg_ctl" status -D "$RUNDIR/$1/data" >/dev/null 2>&1
}

stop_cluster() {
  load_rundir
  local n
  for n in "${NODES[@]}"; do
    if node_running "$n"; then
      log "stopping $n"
      as_owner "$PG_BIN/pg_ctl" stop -D "$RUNDIR/$n/data" -m fast -w -t 60 >&2 ||
        as_owner "$PG_BIN/pg_ctl" stop -D "$RUNDIR/$n/data" -m immediate -w >&2 ||
        die "could not stop $n in $RUNDIR/$n/data"
    fi
  done
  if [[ -n $RUNDIR && $RUNDIR != "$DIR" ]]; then rm -rf -- "$RUNDIR"; fi
  rm -rf -- "$DIR"
}

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
  "$PG_BIN/psql" -X -q -o /dev/null -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3" >&2
}

on_start_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then log "start failed; cleaning up"; stop_cluster || true; fi
}

# launch NODE FIRST_PORT: start NODE's server on the first free port from
# FIRST_PORT, print the port.
launch() {
  local node=$1 port=$2 attempt data=$RUNDIR/$1/data logf=$RUNDIR/$1/postgres.log
  for attempt in 1 2 3 4 5; do
    port=$(next_free_port "$port")
    [[ ! -f $logf ]] || : >"$logf"
    if as_owner "$PG_BIN/pg_ctl" start -D "$data" -l "$logf" -o "-p $port" -w -t 60 >/dev/null 2>&1; then
      log "$node on 127.0.0.1:$port"
      echo "$port"
      return 0
    fi
    if grep -qE 'could not (bind|create listen socket)|Address already in use' "$logf" 2>/dev/null; then
      log "port $port taken, retrying"
      port=$((port + 1))
      continue
    fi
    tail -n 30 "$logf" >&2 2>/dev/null || true
    die "$node failed to start (log: $logf)"
  done
  die "$node failed to start after $attempt attempts (log: $logf)"
}

init_node() { # NODE
  local node=$1 data=$RUNDIR/$1/data
  mkdir -p "$RUNDIR/$node/sock"
  [[ ${#RUN[@]} -eq 0 ]] || chown -R "$PGUSER_OS": "$RUNDIR/$node"
  as_owner "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C --no-sync --no-instructions >"$RUNDIR/$node/initdb.log" 2>&1 ||
    { cat "$RUNDIR/$node/initdb.log" >&2; die "initdb of $node failed"; }
  # wal_level = logical: citus_move_shard_placement copies a moving shard
  # with logical replication. max_prepared_transactions: writes that touch
  # more than one node (reference tables) commit with two-phase commit.
  cat >>"$data/postgresql.conf" <<EOF

# --- scripts/citus-cluster.sh (throwaway test cluster, node $node) ---
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUNDIR/$node/sock'
max_connections = 200
max_prepared_transactions = 200
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
citus.enable_statistics_collection = off
EOF
}

cmd_start() {
  [[ $DB_NAME =~ ^[a-z_][a-z0-9_]*$ ]] || die "invalid database name '$DB_NAME'"
  bash "$REPO/scripts/citus-install.sh" || die "scripts/citus-install.sh failed"
  setup_runner
  if [[ -e $DIR ]]; then
    log "removing previous cluster dir $DIR"
    stop_cluster
  fi
  trap on_start_exit EXIT
  pick_rundir
  [[ ${#RUN[@]} -eq 0 ]] || chown "$PGUSER_OS": "$RUNDIR"
  chmod 755 "$RUNDIR"

  local n port=$FIRST_PORT
  declare -A ports
  for n in "${NODES[@]}"; do
    init_node "$n"
    ports[$n]=$(launch "$n" "$port")
    port=$((ports[$n] + 1))
    echo "${ports[$n]}" >"$DIR/$n.port"
  done
  for n in "${NODES[@]}"; do
    psql_at "${ports[$n]}" postgres "CREATE DATABASE $DB_NAME" || die "CREATE DATABASE on $n failed"
    psql_at "${ports[$n]}" "$DB_NAME" "CREATE EXTENSION citus; CREATE EXTENSION vector" ||
      die "CREATE EXTENSION citus, vector on $n failed"
  done
  local c=${ports[coord]}
  psql_at "$c" "$DB_NAME" "SELECT citus_set_coordinator_host('127.0.0.1', $c)" ||
    die "citus_set_coordinator_host failed"
  for n in worker1 worker2; do
    psql_at "$c" "$DB_NAME" "SELECT citus_add_node('127.0.0.1', ${ports[$n]})" ||
      die "citus_add_node($n) failed"
  done

  local url="postgres://postgres@127.0.0.1:$c/$DB_NAME?sslmode=disable"
  echo "$url" >"$DIR/url"
  trap - EXIT
  log "ready: coordinator $url, workers 127.0.0.1:${ports[worker1]} and 127.0.0.1:${ports[worker2]}"
  echo "$url"
}

cmd_stop() {
  setup_runner
  if [[ -e $DIR ]]; then stop_cluster; log "stopped; removed $DIR"; else log "nothing at $DIR"; fi
}

cmd_url() {
  setup_runner
  load_rundir
  node_running coord && [[ -f $DIR/url ]] || die "no running cluster in $DIR (run: scripts/citus-cluster.sh start)"
  cat "$DIR/url"
}

case ${1:-} in
  start) resolve_dir "${2:-}"; cmd_start ;;
  stop)  resolve_dir "${2:-}"; cmd_stop ;;
  url)   resolve_dir "${2:-}"; cmd_url ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
