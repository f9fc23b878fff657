#!/usr/bin/env bash
# Build the images Cordon's container tests run, from Debian's archive and
# the Go module proxy only (no image registry):
#
#   cordon-base:bookworm  mmdebstrap --variant=minbase bookworm with the
#                         updates and security suites (current packages),
#                         imported with 'docker import' (skipped when
#                         present); every other image builds FROM it
#   cordon-pg:15          PostgreSQL 15 + pgvector (deploy/pgvector/Dockerfile,
#                         scripts/pg-install.sh inside)
#   cordon-go:GOVERSION-HASH  the host's Go toolchain ($(go env GOROOT)) on
#                         the base image, with the module and build caches
#                         of go.sum's dependencies: the build stage of
#                         deploy/Dockerfile (skipped when present)
#   cordon:local          Cordon itself: deploy/Dockerfile with
#                         GO_IMAGE=cordon-go:GOVERSION-HASH and
#                         RUNTIME_IMAGE=cordon-base:bookworm
#
#   scripts/docker-images.sh [base|pg|go|cordon|all]...   (default: all)
#   scripts/docker-images.sh deps   only install what the builds need on
#                                   the host (mmdebstrap), then stop
#
# Each step builds what it needs first; 'all' builds cordon-pg while it
# builds cordon-go and cordon:local. Builds run with --network host: the
# engine scripts/docker-engine.sh starts has no bridge. DOCKER_HOST is taken
# from the environment, else from that engine. Idempotent: a second run
# reuses the images and Docker's layer cache (seconds).
#
#   CORDON_REBUILD_BASE=1   build the base again even if cordon-base:bookworm exists
#   CORDON_DEBIAN_MIRROR    archive URI (default: the host's, from its apt sources)
#   CORDON_DEBIAN_SECURITY  security archive URI (default: the host's)
#   CORDON_IMAGE            Cordon's tag (default cordon:local)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=cordon-base:bookworm
PG=cordon-pg:15
CORDON=${CORDON_IMAGE:-cordon:local}
export DEBIAN_FRONTEND=noninteractive

log() { echo "docker-images: $*" >&2; }
die() { echo "docker-images: ERROR: $*" >&2; exit 1; }

if [[ -z ${DOCKER_HOST:-} ]]; then
  DOCKER_HOST=$(bash "$REPO/scripts/docker-engine.sh" env 2>/dev/null) || DOCKER_HOST=
  DOCKER_HOST=${DOCKER_HOST#DOCKER_HOST=}
  [[ -n $DOCKER_HOST ]] || unset DOCKER_HOST
fi
[[ -z ${DOCKER_HOST:-} ]] || export DOCKER_HOST
if [[ $* != deps ]]; then
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
    die "no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST} (run: scripts/docker-engine.sh start)"
fi

have() { docker image inspect "$1" >/dev/null 2>&1; }

# timed NAME CMD...: run CMD, log how long it took.
timed() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  log "$name: $((SECONDS - t0)) s"
}

