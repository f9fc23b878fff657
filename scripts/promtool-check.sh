#!/usr/bin/env bash
# Validate Cordon's Prometheus alert rules with promtool (part of 'make lint').
#
#   bash scripts/promtool-check.sh
#
# Checks deploy/prometheus/cordon-rules.yaml ('promtool check rules'), the
# rule groups of the PrometheusRule in deploy/k8s/prometheusrule/ (extracted
# from its spec and checked the same way), and runs the rules' unit tests in
# deploy/prometheus/cordon-rules.test.yaml ('promtool test rules').
#
# promtool comes from Debian's prometheus package. When it is not on PATH,
# the package is downloaded (apt-get download, not installed: no prometheus
# service is set up or started) and promtool alone is extracted into
# PROMTOOL_CACHE (default /var/cache/cordon/promtool). Idempotent: once
# promtool is there, this runs in about a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

RULES=deploy/prometheus/cordon-rules.yaml
RULES_TEST=deploy/prometheus/cordon-rules.test.yaml
PROMETHEUS_RULE=deploy/k8s/prometheusrule/prometheusrule.yaml
PROMTOOL_CACHE=${PROMTOOL_CACHE:-/var/cache/cordon/promtool}

log() { echo "promtool-check: $*" >&2; }
die() { echo "promtool-check: ERROR: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/cordon-promtool.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

find_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    command -v promtool
  elif [[ -x $PROMTOOL_CACHE/usr/bin/promtool ]]; then
    echo "$PROMTOOL_CACHE/usr/bin/promtool"
  else
    return 1
  fi
}

install_promtool() {
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "promtool missing, not root and sudo not available"
    sudo=(sudo -n)
  fi
  log "promtool missing: extracting it from Debian's prometheus package into $PROMTOOL_CACHE"
  if ! (cd "$tmp" && apt-get download prometheus >"$tmp/apt.log" 2>&1); then
    "${sudo[@]}" apt-get update -qq >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; die "apt-get update failed"; }
    (cd "$tmp" && apt-get download prometheus >"$tmp/apt.log" 2>&1) || { cat "$tmp/apt.log" >&2; die "apt-get download prometheus failed"; }
  fi
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/deb"
  "${sudo[@]}" mkdir -p "$PROMTOOL_CACHE/usr/bin"
  "${sudo[@]}" install -m 0755 "$tmp/deb/usr/bin/promtool" "$PROMTOOL_CACHE/usr/bin/promtool"
}

promtool=$(find_promtool) || { install_promtool; promtool=$(find_promtool) || die "promtool not found after install"; }
log "using $promtool ($("$promtool" --version 2>&1 | head -n 1))"

"$promtool" check rules "$RULES"

# The PrometheusRule's spec holds the same groups as the plain file (the Go
# test in deploy/ compares them); check its groups as a rules file of their
# own, so a mistake made in one copy only is caught here too.
awk '
  /^spec:/ { in_spec = 1; next }
  in_spec && /^[^ #]/ { in_spec = 0 }
  in_spec { sub(/^  /, ""); print }
' "$PROMETHEUS_RULE" >"$tmp/prometheusrule-groups.yaml"
grep -q '^groups:' "$tmp/prometheusrule-groups.yaml" || die "$PROMETHEUS_RULE: no spec.groups"
"$promtool" check rules "$tmp/prometheusrule-groups.yaml"

"$promtool" test rules "$RULES_TEST"
