#!/usr/bin/env python3
"""A real Prometheus against the demo's /metrics (scripts/status_e2e.sh starts them both).

    status_prometheus_check.py PROMETHEUS_URL DASHBOARDS_DIR VALKEY_PID

Checks, through Prometheus's HTTP API, with bounded waits:
  1. the demo is scraped (target up);
  2. ToolBreakerOpenTooLong — the expression of dashboards/alerts.yml, `for` shortened by the
     e2e rule file — fires for the sick tool (sql_query) and for no other tool;
  3. every query of every dashboard panel returns data (variables substituted: $job = .+,
     $tool = sql_query, $__rate_interval = 15s);
  4. FleetReplicaDisconnected fires once the fleet's Valkey is killed.
The last line is "N passed, M failed".
"""
import json
import os
import signal
import sys
import time
import urllib.parse
import urllib.request

PROM, DASHBOARDS, VALKEY_PID = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3])
WAIT = 90  # seconds, every bounded wait
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)


def query(expr):
    url = PROM + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def wait_for(what, fn, seconds=WAIT):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not yet (Prometheus starting, no sample yet)
            last = e
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {seconds} s (last: {last})")


def firing(alert):
    return {
        r["metric"].get("gen_ai_tool_name", r["metric"].get("instance"))
        for r in query(f'ALERTS{{alertname="{alert}", alertstate="firing"}}')
    }


try:
    wait_for("the demo scraped", lambda: any(r["value"][1] == "1" for r in query('up{job="demo"}')))
    check("Prometheus scrapes the demo's /metrics", True)

    tools = wait_for("ToolBreakerOpenTooLong firing", lambda: firing("ToolBreakerOpenTooLong"))
    check("ToolBreakerOpenTooLong fires for the sick tool", tools == {"sql_query"}, str(sorted(tools)))
    # Over the whole run so far: no other tool ever fired (weather_api is forced open for less
    # than the shortened `for`).
    ever = {
        r["metric"]["gen_ai_tool_name"]
        for r in query('max_over_time(ALERTS{alertname="ToolBreakerOpenTooLong", alertstate="firing"}[10m])')
    }
    check("ToolBreakerOpenTooLong fires for no other tool", ever == {"sql_query"}, str(sorted(ever)))

    # Let every series have a few scrapes and the sick tool its whole episode.
    time.sleep(5)
    subst = {"$__rate_interval": "15s", "${datasource}": "", "$job": ".+", "$tool": "sql_query"}
    empty, count = [], 0
    for name in sorted(os.listdir(DASHBOARDS)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
            dashboard = json.load(f)
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for k, v in subst.items():
                    expr = expr.replace(k, v)
                count += 1
                try:
                    result = wait_for(f"{name} / {panel['title']}", lambda: query(expr), seconds=20)
                except Exception as e:
                    empty.append(f"{name} / {panel['title']} / {target['refId']}: {expr} ({e})")
                    continue
                if not result:
                    empty.append(f"{name} / {panel['title']}: {expr}")
    check(f"every dashboard query answers with data ({count} queries)", not empty, "; ".join(empty))

    # The store goes away: the replica reports itself disconnected and the alert fires.
    os.kill(VALKEY_PID, signal.SIGKILL)
    replicas = wait_for("FleetReplicaDisconnected firing", lambda: firing("FleetReplicaDisconnected"))
    check("FleetReplicaDisconnected fires once the store is gone", len(replicas) == 1, str(sorted(replicas)))
except Exception as e:
    check("the Prometheus run", False, repr(e))

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if all(results) else 1)
