#!/usr/bin/env bash
# Installs the real agent frameworks the receiver's agent tests run (tests/agents/), pinned, into
# target/agents/ (no network at test time; packages come from PyPI and npm here):
#
#   target/agents/venv/   python venv: tests/agents/python/requirements.txt (Pydantic AI,
#                         LangChain + OpenInference, the OTel Python SDK and its OTLP/HTTP exporter)
#   target/agents/ts/     npm ci of tests/agents/ts/package-lock.json (the Vercel AI SDK 6, the OTel
#                         Node SDK and its OTLP/HTTP protobuf exporter)
#   target/agents/rotel/  python venv with rotel (the next collector of the forwarding test and the
#                         ingest bench's baseline)
#
# Idempotent: a part already installed with the same pins is kept. Exit status non-zero when a
# part could not be installed (the tests then say which program is missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/target/agents"
ROTEL_VERSION="${ROTEL_VERSION:-0.0.1a15}"
mkdir -p "$dir"
status=0

req="$root/tests/agents/python/requirements.txt"
stamp="$dir/venv/.pins"
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
  echo "agents: python venv (pydantic-ai-slim, langchain, openinference, opentelemetry-sdk)"
  { python3 -m venv "$dir/venv" &&
    "$dir/venv/bin/pip" install --disable-pip-version-check --quiet -r "$req" > "$dir/pip.log" 2>&1 &&
    cp "$req" "$stamp"; } || { echo "agents: pip install failed, see $dir/pip.log"; status=1; }
fi

lock="$root/tests/agents/ts/package-lock.json"
if ! cmp -s "$lock" "$dir/ts/package-lock.json" 2>/dev/null || [ ! -d "$dir/ts/node_modules" ]; then
  echo "agents: npm ci (ai 6, @opentelemetry/sdk-trace-node, exporter-trace-otlp-proto)"
  mkdir -p "$dir/ts"
  cp "$root/tests/agents/ts/package.json" "$lock" "$dir/ts/"
  (cd "$dir/ts" && npm ci --no-audit --no-fund --loglevel=error > "$dir/npm.log" 2>&1) ||
    { echo "agents: npm ci failed, see $dir/npm.log"; status=1; }
fi

if [ ! -x "$dir/rotel/bin/python" ] ||
   ! "$dir/rotel/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('rotel') != '$ROTEL_VERSION')" 2>/dev/null; then
  echo "agents: rotel $ROTEL_VERSION"
  { python3 -m venv "$dir/rotel" &&
    "$dir/rotel/bin/pip" install --disable-pip-version-check --quiet "rotel==$ROTEL_VERSION" > "$dir/rotel-pip.log" 2>&1; } ||
    { echo "agents: pip install rotel failed, see $dir/rotel-pip.log"; status=1; }
fi
exit "$status"
