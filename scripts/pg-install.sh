#!/usr/bin/env bash
# Ensure PostgreSQL 15 and the pgvector extension are installed (Debian 12).
#
# Idempotent: when both are already present this only runs a few file checks
# and exits in milliseconds. Needs root (or sudo) only when something is missing.
#
# pgvector is not packaged for PostgreSQL 15 in Debian 12, so it is built from
# Debian 13 (trixie)'s source package against the local PG15 headers. Only the
# *source* index of trixie is added (in its own, temporary sources file); no
# trixie binaries are ever installed.
set -euo pipefail

PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG="${PG_BIN}/pg_config"
TRIXIE_SRC_FILE=/etc/apt/sources.list.d/cordon-trixie-src.sources
export DEBIAN_FRONTEND=noninteractive

log() { echo "pg-install: $*" >&2; }
die() { echo "pg-install: ERROR: $*" >&2; exit 1; }

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo not available; cannot install packages"
  SUDO=(sudo -n)
fi

# apt/dpkg output is long; keep it in a log and show its tail only on failure.
# Created lazily (the fast path never touches it); kept only on failure.
APT_LOG="" build_dir="" wrote_src=0
run_logged() {
  [[ -n $APT_LOG ]] || APT_LOG=$(mktemp /tmp/cordon-pg-install.XXXXXX.log)
  if ! "$@" >>"$APT_LOG" 2>&1; then
    tail -n 40 "$APT_LOG" >&2
    die "'$*' failed (full log: $APT_LOG)"
  fi
}

apt_updated=0
apt_update() {
  if [[ $apt_updated -eq 0 ]]; then
    log "apt-get update"
    run_logged "${SUDO[@]}" apt-get update
    apt_updated=1
  fi
}
apt_install() {
  log "apt-get install $*"
  run_logged "${SUDO[@]}" apt-get install -y --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

cleanup() {
  local rc=$?
  if [[ $wrote_src -eq 1 ]]; then "${SUDO[@]}" rm -f "$TRIXIE_SRC_FILE"; fi
  if [[ -n $build_dir ]]; then rm -rf "$build_dir"; fi
  if [[ $rc -eq 0 && -n $APT_LOG ]]; then rm -f "$APT_LOG"; fi
}
trap cleanup EXIT

vector_installed() {
  [[ -x $PG_CONFIG ]] || return 1
  [[ -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ]] &&
    [[ -f "$("$PG_CONFIG" --pkglibdir)/vector.so" ]]
}

# --- 1. PostgreSQL 15 server ------------------------------------------------
if [[ -x "${PG_BIN}/initdb" && -x $PG_CONFIG ]]; then
  log "PostgreSQL ${PG_MAJOR} present ($("$PG_CONFIG" --version))"
else
  apt_update
  # The Debian package may create and start a default "main" cluster; we never
  # use it (scripts/db.sh runs its own throwaway cluster), so that is harmless.
  apt_install "postgresql-${PG_MAJOR}"
  [[ -x "${PG_BIN}/initdb" ]] || die "postgresql-${PG_MAJOR} installed but ${PG_BIN}/initdb missing"
fi

# --- 2. pgvector --------------------------------------------------------------
if vector_installed; then
  log "pgvector present ($(sed -n "s/^default_version *= *'\(.*\)'/\1/p" \
    "$("$PG_CONFIG" --sharedir)/extension/vector.control"))"
  exit 0
fi

log "pgvector missing for PostgreSQL ${PG_MAJOR}; building from Debian trixie source"

# Find the main archive's URIs (and keyring) from the deb822 stanza whose Suites
# contain the plain release codename (not -security/-updates). Paragraph mode
# awk: one record per stanza.
main_sources=/etc/apt/sources.list.d/debian.sources
uris="" signed_by=""
if [[ -f $main_sources ]]; then
  IFS=$'\t' read -r uris signed_by < <(awk -v RS= -v OFS='\t' '
    {
      u = ""; s = ""; main = 0
      n = split($0, lines, "\n")
      for (i = 1; i <= n; i++) {
        l = lines[i]
        if (l ~ /^[[:space:]]*#/) continue
        if (l ~ /^URIs:/)      { sub(/^URIs:[[:space:]]*/, "", l); u = l }
        if (l ~ /^Signed-By:/) { sub(/^Signed-By:[[:space:]]*/, "", l); s = l }
        if (l ~ /^Suites:/) {
          m = split(l, w, /[[:space:]]+/)
          for (j = 2; j <= m; j++) if (w[j] != "" && w[j] !~ /-/) main = 1
        }
      }
      if (first == "") { first = u; firsts = s }
      if (main && u != "") { print u, (s ~ /^\// ? s : "-"); found = 1; exit }
    }
    END { if (!found && first != "") print first, (firsts ~ /^\// ? firsts : "-") }
  ' "$main_sources") || true
fi
# Fallback: classic one-line sources.list.
if [[ -z $uris && -f /etc/apt/sources.list ]]; then
  uris=$(awk '$1 == "deb" && $3 !~ /-/ { print $2; exit }' /etc/apt/sources.list)
fi
[[ -n $uris ]] || die "could not determine the Debian archive URI from $main_sources"
uris=${uris%% *}   # first URI is enough
log "using archive ${uris} for trixie deb-src${signed_by:+ (Signed-By ${signed_by})}"

# Temporary, separate sources file (never touch debian.sources). It is removed
# on exit so later `apt-get update` runs don't keep fetching trixie's Sources.
build_dir=$(mktemp -d /tmp/cordon-pgvector.XXXXXX)
wrote_src=1
{
  echo "# Written by Cordon scripts/pg-install.sh: source index only, for building pgvector."
  echo "Types: deb-src"
  echo "URIs: ${uris}"
  echo "Suites: trixie"
  echo "Components: main"
  if [[ -n $signed_by && $signed_by != - ]]; then echo "Signed-By: ${signed_by}"; fi
} | "${SUDO[@]}" tee "$TRIXIE_SRC_FILE" >/dev/null

apt_updated=0   # the new source index must be fetched even if we updated above
apt_update
# Build deps come from bookworm: PG15 headers/PGXS plus a compiler. dpkg-dev
# provides dpkg-source, which `apt-get source` uses to unpack.
need=("postgresql-server-dev-${PG_MAJOR}")
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
apt_install "${need[@]}"

# Download + unpack only (no -b, no build-dep): nothing from trixie is installed.
cd "$build_dir"
log "apt-get source pgvector (trixie)"
# Sandbox user off: _apt cannot write into our private (0700) mktemp dir.
run_logged apt-get source -t trixie -o APT::Sandbox::User=root pgvector
src=$(find "$build_dir" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' -print -quit)
[[ -n $src ]] || die "pgvector source directory not found in $build_dir"
log "building $(basename "$src")"
run_logged make -C "$src" -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
run_logged "${SUDO[@]}" make -C "$src" PG_CONFIG="$PG_CONFIG" install

vector_installed || die "pgvector install finished but vector.control/vector.so not found"
log "pgvector installed into PostgreSQL ${PG_MAJOR}"

