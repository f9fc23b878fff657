#!/usr/bin/env bash
# The previous release keeps working on this tree's migrations.
#
#   scripts/compat-check.sh SERVER_URL
#
# Migrations are meant to keep the release before them correct (expand,
# then contract a release later), because a rollout runs them while the
# previous release still serves. This proves it: it builds the previous
# release's binary (the commit in .ci/previous-release) from this
# repository's history, migrates a fresh database on SERVER_URL's server
# with this tree's binary, and runs every golden replay script of the
# previous release with the previous binary against the migrated schema,
# on the in-memory query path and in SQL (--cache-bytes 0), requiring that
# release's own golden output byte for byte. A migration that cannot keep
# the previous release correct must raise cordon.tenants.reader_min (that
# release then refuses the tenant with a 503, which this check reports as a
# failure), and CHANGELOG.md must say that upgrading across it needs a
# stop; .ci/previous-release then moves to the release that has it.
#
# SERVER_URL is a PostgreSQL + pgvector server URL on which the role may
# create databases (scripts/db.sh start prints one). The database
# cordon_compat_check is created and dropped again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "compat-check: $*" >&2; }
die() { echo "compat-check: ERROR: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: scripts/compat-check.sh SERVER_URL"
server=$1
prev=$(tr -d '[:space:]' < .ci/previous-release)
[[ $prev =~ ^[0-9a-f]{40}$ ]] || die ".ci/previous-release must hold one full commit hash, not '$prev'"
git cat-file -e "$prev^{commit}" 2>/dev/null ||
  die "commit $prev (.ci/previous-release) is not in this clone's history: fetch it (git fetch --unshallow)"

work=$(mktemp -d /tmp/cordon-compat.XXXXXX)
db_url=""
cleanup() {
  if [[ -n $db_url ]]; then
    psql_admin -q -c 'DROP DATABASE IF EXISTS cordon_compat_check WITH (FORCE)' >/dev/null 2>&1 || true
  fi
  git worktree remove --force "$work/prev" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

psql_admin() { /usr/lib/postgresql/15/bin/psql "$server" -v ON_ERROR_STOP=1 "$@"; }

log "building the previous release ${prev:0:12} and this tree"
git worktree add --detach "$work/prev" "$prev" >/dev/null 2>&1 || die "git worktree add $prev failed"
(cd "$work/prev" && go build -o "$work/cordon-prev" ./cmd/cordon)
go build -o "$work/cordon-new" ./cmd/cordon

psql_admin -q -c 'SET client_min_messages = warning' -c 'DROP DATABASE IF EXISTS cordon_compat_check WITH (FORCE)' -c 'CREATE DATABASE cordon_compat_check' >/dev/null
db_url=$(python3 - "$server" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.urlunsplit(u._replace(path="/cordon_compat_check")))
PY
)
"$work/cordon-new" migrate --database-url "$db_url" >/dev/null
new_version=$(/usr/lib/postgresql/15/bin/psql "$db_url" -Atc 'SELECT max(version_id) FROM public.goose_db_version')
log "database migrated by this tree to migration $new_version"

fail=0 n=0
for script in "$work"/prev/testdata/replay/*.json; do
  name=$(basename "$script" .json)
  golden="$work/prev/testdata/replay/$name.golden.jsonl"
  [[ -f $golden ]] || continue
  for cache in 0 auto; do
    n=$((n + 1))
    out="$work/$name.$cache.jsonl"
    if ! "$work/cordon-prev" replay --store postgres --database-url "$db_url" --reset --yes --cache-bytes "$cache" "$script" >"$out" 2>"$work/err"; then
      log "FAIL $name (--cache-bytes $cache): the previous release's replay failed: $(tail -n 3 "$work/err")"
      fail=$((fail + 1))
      continue
    fi
    if ! cmp -s "$out" "$golden"; then
      log "FAIL $name (--cache-bytes $cache): the previous release answers differently on this schema; first difference:"
      diff "$golden" "$out" | head -n 6 >&2 || true
      fail=$((fail + 1))
    fi
  done
done
after=$(/usr/lib/postgresql/15/bin/psql "$db_url" -Atc 'SELECT max(version_id) FROM public.goose_db_version')
[[ $after == "$new_version" ]] || { log "FAIL the previous release changed the migration version from $new_version to $after"; fail=$((fail + 1)); }
[[ $n -gt 0 ]] || die "no golden replay scripts found at ${prev:0:12}"
if [[ $fail -gt 0 ]]; then
  die "$fail of $n replays of the previous release ${prev:0:12} failed on migration $new_version: a migration breaks the release before it (see the header of this script)"
fi
log "ok: all $n golden replays of the previous release ${prev:0:12} match on migration $new_version (both query paths)"