# sources_uri SUITE_PATTERN: the first URI of the host's deb822 stanza whose
# Suites match the pattern (bookworm's main suite, or -security).
sources_uri() {
  local f=/etc/apt/sources.list.d/debian.sources
  [[ -f $f ]] || return 0
  awk -v RS= -v want="$1" '
    {
      u = ""; hit = 0
      n = split($0, lines, "\n")
      for (i = 1; i <= n; i++) {
        l = lines[i]
        if (l ~ /^[[:space:]]*#/) continue
        if (l ~ /^URIs:/) { sub(/^URIs:[[:space:]]*/, "", l); split(l, w, /[[:space:]]+/); u = w[1] }
        if (l ~ /^Suites:/) if (l ~ want) hit = 1
      }
      if (hit && u != "") { print u; exit }
    }' "$f"
}

# build_base makes the base every other image builds FROM (and Cordon's
# runtime image): one mmdebstrap run that takes bookworm's packages at
# their current versions from the release, updates and security suites at
# once (debootstrap knows only the release suite, so it took a second,
# upgrading build), streamed into 'docker import'.
build_base() {
  if have "$BASE" && [[ ${CORDON_REBUILD_BASE:-} != 1 ]]; then
    log "$BASE present"
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "mmdebstrap needs root"
  install_deps
  local mirror security
  mirror=${CORDON_DEBIAN_MIRROR:-$(sources_uri '[[:space:]]bookworm([[:space:]]|$)')}
  mirror=${mirror:-http://deb.debian.org/debian}
  security=${CORDON_DEBIAN_SECURITY:-$(sources_uri 'bookworm-security')}
  security=${security:-http://deb.debian.org/debian-security}
  local tmp
  tmp=$(mktemp -d /var/tmp/cordon-base.XXXXXX)
  # shellcheck disable=SC2064 # expand tmp now
  trap "rm -rf -- '$tmp'" RETURN
  # The image's sources: the three suites, as deb822 with the archive key.
  cat >"$tmp/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  log "mmdebstrap --variant=minbase bookworm (with bookworm-updates and bookworm-security) from $mirror"
  # ca-certificates: Cordon's image verifies OIDC/JWKS endpoints over TLS.
  # mmdebstrap leaves no downloaded packages and no package lists behind.
  if ! mmdebstrap --mode=root --variant=minbase --include=ca-certificates --format=tar \
    --customize-hook='rm -f "$1/etc/apt/sources.list"' \
    --customize-hook="copy-in $tmp/debian.sources /etc/apt/sources.list.d" \
    bookworm - \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main" \
    2>"$tmp/mmdebstrap.log" |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null; then
    tail -n 30 "$tmp/mmdebstrap.log" >&2
    die "mmdebstrap | docker import $BASE failed"
  fi
}

# install_deps installs what building the base needs on the host.
install_deps() {
  command -v mmdebstrap >/dev/null 2>&1 && return 0
  [[ $(id -u) -eq 0 ]] || die "mmdebstrap is not installed and this is not root"
  log "apt-get install mmdebstrap"
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends mmdebstrap; } </dev/null >/dev/null ||
    die "apt-get install mmdebstrap failed"
}

build_pg() {
  have "$BASE" || timed base build_base
  log "docker build $PG (deploy/pgvector/Dockerfile)"
  # A context of just the two files the Dockerfile copies.
  tar -C "$REPO" -c scripts/pg-install.sh deploy/pgvector |
    docker build --network host --force-rm -q -f deploy/pgvector/Dockerfile --build-arg BASE_IMAGE="$BASE" -t "$PG" - >/dev/null
}

go_version() { go env GOVERSION | sed 's/^go//'; }

# go_image names the build stage's image: the Go version and a hash of
# what it was warmed with (go.mod, go.sum and the dependency list).
go_image() {
  local h
  h=$(cd "$REPO" && { cat go.mod go.sum; go_deps; } | sha256sum | cut -c1-12)
  echo "cordon-go:$(go_version)-$h"
}

# go_deps lists the packages outside Cordon that cmd/cordon builds from.
go_deps() {
  (cd "$REPO" && CGO_ENABLED=0 GOOS=linux go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./cmd/cordon |
    grep -v '^github.com/cordon-rag/cordon\(/\|$\)')
}

# build_go makes the image deploy/Dockerfile's build stage runs on, in two
# steps. cordon-go-toolchain:VERSION is the host's Go toolchain on the base
# (270 MB, built once per Go version). cordon-go:VERSION-HASH adds, for
# this go.mod and go.sum, the module cache (fed from the host's module
# cache through a file proxy: the build needs no network) and a build
# cache of every dependency, compiled as the Dockerfile compiles
# (CGO_ENABLED=0, -trimpath). The classic builder has no cache mounts, so
# without it every change to Cordon's source recompiled the standard
# library and every dependency (9 minutes here); with it only Cordon's own
# packages compile.
build_go() {
  have "$BASE" || timed base build_base
  local img toolchain goroot
  toolchain=cordon-go-toolchain:$(go_version)
  if have "$toolchain"; then
    log "$toolchain present"
  else
    goroot=$(go env GOROOT)
    log "docker build $toolchain (GOROOT $goroot)"
    docker build --network host --force-rm -q -t "$toolchain" -f - "$goroot" >/dev/null <<EOF
FROM $BASE
COPY . /usr/local/go
ENV PATH=/usr/local/go/bin:\$PATH
EOF
  fi
  img=$(go_image)
  if have "$img"; then
    log "$img present"
    return
  fi
  log "docker build $img (module and build caches for this go.sum)"
  local ctx
  ctx=$(mktemp -d /tmp/cordon-go-ctx.XXXXXX)
  # shellcheck disable=SC2064 # expand ctx now
  trap "rm -rf -- '$ctx'" RETURN
  (cd "$REPO" && go mod download) # fill the host's cache (network only when it lacks something)
  # The modules 'go mod download' needs, and only those: a fresh cache
  # filled from the host's, offline. Its download directory is a proxy.
  local hostcache
  hostcache=$(go env GOMODCACHE)
  (cd "$REPO" && GOMODCACHE="$ctx/modcache" GOPROXY="file://$hostcache/cache/download" \
    GOSUMDB=off GOFLAGS=-modcacherw go mod download)
  mv "$ctx/modcache/cache/download" "$ctx/proxy"
  rm -rf "$ctx/modcache"
  cp "$REPO/go.mod" "$REPO/go.sum" "$ctx/"
  go_deps >"$ctx/deps.txt"
  cat >"$ctx/Dockerfile" <<EOF
FROM $toolchain
COPY . /tmp/warm/
RUN cd /tmp/warm && GOPROXY=file:///tmp/warm/proxy GOSUMDB=off go mod download \
 && CGO_ENABLED=0 GOOS=linux go build -trimpath \$(cat deps.txt) \
 && rm -rf /tmp/warm
EOF
  docker build --network host --force-rm -q -t "$img" "$ctx" >/dev/null
  # Older warm images of this Go version are superseded.
  docker image ls --format '{{.Repository}}:{{.Tag}}' "cordon-go" | grep -vx "$img" | xargs -r docker image rm >/dev/null || true
}

# commit_date is HEAD's commit time in UTC: the image's build date. Not the
# clock's: with the same tree and arguments Docker's cache then rebuilds
# nothing.
commit_date() {
  TZ=UTC git -C "$REPO" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo unknown
}

build_cordon() {
  have "$BASE" || timed base build_base
  have "$(go_image)" || timed go build_go
  log "docker build $CORDON (deploy/Dockerfile)"
  # The context is the files git knows (tracked, or new and not ignored), as
  # deploy/Dockerfile.dockerignore intends: the classic builder reads only
  # the context root's .dockerignore, and the tree may hold a throwaway
  # cluster or node_modules.
  (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -c) |
    docker build --network host --force-rm -q -f deploy/Dockerfile \
      --build-arg GO_IMAGE="$(go_image)" --build-arg RUNTIME_IMAGE="$BASE" \
      --build-arg VERSION="$(git -C "$REPO" describe --tags --always --dirty 2>/dev/null || echo unknown)" \
      --build-arg COMMIT="$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)" \
      --build-arg DATE="$(commit_date)" \
      -t "$CORDON" - >/dev/null
}

# build_all builds the base, then cordon-pg next to cordon-go and Cordon:
# the first mostly waits for the archive, the others mostly compile. The
# PostgreSQL build's output is kept apart and shown after, prefixed.
build_all() {
  timed base build_base
  local pglog pgpid rc=0
  pglog=$(mktemp /tmp/cordon-images-pg.XXXXXX.log)
  (timed pg build_pg) >"$pglog" 2>&1 &
  pgpid=$!
  (timed go build_go && timed cordon build_cordon) || rc=$?
  if ! wait "$pgpid"; then
    sed 's/^/[pg] /' "$pglog" >&2
    die "building $PG failed (log above and in $pglog)"
  fi
  sed 's/^/[pg] /' "$pglog" >&2
  rm -f "$pglog"
  [[ $rc -eq 0 ]] || die "building cordon-go or $CORDON failed"
}

steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(all)
for s in "${steps[@]}"; do
  case $s in
    base) timed base build_base ;;
    pg) timed pg build_pg ;;
    go) timed go build_go ;;
    cordon) timed cordon build_cordon ;;
    all) build_all ;;
    deps) install_deps; exit 0 ;;
    *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^(cordon-base:bookworm|$PG|cordon-go:[^ ]*|$CORDON) " >&2 || true
