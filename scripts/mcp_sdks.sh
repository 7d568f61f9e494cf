#!/usr/bin/env bash
# Installs the official MCP SDK servers the integration tests run (integrations/tests/mcp_sdk/),
# pinned, when they are missing; starts nothing:
#
# * Python: a venv at ${CARGO_TARGET_DIR:-target}/mcp/venv with integrations/servers/python/
#   requirements.txt (PyPI `mcp` 2.3.0 and every dependency pinned);
# * Python, the SDK's 1.x line: a venv at ${CARGO_TARGET_DIR:-target}/mcp/venv1 with
#   integrations/servers/python-1/requirements.txt (`mcp` 1.30.0, the handshake era only: the
#   gateway's tests run the same server.py on it);
# * TypeScript: `npm ci` in integrations/servers/typescript (the committed package-lock.json:
#   @modelcontextprotocol/sdk 1.32.2 and 1.20.2, zod 4.6.7 and 3.25.76) into its node_modules/,
#   which git ignores. Needs Node 18 or later on the PATH;
# * the TypeScript SDK 2.x: `npm ci` in integrations/servers/typescript-2 (its committed
#   package-lock.json: @modelcontextprotocol/server and @modelcontextprotocol/client 2.4.0,
#   MCP 2026-07-28 on both sides; the gateway's protocol tests). Needs Node 20 or later;
# * the reference servers `@modelcontextprotocol/server-everything` and
#   `@modelcontextprotocol/server-filesystem` 2026.8.31 (`npm ci` in
#   integrations/servers/everything: server-everything exercises every feature — the gateway's
#   progress, pass-through and relay tests; over streamable HTTP, its reconnection tests —
#   and both are what the pass-through comparison surveys, directly and through the gateway).
#
#   bash scripts/mcp_sdks.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${CARGO_TARGET_DIR:-target}/mcp/venv"
REQUIREMENTS=integrations/servers/python/requirements.txt
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' 2>/dev/null; then
  echo "mcp_sdks.sh: installing the Python MCP SDK into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
fi

VENV1="${CARGO_TARGET_DIR:-target}/mcp/venv1"
if ! "$VENV1/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "1.30.0"' 2>/dev/null; then
  echo "mcp_sdks.sh: installing the Python MCP SDK 1.x into $VENV1" >&2
  python3 -m venv "$VENV1"
  "$VENV1/bin/pip" install --quiet --disable-pip-version-check -r integrations/servers/python-1/requirements.txt
fi

TS=integrations/servers/typescript
if ! node -e 'const v = require("./'"$TS"'/node_modules/@modelcontextprotocol/sdk/package.json").version; const o = require("./'"$TS"'/node_modules/sdk-1-20/package.json").version; process.exit(v === "1.32.2" && o === "1.20.2" ? 0 : 1)' 2>/dev/null; then
  echo "mcp_sdks.sh: installing the TypeScript MCP SDK into $TS/node_modules" >&2
  (cd "$TS" && npm ci --no-audit --no-fund --loglevel=error)
fi
TS2=integrations/servers/typescript-2
if ! node -e 'const s = require("./'"$TS2"'/node_modules/@modelcontextprotocol/server/package.json").version; const c = require("./'"$TS2"'/node_modules/@modelcontextprotocol/client/package.json").version; process.exit(s === "2.4.0" && c === "2.4.0" ? 0 : 1)' 2>/dev/null; then
  echo "mcp_sdks.sh: installing the TypeScript MCP SDK 2.x into $TS2/node_modules" >&2
  (cd "$TS2" && npm ci --no-audit --no-fund --loglevel=error)
fi
EVERYTHING=integrations/servers/everything
if ! node -e 'const m = "./'"$EVERYTHING"'/node_modules/@modelcontextprotocol/"; process.exit(require(m + "server-everything/package.json").version === "2026.8.31" && require(m + "server-filesystem/package.json").version === "2026.8.31" ? 0 : 1)' 2>/dev/null; then
  echo "mcp_sdks.sh: installing server-everything and server-filesystem into $EVERYTHING/node_modules" >&2
  (cd "$EVERYTHING" && npm ci --no-audit --no-fund --loglevel=error)
fi
"$VENV/bin/python" -c 'import importlib.metadata as m; print("python mcp", m.version("mcp"))'
"$VENV1/bin/python" -c 'import importlib.metadata as m; print("python mcp (1.x)", m.version("mcp"))'
node -e 'console.log("typescript sdk", require("./'"$TS"'/node_modules/@modelcontextprotocol/sdk/package.json").version, "and", require("./'"$TS"'/node_modules/sdk-1-20/package.json").version, "; typescript sdk 2.x server", require("./'"$TS2"'/node_modules/@modelcontextprotocol/server/package.json").version, "client", require("./'"$TS2"'/node_modules/@modelcontextprotocol/client/package.json").version, "; server-everything", require("./'"$EVERYTHING"'/node_modules/@modelcontextprotocol/server-everything/package.json").version, "; server-filesystem", require("./'"$EVERYTHING"'/node_modules/@modelcontextprotocol/server-filesystem/package.json").version)'
