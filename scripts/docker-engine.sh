#!/usr/bin/env bash
# A private Docker engine for Cordon's container tests, on a machine that has
# no engine and reaches no image registry (Debian's docker.io package only).
#
#   scripts/docker-engine.sh start   install docker.io if missing, start dockerd
#                                    (no-op when ours already answers), print
#                                    DOCKER_HOST=unix://... on stdout
#   scripts/docker-engine.sh stop    stop our dockerd (its containerd with it)
#   scripts/docker-engine.sh env     print DOCKER_HOST=... of a running engine
#   scripts/docker-engine.sh prune   remove the containers and networks
#                                    testcontainers-go left (a test binary
#                                    killed before its cleanup; Ryuk, which
#                                    would reap them, is off)
#
# The engine runs without a bridge and without iptables rules
# (--bridge=none --iptables=false): containers run with --network host and
# are reached on loopback; nothing is published through a bridge's private
# addresses. It has its own socket, data root and exec root, so it never
# touches another engine on the machine:
#
#   CORDON_DOCKER_ROOT   data root, images live here (default /var/lib/cordon-docker)
#   CORDON_DOCKER_RUN    socket, pidfile, exec root  (default /run/cordon-docker)
#
# Ownership: start writes $CORDON_DOCKER_RUN/owner (dockerd's pid and a
# random token) and starts dockerd with the engine label cordon.engine=TOKEN.
# An engine is ours when that file's token is the label of the engine that
# answers on the socket. start and stop refuse any other engine answering
# there (one started by hand, by another tool, or by an older version of
# this script): start does not join it, stop does not stop it.
#
# Only the DOCKER_HOST line goes to stdout, so `export "$(scripts/docker-engine.sh start)"`
# works; progress and errors go to stderr. Needs root.
set -euo pipefail

ROOT=${CORDON_DOCKER_ROOT:-/var/lib/cordon-docker}
RUN=${CORDON_DOCKER_RUN:-/run/cordon-docker}
SOCK=$RUN/docker.sock
PIDFILE=$RUN/dockerd.pid
OWNER=$RUN/owner
LOG=$ROOT/dockerd.log
export DEBIAN_FRONTEND=noninteractive

log() { echo "docker-engine: $*" >&2; }
die() { echo "docker-engine: ERROR: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
}

# answers: an engine replies on our socket (ours or not: see owned).
answers() { [[ -S $SOCK ]] && docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# owner_field NAME: a field (pid, token) of the owner file.
owner_field() { sed -n "s/^$1=//p" "$OWNER" 2>/dev/null | head -n 1; }

# owned: the engine answering on our socket carries the token of our owner file.
owned() {
  local token labels
  token=$(owner_field token)
  [[ -n $token ]] || return 1
  labels=$(docker -H "unix://$SOCK" info --format '{{join .Labels " "}}' 2>/dev/null) || return 1
  [[ " $labels " == *" cordon.engine=$token "* ]]
}

# ours PID: PID is alive and the dockerd started with our owner file's token.
ours() {
  kill -0 "$1" 2>/dev/null && [[ -r /proc/$1/cmdline ]] &&
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "cordon.engine=$(owner_field token) "
}

# foreign: die, saying what answers on our socket and what to do.
foreign() {
  local what=$1 pid=""
  [[ -f $PIDFILE ]] && pid=$(cat "$PIDFILE" 2>/dev/null)
  die "an engine this script did not start answers on $SOCK${pid:+ (pidfile $PIDFILE: $pid)}$(
    [[ -f $OWNER ]] && echo "; its token is not the one in $OWNER" || echo "; there is no $OWNER")
$what. Stop that engine the way it was started${pid:+ (kill $pid)}, or give this script a
directory of its own: CORDON_DOCKER_RUN=/run/cordon-docker-mine CORDON_DOCKER_ROOT=/var/lib/cordon-docker-mine"
}

