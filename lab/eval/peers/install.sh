#!/bin/sh
# Installs what the peer scripts need beyond Python's standard library and
# the PostgreSQL client (scripts/pg-install.sh): Debian's python3-xapian for
# xapianrun.py. Idempotent: when the system python3 already imports xapian
# it does nothing. Needs root (or sudo) only when something is missing. The
# peers are run by hand (docs/quality.md), never by the tests, so CI does
# not run this.
#
#   sh lab/eval/peers/install.sh
set -eu
py=${PY_XAPIAN:-/usr/bin/python3}
if "$py" -c 'import xapian' 2>/dev/null; then
	echo "peers: xapian $("$py" -c 'import xapian; print(xapian.version_string())') already importable by $py" >&2
	exit 0
fi
sudo=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "peers: not root and sudo not available; cannot install python3-xapian" >&2; exit 1; }
	sudo="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq </dev/null
$sudo apt-get install -y -qq --no-install-recommends python3-xapian </dev/null
"$py" -c 'import xapian' || { echo "peers: python3-xapian installed but $py cannot import xapian" >&2; exit 1; }
echo "peers: installed python3-xapian" >&2
