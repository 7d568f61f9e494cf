#!/usr/bin/env bash
# The status page, the dashboards and the alert rules, each against the real thing (issue 24):
#
#   1. the dashboards are what dashboards/generate.py writes, and valid against Grafana's
#      published schema (@grafana/schema, pinned in tests/web/package-lock.json);
#   2. `promtool test rules`: every alert rule fires and stays silent where it should;
#   3. a real Prometheus (Debian's `prometheus`, on 127.0.0.1) scrapes the demo's /metrics (the
#      demo a fleet replica on a local Valkey): the "open too long" alert fires for the sick
#      tool only, every dashboard query answers, and the "replica disconnected" alert fires
#      once Valkey is killed (scripts/status_prometheus_check.py);
#   4. Debian's Chromium, headless, opens the demo's page (tests/web/status-page.mjs).
#
# Installs what it needs when missing (apt: prometheus, chromium; npm ci into tests/web/). A
# part whose program cannot be had is reported *ignored* with the reason, and fails the run
# under CI=true. Every process it starts listens on 127.0.0.1 and is killed on exit.
#
#   bash scripts/status_e2e.sh            # CARGO_TARGET_DIR is honoured
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}"
OUT="$TARGET/status-e2e"
mkdir -p "$OUT"
passed=0; failed=0; ignored=0
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

ignore() { # reason
  if [ "${CI:-}" = "true" ]; then echo "status_e2e: FAIL (CI=true): $1" >&2; exit 1; fi
  echo "status_e2e: ignored: $1"; ignored=$((ignored + 1))
}
result() { # name, status
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "status_e2e: ok   $1"
  else failed=$((failed + 1)); echo "status_e2e: FAIL $1"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { # url, seconds
  local deadline=$((SECONDS + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1; sleep 0.2
  done
}

# What to install, when it can be.
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "status_e2e: installing ${need[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  { $sudo_cmd apt-get update -qq && $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$OUT/apt.log" 2>&1 ||
    echo "status_e2e: could not install ${need[*]} (see $OUT/apt.log)"
fi
have_node=0
if command -v npm >/dev/null && command -v node >/dev/null; then
  if npm ci --prefix tests/web --no-audit --no-fund --loglevel=error >"$OUT/npm.log" 2>&1; then have_node=1
  else echo "status_e2e: npm ci failed (see $OUT/npm.log)"; fi
fi

# 1. Dashboards.
python3 dashboards/generate.py --check; result "dashboards are generate.py's output" $?
if [ $have_node = 1 ]; then
  set +e; node tests/web/check-dashboards.mjs; s=$?; set -e
  result "dashboards valid against @grafana/schema" $s
else
  ignore "the dashboards' schema check needs node and npm (tests/web)"
fi

# 2. Alert rules.
if command -v promtool >/dev/null; then
  set +e; promtool check rules dashboards/alerts.yml && promtool test rules dashboards/alerts.test.yml; s=$?; set -e
  result "promtool test rules" $s
else
  ignore "promtool (Debian's prometheus package) is not installed"
fi

# The demo with the page, /metrics and fleet mode (built by `cargo test --workspace
# --all-features` already in CI: this reuses it).
cargo build --quiet -p tool-health-demo --all-features --example agent
DEMO="$TARGET/debug/examples/agent"

# 3. A real Prometheus scraping the demo.
if command -v prometheus >/dev/null; then
  VALKEY=$(bash scripts/valkey.sh)
  vport=$(free_port); dport=$(free_port); pport=$(free_port)
  "$VALKEY" --bind 127.0.0.1 --port "$vport" --save '' --appendonly no >"$OUT/valkey.log" 2>&1 &
  valkey_pid=$!; pids+=("$valkey_pid")
  "$DEMO" --status "127.0.0.1:$dport" --fleet "redis://127.0.0.1:$vport" --markup-tool \
    --seconds 45 --linger 120 >"$OUT/demo-prometheus.log" 2>&1 &
  pids+=("$!")
  # The rules as shipped, with the `for` of the two alerts this run waits for shortened.
  sed -e 's/for: 10m/for: 12s/' -e 's/for: 2m/for: 3s/' dashboards/alerts.yml >"$OUT/e2e-rules.yml"
  cat >"$OUT/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - e2e-rules.yml
scrape_configs:
  - job_name: demo
    static_configs:
      - targets: ["127.0.0.1:$dport"]
EOF
  rm -rf "$OUT/prometheus-data"
  prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/prometheus-data" \
    --web.listen-address="127.0.0.1:$pport" >"$OUT/prometheus.log" 2>&1 &
  pids+=("$!")
  if wait_http "http://127.0.0.1:$pport/-/ready" 60 && wait_http "http://127.0.0.1:$dport/metrics" 60; then
    set +e; python3 scripts/status_prometheus_check.py "http://127.0.0.1:$pport" dashboards "$valkey_pid"; s=$?; set -e
    result "a real Prometheus scrapes the demo: alerts fire, every dashboard query answers" $s
  else
    tail -20 "$OUT/prometheus.log" "$OUT/demo-prometheus.log"; result "Prometheus and the demo start" 1
  fi
  cleanup; pids=()
else
  ignore "prometheus (Debian's package) is not installed"
fi

# 4. The page in a real browser.
if [ $have_node = 1 ] && command -v chromium >/dev/null; then
  set +e; node tests/web/status-page.mjs "$DEMO" "$(command -v chromium)"; s=$?; set -e
  result "the page in Chromium (screenshots in $OUT)" $s
else
  ignore "the browser test needs node, npm and chromium (Debian's package)"
fi

echo "status_e2e: $passed passed, $failed failed, $ignored ignored"
[ $failed -eq 0 ]
