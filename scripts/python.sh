#!/usr/bin/env bash
# The Python package (python/, `tool-health` on PyPI): builds its wheel with maturin (pinned;
# the dev profile and the workspace's target directory, so it reuses the Rust build), installs
# it into a fresh venv with the pinned test dependencies, and runs pytest, mypy --strict (the
# package, its examples and tests) and stubtest (the extension's stub against the module).
#
#   bash scripts/python.sh            build, install, test, type-check
#   bash scripts/python.sh build      only build the wheel (target/python/wheels/) and install
#                                     it into target/python/venv/ (what `maturin develop` does)
#   PYTEST_ARGS="-k trip" bash scripts/python.sh
#
# Framework suites (python/tests/frameworks/) bring their own pins in
# python/tests/frameworks/requirements.txt, installed into the same venv when present.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/target/python"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
export CARGO_PROFILE_DEV_STRIP="${CARGO_PROFILE_DEV_STRIP:-debuginfo}"
MATURIN_VERSION=1.16.0
pip_quiet=(--disable-pip-version-check --quiet)

# maturin, pinned, in a venv of its own (kept between runs).
if ! "$dir/build/bin/maturin" --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION"; then
  echo "python: maturin $MATURIN_VERSION"
  rm -rf "$dir/build"
  python3 -m venv "$dir/build"
  "$dir/build/bin/pip" install "${pip_quiet[@]}" "maturin==$MATURIN_VERSION"
fi

echo "python: building the wheel (maturin, dev profile)"
start=$SECONDS
rm -rf "$dir/wheels"
"$dir/build/bin/maturin" build --quiet --profile dev \
  --manifest-path "$root/python/Cargo.toml" --out "$dir/wheels"
wheel=$(ls "$dir/wheels"/tool_health-*.whl)
echo "python: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built in $((SECONDS - start)) s"

# A fresh venv: the wheel and the pinned test dependencies, nothing else.
rm -rf "$dir/venv"
python3 -m venv "$dir/venv"
py="$dir/venv/bin/python"
"$py" -m pip install "${pip_quiet[@]}" -r "$root/python/requirements-test.txt"
if [ -f "$root/python/tests/frameworks/requirements.txt" ]; then
  "$py" -m pip install "${pip_quiet[@]}" -r "$root/python/tests/frameworks/requirements.txt"
fi
"$py" -m pip install "${pip_quiet[@]}" --no-deps "$wheel"
[ "${1:-}" = "build" ] && exit 0

# The tests import the installed wheel, never the source tree (run from python/tests/).
cd "$root/python/tests"
# shellcheck disable=SC2086
"$py" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} .
cd "$root/python"
echo "python: mypy --strict (the core package, its stub, examples and tests)"
"$py" -m mypy --strict --no-incremental --python-version 3.10 \
  tool_health/__init__.py tool_health/_call.py tool_health/_otel.py tool_health/_types.py \
  tool_health/_core.pyi examples tests/*.py
# From outside the source tree: the installed module against the stub the wheel ships.
echo "python: stubtest (tool_health._core against its .pyi)"
cd "$dir" && "$py" -m mypy.stubtest --concise tool_health._core
