#!/usr/bin/env bash
# Ensure the Citus extension (13.2.2) is installed into PostgreSQL 15 (Debian 12).
#
# Idempotent and once per machine: when citus.so and citus.control of the
# wanted version are already in PostgreSQL 15's extension directories this
# only runs a few file checks. Otherwise it installs the build dependencies,
# builds Citus from its source tarball and installs it (about 2.5 CPU-minutes).
# Concurrent runs wait for each other (flock).
#
#   scripts/citus-install.sh        install (build) Citus when missing
#   scripts/citus-install.sh deps   only what the build needs from apt
#                                   (PostgreSQL 15, pgvector, the build
#                                   dependencies), when Citus is missing: so
#                                   that a build run in the background next
#                                   to other apt users (.ci/run) runs no apt
#
# Citus is not packaged for Debian 12 or 13 and cannot be fetched from these
# machines; its source tarball (citus-13.2.2.tar.gz, the v13.2.2 release tag
# packed with `git archive`) is looked up, in order, at:
#   $CORDON_CITUS_SRC   the tarball itself, or a directory holding it
#   <repo>/../shared/citus/citus-13.2.2.tar.gz
#   /work/shared/citus/citus-13.2.2.tar.gz
# Cordon does not link Citus (AGPL v3): it is built only to run a coordinator
# and workers for tests and benchmarks (scripts/citus-cluster.sh).
set -euo pipefail

CITUS_VERSION=13.2.2
CITUS_SHA256=dd2453caec20a830e5e63f1def5c5a98cb6f57ae510407cdcd800916fcdab430
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG="${PG_BIN}/pg_config"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCK=/tmp/cordon-citus-install.lock
export DEBIAN_FRONTEND=noninteractive

MODE=${1:-build}
case $MODE in build | deps) ;; *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;; esac

log() { echo "citus-install: $*" >&2; }
die() { echo "citus-install: ERROR: $*" >&2; exit 1; }

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  SUDO=(sudo -n)
fi

# installed: citus.so in the library dir and a citus.control whose
# default_version is the 13.2 series this script builds.
installed() {
  [[ -x $PG_CONFIG ]] || return 1
  local ctl
  ctl="$("$PG_CONFIG" --sharedir)/extension/citus.control"
  [[ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" && -f $ctl ]] &&
    grep -qE "^default_version *= *'13\.2-" "$ctl"
}

if installed; then
  log "Citus present ($(sed -n "s/^default_version *= *'\(.*\)'/\1/p" \
    "$("$PG_CONFIG" --sharedir)/extension/citus.control"))"
  exit 0
fi

# PostgreSQL 15 and pgvector first: every node needs both.
bash "$REPO/scripts/pg-install.sh"

exec 9>"$LOCK"
flock 9
if installed; then
  log "Citus was installed by a concurrent run"
  exit 0
fi

find_tarball() {
  local name="citus-${CITUS_VERSION}.tar.gz" c
  local candidates=()
  if [[ -n ${CORDON_CITUS_SRC:-} ]]; then
    if [[ -d $CORDON_CITUS_SRC ]]; then candidates+=("$CORDON_CITUS_SRC/$name"); else candidates+=("$CORDON_CITUS_SRC"); fi
  fi
  candidates+=("$REPO/../shared/citus/$name" "/work/shared/citus/$name")
  for c in "${candidates[@]}"; do
    if [[ -f $c ]]; then realpath -- "$c"; return 0; fi
  done
  die "Citus source tarball $name not found; looked at: ${candidates[*]}.
Set CORDON_CITUS_SRC to the tarball (or its directory)."
}

tarball=$(find_tarball)
log "source $tarball"
echo "$CITUS_SHA256  $tarball" | sha256sum -c --quiet - >/dev/null 2>&1 ||
  die "$tarball: sha256 is not $CITUS_SHA256"

# --- build dependencies (Debian 12) ------------------------------------------
# The list measured to build Citus 13.2 against PostgreSQL 15: the server
# headers plus what its PGXS link line names. libcurl is left out: it only
# serves Citus's anonymous usage statistics, which are built out below.
deps=("postgresql-server-dev-${PG_MAJOR}" liblz4-dev libzstd-dev libkrb5-dev libssl-dev
  libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev make gcc libc6-dev)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
build_dir="" APT_LOG=""
cleanup() {
  local rc=$?
  if [[ -n $build_dir ]]; then rm -rf "$build_dir"; fi
  if [[ $rc -eq 0 && -n $APT_LOG ]]; then rm -f "$APT_LOG"; fi
}
trap cleanup EXIT
build_dir=$(mktemp -d /tmp/cordon-citus.XXXXXX)
APT_LOG=$build_dir.log
run_logged() {
  if ! "$@" >>"$APT_LOG" 2>&1; then
    tail -n 40 "$APT_LOG" >&2
    die "'$*' failed (full log: $APT_LOG)"
  fi
}
if [[ ${#missing[@]} -gt 0 ]]; then
  log "apt-get install ${missing[*]}"
  run_logged "${SUDO[@]}" apt-get update
  run_logged "${SUDO[@]}" apt-get install -y --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
fi

if [[ $MODE == deps ]]; then
  log "build dependencies present"
  exit 0
fi

# --- build --------------------------------------------------------------------
tar -xzf "$tarball" -C "$build_dir"
src="$build_dir/citus-${CITUS_VERSION}"
[[ -d $src ]] || die "$tarball did not unpack to citus-${CITUS_VERSION}/"

# PostgreSQL 15's later minor releases (15.x, seen on 15.20) export
# have_createdb_privilege(), and Citus 13.2.2 still defines a static inline
# copy for versions before 16, which no longer compiles. When the server
# headers declare it, drop Citus's copy (keeping its #define, which then names
# the server's function).
compat="$src/src/include/pg_version_compat.h"
if grep -q 'extern bool have_createdb_privilege' "$("$PG_CONFIG" --includedir-server)/commands/dbcommands.h" 2>/dev/null; then
  awk '
    /^static inline bool$/ { held = $0; next }
    held != "" && /^have_createdb_privilege\(void\)$/ { skip = 1; held = ""; next }
    held != "" { print held; held = "" }
    skip { if ($0 ~ /^}$/) skip = 0; next }
    { print }
  ' "$compat" >"$compat.new"
  mv "$compat.new" "$compat"
  ! grep -q '^have_createdb_privilege(void)' "$compat" || die "could not remove the static have_createdb_privilege from $compat"
  log "patched pg_version_compat.h (PostgreSQL exports have_createdb_privilege)"
fi

jobs=$(nproc)
log "configure + make -j$jobs (about 2.5 CPU-minutes; log: $APT_LOG)"
start=$SECONDS
(cd "$src" && run_logged ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl)
# with_llvm=no: no LLVM bitcode for JIT inlining, which would double the
# compile work and serves nothing here.
run_logged make -C "$src" -j"$jobs" with_llvm=no
run_logged "${SUDO[@]}" make -C "$src" install with_llvm=no
installed || die "make install finished but citus.so/citus.control (13.2) not found"
log "Citus ${CITUS_VERSION} installed into PostgreSQL ${PG_MAJOR} in $((SECONDS - start))s"