install_engine() {
  local need=()
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v docker >/dev/null 2>&1 || need+=(docker.io)
  [[ ${#need[@]} -eq 0 ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "docker.io is not installed and this is not root"
  log "apt-get install docker.io"
  local apt_log
  apt_log=$(mktemp /tmp/cordon-docker-apt.XXXXXX.log)
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io; } </dev/null >"$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    die "apt-get install docker.io failed (log: $apt_log)"
  fi
  rm -f "$apt_log"
}

cmd_start() {
  if answers; then
    owned || foreign "start does not use it"
    log "engine already running (pid $(owner_field pid))"
    echo "DOCKER_HOST=unix://$SOCK"
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "dockerd needs root"
  install_engine
  mkdir -p "$ROOT" "$RUN"
  # A stale pidfile (the machine rebooted, dockerd was killed) makes dockerd
  # refuse to start; remove it when its process is gone.
  if [[ -f $PIDFILE ]] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then rm -f "$PIDFILE"; fi
  # A dockerd that holds the pidfile but does not answer (starting, or
  # hung) is not ours to replace.
  [[ ! -f $PIDFILE ]] || die "dockerd $(cat "$PIDFILE") holds $PIDFILE but does not answer on $SOCK; stop it first (kill $(cat "$PIDFILE"))"
  local token
  token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  log "starting dockerd (data root $ROOT, socket $SOCK, log $LOG)"
  # setsid: the engine outlives this script and the shell that ran it.
  setsid dockerd \
    --host "unix://$SOCK" \
    --data-root "$ROOT" \
    --exec-root "$RUN/exec" \
    --pidfile "$PIDFILE" \
    --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    --label "cordon.engine=$token" \
    </dev/null >>"$LOG" 2>&1 &
  printf 'pid=%s\ntoken=%s\n' $! "$token" >"$OWNER"
  local i
  for i in $(seq 1 120); do
    if answers; then
      owned || { kill -TERM $! 2>/dev/null; die "the engine on $SOCK does not carry this start's token (another engine took the socket?)"; }
      printf 'pid=%s\ntoken=%s\n' "$(cat "$PIDFILE")" "$token" >"$OWNER"
      log "engine $(docker -H "unix://$SOCK" version --format '{{.Server.Version}}') ready after $((i / 4)) s"
      echo "DOCKER_HOST=unix://$SOCK"
      return
    fi
    kill -0 $! 2>/dev/null || { tail -n 30 "$LOG" >&2; die "dockerd exited (log: $LOG)"; }
    sleep 0.25
  done
  tail -n 30 "$LOG" >&2
  die "dockerd did not answer within 30 s (log: $LOG)"
}

cmd_stop() {
  if answers; then
    owned || foreign "stop leaves it running"
  fi
  local pid
  pid=$(owner_field pid)
  if [[ -z $pid ]] || ! ours "$pid"; then
    # Nothing of ours runs: no owner file, or its dockerd is gone. A live
    # dockerd holding the pidfile (not answering yet, or hung) is another's.
    if [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      foreign "stop leaves it running"
    fi
    rm -f "$PIDFILE" "$OWNER"
    unmount_leftovers
    log "not running"
    return
  fi
  log "stopping dockerd $pid"
  kill -TERM "$pid"
  local i
  for i in $(seq 1 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$OWNER"
      unmount_leftovers
      log "stopped"
      return
    fi
    sleep 0.25
  done
  die "dockerd $pid did not stop within 30 s"
}

# unmount_leftovers unmounts what dockerd leaves mounted under its exec
# root (the network namespace it made without a bridge), so the directory
# can be removed.
unmount_leftovers() {
  local m
  awk -v run="$RUN/" 'index($2, run) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || log "could not unmount $m"
  done
}

cmd_env() {
  answers || die "no engine answers on $SOCK (run: scripts/docker-engine.sh start)"
  echo "DOCKER_HOST=unix://$SOCK"
}

cmd_prune() {
  answers || return 0
  local ids
  ids=$(docker -H "unix://$SOCK" ps -aq --filter label=org.testcontainers=true)
  if [[ -n $ids ]]; then
    log "removing $(wc -w <<<"$ids") container(s) testcontainers-go left"
    # shellcheck disable=SC2086 # one id per word
    docker -H "unix://$SOCK" rm -f $ids >/dev/null
  fi
  # Networks testcontainers-go made (reaper_default, when something ran
  # containers without cordontest's host networking) and nothing uses now.
  ids=$(docker -H "unix://$SOCK" network ls -q --filter label=org.testcontainers=true)
  if [[ -n $ids ]]; then
    log "removing $(wc -w <<<"$ids") network(s) testcontainers-go left"
    # shellcheck disable=SC2086 # one id per word
    docker -H "unix://$SOCK" network rm $ids >/dev/null || log "could not remove network(s) $ids"
  fi
}

case ${1:-} in
  start) cmd_start ;;
  prune) cmd_prune ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) usage; exit 2 ;;
esac
