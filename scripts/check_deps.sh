#!/usr/bin/env bash
# The dependency weight of each feature set (issue 14, finding 11), checked from `cargo tree`:
#
# * no feature set pulls a C/cmake-built crypto library (aws-lc-sys, ring, openssl-sys) or cmake;
# * `otlp-http` carries no gRPC stack (tonic) and `otlp-grpc` no HTTP client (reqwest);
# * the default build carries neither, nor the OpenTelemetry SDK.
#
# Prints the crate count of each set (the figures in the README come from clean builds).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check_deps: FAIL: $*" >&2; exit 1; }

tree() { # features...
  cargo tree --quiet -p tool-health --edges normal,build --prefix none --no-default-features "$@" |
    sed -E 's/ \(\*\)$//; s/ \(proc-macro\)$//' | awk '{print $1}' | sort -u
}

check() { # name, features..., then forbidden crates after --
  local name=$1; shift
  local features=()
  while [ "$1" != "--" ]; do features+=("$1"); shift; done
  shift
  local crates
  crates=$(tree "${features[@]}")
  for bad in aws-lc-sys aws-lc-rs ring openssl-sys cmake "$@"; do
    if grep -qx "$bad" <<<"$crates"; then
      fail "$name pulls $bad: $(cargo tree --quiet -p tool-health --no-default-features "${features[@]}" -i "$bad" 2>/dev/null | head -5 | tr '\n' ' ')"
    fi
  done
  echo "check_deps: $name: $(wc -l <<<"$crates") crates, none of aws-lc-sys ring openssl-sys cmake $*"
}

check "no feature" -- tonic reqwest opentelemetry_sdk tokio
check "otlp-http" --features otlp-http -- tonic
check "otlp-grpc" --features otlp-grpc -- reqwest rustls
check "otlp-http + otlp-grpc" --features otlp-http,otlp-grpc --
check "tokio" --features tokio -- tonic reqwest opentelemetry_sdk
check "mcp" --features mcp -- tonic reqwest opentelemetry_sdk
