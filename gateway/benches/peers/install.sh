#!/usr/bin/env bash
# Installs the peers the gateway's peers bench (gateway/benches/peers.rs) runs beside it, pinned,
# into ${CARGO_TARGET_DIR:-target}/peers (never committed), when they are missing; starts
# nothing. Each Python peer gets a venv of its own (mcp-proxy wants the `mcp` SDK 1.x, FastMCP
# 2.x):
#
# * mcp-proxy 0.13.0 (PyPI), requirements-mcp-proxy.txt: target/peers/mcp-proxy/
# * FastMCP 4.2.3 (PyPI), requirements-fastmcp.txt: target/peers/fastmcp/
# * supergateway 4.0.0 (npm), package-lock.json: `npm ci` in target/peers/npm/
#
# ContextForge 1.1 (PyPI `mcp-contextforge-gateway`) is left out: it requires Python 3.12+, and a
# stdio server behind it takes its gateway (uvicorn, a database, generated JWT and admin
# secrets), its stdio bridge (`mcpgateway.translate`) and a registration through its REST API;
# its stdio bridge alone would not be the product a user picks. Issue 30 measured it at p50
# ~92 ms, 20x the others.
#
# The bench also needs the TypeScript SDK client (bash scripts/mcp_sdks.sh).
#
#   bash gateway/benches/peers/install.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
peers="$target/peers"
mkdir -p "$peers"

# venv DIR PYTHON REQUIREMENTS PACKAGE VERSION: a venv with REQUIREMENTS unless PACKAGE is there
# at VERSION already.
venv() {
  local dir="$1" python="$2" requirements="$3" package="$4" version="$5"
  if "$dir/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$package') != '$version')" 2>/dev/null; then
    return
  fi
  echo "peers/install.sh: installing $package $version into $dir" >&2
  rm -rf "$dir"
  "$python" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$dir/bin/pip" check >&2
}

venv "$peers/mcp-proxy" python3 "$here/requirements-mcp-proxy.txt" mcp-proxy 0.13.0
venv "$peers/fastmcp" python3 "$here/requirements-fastmcp.txt" fastmcp 4.2.3

if ! node -e 'process.exit(require(process.argv[1]).version === "4.0.0" ? 0 : 1)' \
  "$peers/npm/node_modules/supergateway/package.json" 2>/dev/null; then
  echo "peers/install.sh: installing supergateway 4.0.0 into $peers/npm" >&2
  mkdir -p "$peers/npm"
  cp "$here/package.json" "$here/package-lock.json" "$peers/npm/"
  (cd "$peers/npm" && npm ci --no-audit --no-fund --loglevel=error)
fi

"$peers/mcp-proxy/bin/python" -c 'import importlib.metadata as m; print("mcp-proxy", m.version("mcp-proxy"), "(mcp", m.version("mcp") + ")")'
"$peers/fastmcp/bin/python" -c 'import importlib.metadata as m; print("fastmcp", m.version("fastmcp"), "(mcp", m.version("mcp") + ")")'
node -e 'console.log("supergateway", require(process.argv[1]).version)' "$peers/npm/node_modules/supergateway/package.json"
