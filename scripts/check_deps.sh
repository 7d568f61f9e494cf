#!/usr/bin/env bash
# The dependency weight of each feature set (issue 14, finding 11), checked from `cargo tree`:
#
# * no feature set pulls a C/cmake-built crypto library (aws-lc-sys, ring, openssl-sys) or cmake,
#   except `fleet-tls`, which needs ring (fred's TLS; FLEET.md says why);
# * `otlp-http` carries no gRPC stack (tonic) and `otlp-grpc` no HTTP client (reqwest);
# * the default build carries neither, nor the OpenTelemetry SDK; `fleet` carries no OTLP stack;
# * the span processors (`span-processor`, `span-processor-sdk-0-32`) carry the SDK and nothing
#   else: no exporter, no transport, no runtime; the span feed (`span-feed`) not even the SDK.
#
# Prints the crate count of each set (the figures in the README come from clean builds).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check_deps: FAIL: $*" >&2; exit 1; }

tree() { # features...
  cargo tree --quiet -p tool-health --edges normal,build --prefix none --no-default-features "$@" |
    sed -E 's/ \(\*\)$//; s/ \(proc-macro\)$//' | awk '{print $1}' | sort -u
}

# Forbidden in every set unless a set says otherwise (fleet-tls: ring, see below).
C_CRYPTO=(aws-lc-sys aws-lc-rs ring openssl-sys cmake)

check() { # name, features..., then forbidden crates after --
  local name=$1; shift
  local features=()
  while [ "$1" != "--" ]; do features+=("$1"); shift; done
  shift
  local crates
  crates=$(tree "${features[@]}")
  for bad in "${C_CRYPTO[@]}" "$@"; do
    if grep -qx "$bad" <<<"$crates"; then
      fail "$name pulls $bad: $(cargo tree --quiet -p tool-health --no-default-features "${features[@]}" -i "$bad" 2>/dev/null | head -5 | tr '\n' ' ')"
    fi
  done
  echo "check_deps: $name: $(wc -l <<<"$crates") crates, none of ${C_CRYPTO[*]} $*"
}

check "no feature" -- tonic reqwest opentelemetry_sdk tokio
check "otlp-http" --features otlp-http -- tonic
check "otlp-grpc" --features otlp-grpc -- reqwest rustls
check "otlp-http + otlp-grpc" --features otlp-http,otlp-grpc --
check "tokio" --features tokio -- tonic reqwest opentelemetry_sdk
check "mcp" --features mcp -- tonic reqwest opentelemetry_sdk
check "fleet" --features fleet -- tonic reqwest opentelemetry_sdk
# The status page: axum with HTTP/1 only, no SDK, no OTLP, no serialisation crates.
check "status" --features status -- tonic reqwest opentelemetry_sdk serde_json
# `/metrics`: the SDK and its Prometheus exporter (no protobuf), still no OTLP stack.
check "prometheus" --features prometheus -- tonic reqwest opentelemetry-otlp protobuf serde_json
# The span feed (the Python package's processor feeds it): no SDK, no runtime, nothing new.
check "span-feed" --features span-feed -- tonic reqwest opentelemetry_sdk tokio
# The span processors: the SDK they plug into, no exporter, no transport.
check "span-processor" --features span-processor -- tonic reqwest opentelemetry-otlp tokio
check "span-processor-sdk-0-32" --features span-processor-sdk-0-32 -- tonic reqwest opentelemetry-otlp tokio
# The OTLP receiver: axum, tonic's server, reqwest (forwarding); it reads OTLP in place, so no
# exporter and no generated protobuf types.
check "receiver" --features receiver -- opentelemetry-otlp opentelemetry-proto prost-build
# fred's TLS code exists only behind one of its rustls features, each of which compiles a
# C-backed provider; ring (a C compiler, no cmake) is the lighter one and the only one allowed
# (FLEET.md, "TLS"). Nothing else C-backed, and no OTLP stack.
C_CRYPTO=(aws-lc-sys aws-lc-rs openssl-sys cmake)
check "fleet-tls" --features fleet-tls -- tonic reqwest opentelemetry_sdk

# The demo's default build (issue 26: ≤ 130 crates) has no web server: the status page is the
# demo feature `status`.
demo=$(cargo tree --quiet -p tool-health-demo --edges normal,build --prefix none |
  sed -E 's/ \(\*\)$//; s/ \(proc-macro\)$//' | awk '{print $1}' | sort -u)
grep -qx axum <<<"$demo" && fail "the demo's default build pulls axum"
[ "$(wc -l <<<"$demo")" -le 130 ] || fail "the demo's default build has $(wc -l <<<"$demo") crates (> 130)"
echo "check_deps: demo (default): $(wc -l <<<"$demo") crates, no axum"
