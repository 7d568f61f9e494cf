#!/usr/bin/env bash
# Builds the gateway's PyPI wheel (gateway/pyproject.toml: maturin's `bin` bindings, the
# `tool-health-gateway` binary and its metadata, nothing else) into
# ${CARGO_TARGET_DIR:-target}/wheel/dist/ (emptied first: one wheel there), and prints its path.
# The packaging tools are pinned in a venv at ${CARGO_TARGET_DIR:-target}/wheel/tools/: maturin
# builds; uv and pipx are what gateway/tests/packaging/ installs the wheel with, as users do.
#
#   bash scripts/wheel.sh             # dev profile, the workspace's target directory (CI)
#   bash scripts/wheel.sh --release   # the wheel to publish: the same recipe, optimised
#
# CI builds the dev wheel: it reuses the workspace's build, where a release build of the
# gateway takes about 20 minutes on 2 cores. Either wheel is tagged for the glibc it was built
# against (manylinux_2_X from the symbols the binary uses; docs/gateway.md, "Install").
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN=1.16.0
UV=0.13.8
PIPX=1.18.4
TARGET="${CARGO_TARGET_DIR:-target}"
TOOLS="$TARGET/wheel/tools"
DIST="$TARGET/wheel/dist"

profile=(--profile dev)
case "${1:-}" in
  "") ;;
  --release) profile=(--release) ;;
  *) echo "wheel.sh: unknown argument ${1} (none, or --release)" >&2; exit 2 ;;
esac

if ! "$TOOLS/bin/python" - "$MATURIN" "$UV" "$PIPX" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
want = dict(zip(["maturin", "uv", "pipx"], sys.argv[1:]))
sys.exit(any(m.version(name) != version for name, version in want.items()))
EOF
then
  echo "wheel.sh: installing maturin $MATURIN, uv $UV, pipx $PIPX into $TOOLS" >&2
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check \
    "maturin==$MATURIN" "uv==$UV" "pipx==$PIPX"
fi

rm -rf "$DIST"
# maturin runs `cargo build` for the binary with the settings of this shell (the profile's
# environment overrides, CARGO_TARGET_DIR) and the workspace's Cargo.lock.
"$TOOLS/bin/maturin" build --quiet --locked -m gateway/Cargo.toml "${profile[@]}" \
  --target-dir "$TARGET" --out "$DIST" >&2
wheel=$(ls "$DIST"/tool_health_gateway-*.whl)
echo "wheel.sh: $(du -k "$wheel" | cut -f1) KiB $(basename "$wheel")" >&2
echo "$wheel"
