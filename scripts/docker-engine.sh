#!/usr/bin/env bash
# A private Docker engine for Cordon's container tests, on a machine that has
# no engine and reaches no image registry (Debian's docker.io package only).
#
#   scripts/docker-engine.sh start   install docker.io if missing, start dockerd
#                                    (no-op when ours already answers), print
#                                    DOCKER_HOST=unix://... on stdout
#   scripts/docker-engine.sh stop    stop our dockerd (its containerd with it)
#   scripts/docker-engine.sh env     print DOCKER_HOST=... of a running engine
#   scripts/docker-engine.sh prune   remove the containers testcontainers-go
#                                    left (a test binary killed before its
#                                    cleanup; Ryuk, which would reap them, is off)
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
# Only the DOCKER_HOST line goes to stdout, so `export "$(scripts/docker-engine.sh start)"`
# works; progress and errors go to stderr. Needs root.
set -euo pipefail

ROOT=${CORDON_DOCKER_ROOT:-/var/lib/cordon-docker}
RUN=${CORDON_DOCKER_RUN:-/run/cordon-docker}
SOCK=$RUN/docker.sock
PIDFILE=$RUN/dockerd.pid
LOG=$ROOT/dockerd.log
export DEBIAN_FRONTEND=noninteractive

log() { echo "docker-engine: $*" >&2; }
die() { echo "docker-engine: ERROR: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
}

# answers: our engine replies to a ping on its socket.
answers() { [[ -S $SOCK ]] && docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

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
    log "engine already running (pid $(cat "$PIDFILE" 2>/dev/null || echo '?'))"
    echo "DOCKER_HOST=unix://$SOCK"
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "dockerd needs root"
  install_engine
  mkdir -p "$ROOT" "$RUN"
  # A stale pidfile (the machine rebooted, dockerd was killed) makes dockerd
  # refuse to start; remove it when its process is gone.
  if [[ -f $PIDFILE ]] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then rm -f "$PIDFILE"; fi
  log "starting dockerd (data root $ROOT, socket $SOCK, log $LOG)"
  # setsid: the engine outlives this script and the shell that ran it.
  setsid dockerd \
    --host "unix://$SOCK" \
    --data-root "$ROOT" \
    --exec-root "$RUN/exec" \
    --pidfile "$PIDFILE" \
    --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    </dev/null >>"$LOG" 2>&1 &
  local i
  for i in $(seq 1 120); do
    if answers; then
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
  if [[ ! -f $PIDFILE ]]; then
    unmount_leftovers
    log "not running (no $PIDFILE)"
    return
  fi
  local pid
  pid=$(cat "$PIDFILE")
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$PIDFILE"
    unmount_leftovers
    log "not running (stale pidfile removed)"
    return
  fi
  log "stopping dockerd $pid"
  kill -TERM "$pid"
  local i
  for i in $(seq 1 120); do
    if ! kill -0 "$pid" 2>/dev/null; then
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
}

case ${1:-} in
  start) cmd_start ;;
  prune) cmd_prune ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) usage; exit 2 ;;
esac
