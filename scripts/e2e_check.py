#!/usr/bin/env python3
"""Checks what a collector received from the demo, from Rotel's detailed debug log.

usage: e2e_check.py ROTEL_LOG [--quiet]

Parses the spans and metrics Rotel printed (`--debug-log traces --debug-log metrics
--debug-log-verbosity detailed`) and checks the contract of tool-health's telemetry:

* all five metric names arrived with their units and types, every data point names its tool,
  and in every collection of `tool_health.breaker.state` exactly one state per tool reads 1;
* `execute_tool` spans carry `tool_health.gate.decision` (allowed, probe and refused all seen)
  and `tool_health.breaker.state`; every refused span has `error.type=circuit_breaker_open`
  and status Error with the refusal message; failed spans carry their own `error.type`;
* spans carry `tool_health.breaker.transition` events with `tool_health.breaker.from`/`to`,
  closed → open among them;
* the resource says `service.name=tool-health-demo`.

Exit 0 when everything holds; 1 with the list of what failed; 2 when the log holds nothing yet
(the caller polls until then). Standard library only.
"""

import re
import sys

REFUSAL = "tool temporarily unavailable: circuit breaker open"
METRICS = {
    "tool_health.score": ("1", "Gauge"),
    "tool_health.breaker.state": ("1", "Gauge"),
    "tool_health.calls": ("{call}", "Sum"),
    "tool_health.breaker.transitions": ("{transition}", "Sum"),
    "gen_ai.execute_tool.duration": ("s", "Histogram"),
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ATTR = re.compile(r"^\s*-> ([^:]+): (?:Str|Int|Bool|Double)\((.*)\)$")
FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*: (.*)$")


def parse(text):
    """Spans, metric blocks and resource attributes, from the debug log."""
    spans, metrics, resources = [], [], []
    span = metric = point = event = None
    section = None  # which attribute list the "->" lines belong to
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        if line.startswith("Resource attributes:"):
            resources.append({})
            section = "resource"
            span = metric = point = event = None
            continue
        if re.match(r"^Span #\d+", line):
            span = {"attrs": {}, "events": [], "name": None, "status": None, "message": ""}
            spans.append(span)
            section, event, metric, point = None, None, None, None
            continue
        if re.match(r"^Metric #\d+", line):
            metric = {"name": None, "unit": None, "type": None, "points": []}
            metrics.append(metric)
            section, span, event, point = "descriptor", None, None, None
            continue
        if re.match(r"^(Number|Histogram|ExponentialHistogram|Summary)DataPoints #\d+", line):
            point = {"attrs": {}, "value": None, "count": None}
            if metric is not None:
                metric["points"].append(point)
            section = None
            continue
        if line.startswith("Data point attributes:"):
            section = "point"
            continue
        if line.startswith("Attributes:") and span is not None:
            section = "span"
            continue
        if re.match(r"^SpanEvent #\d+", line) and span is not None:
            event = {"name": None, "attrs": {}}
            span["events"].append(event)
            section = "event"
            continue
        if span is not None:
            m = FIELD.match(line)
            if m and m.group(1) in ("Name", "Status code", "Status message"):
                key = {"Name": "name", "Status code": "status", "Status message": "message"}
                if section != "event":
                    span[key[m.group(1)]] = m.group(2).strip()
                    continue
        if section == "event" and event is not None:
            m = re.match(r"^\s*-> Name: (.*)$", line)
            if m:
                event["name"] = m.group(1).strip()
                continue
        if section == "descriptor" and metric is not None:
            m = re.match(r"^\s*-> (Name|Unit|DataType): ?(.*)$", line)
            if m:
                metric[m.group(1).lower().replace("datatype", "type")] = m.group(2).strip()
                continue
        if point is not None:
            m = re.match(r"^(Value|Count): (.*)$", line)
            if m:
                point[m.group(1).lower()] = float(m.group(2))
                continue
        m = ATTR.match(line)
        if m:
            key, value = m.group(1).strip(), m.group(2)
            if section == "resource" and resources:
                resources[-1][key] = value
            elif section == "span" and span is not None:
                span["attrs"][key] = value
            elif section == "event" and event is not None:
                event["attrs"][key] = value
            elif section == "point" and point is not None:
                point["attrs"][key] = value
    return spans, metrics, resources


def check(spans, metrics, resources):
    problems = []

    def expect(ok, what):
        if not ok:
            problems.append(what)

    # Resource
    names = {r.get("service.name") for r in resources}
    expect("tool-health-demo" in names, f"service.name tool-health-demo (saw {sorted(map(str, names))})")

    # Metrics
    seen = {}
    for m in metrics:
        if m["name"] in METRICS:
            seen.setdefault(m["name"], []).append(m)
    for name, (unit, kind) in METRICS.items():
        blocks = seen.get(name, [])
        expect(blocks, f"metric {name} arrived")
        for b in blocks:
            expect(b["unit"] == unit, f"{name}: unit {unit!r} (saw {b['unit']!r})")
            expect(b["type"] == kind, f"{name}: type {kind} (saw {b['type']})")
            for p in b["points"]:
                expect("gen_ai.tool.name" in p["attrs"], f"{name}: a point without gen_ai.tool.name: {p}")
    for b in seen.get("tool_health.breaker.state", []):
        per_tool = {}
        for p in b["points"]:
            tool = p["attrs"].get("gen_ai.tool.name")
            per_tool.setdefault(tool, []).append(p["value"])
        for tool, values in per_tool.items():
            expect(
                sorted(values) == [0.0, 0.0, 1.0],
                f"tool_health.breaker.state: exactly one of three states reads 1 for {tool} (saw {values})",
            )
    refused_counts = [
        p["value"]
        for b in seen.get("tool_health.calls", [])
        for p in b["points"]
        if p["attrs"].get("tool_health.outcome") == "refused"
    ]
    expect(any(v > 0 for v in refused_counts), "tool_health.calls counted refusals")
    expect(
        any(
            "error.type" in p["attrs"]
            for b in seen.get("gen_ai.execute_tool.duration", [])
            for p in b["points"]
        ),
        "gen_ai.execute_tool.duration has failed-call series with error.type",
    )

    # Spans
    tool_spans = [s for s in spans if s["attrs"].get("gen_ai.operation.name") == "execute_tool"]
    expect(tool_spans, "execute_tool spans arrived")
    decisions = {}
    for s in tool_spans:
        d = s["attrs"].get("tool_health.gate.decision")
        decisions[d] = decisions.get(d, 0) + 1
        expect(d in ("allowed", "probe", "refused"), f"span {s['name']}: gate decision {d!r}")
        expect(
            s["attrs"].get("tool_health.breaker.state") in ("closed", "open", "half_open"),
            f"span {s['name']}: tool_health.breaker.state {s['attrs'].get('tool_health.breaker.state')!r}",
        )
        if d == "refused":
            expect(
                s["attrs"].get("error.type") == "circuit_breaker_open",
                f"refused span {s['name']}: error.type=circuit_breaker_open (saw {s['attrs'].get('error.type')!r})",
            )
            expect(s["status"] == "STATUS_CODE_ERROR", f"refused span {s['name']}: status Error (saw {s['status']})")
            expect(s["message"] == REFUSAL, f"refused span {s['name']}: status message (saw {s['message']!r})")
    for d in ("allowed", "probe", "refused"):
        expect(decisions.get(d, 0) > 0, f"a span with tool_health.gate.decision={d} (saw {decisions})")
    failed = [
        s["attrs"].get("error.type")
        for s in tool_spans
        if s["attrs"].get("tool_health.gate.decision") != "refused" and "error.type" in s["attrs"]
    ]
    expect(failed, "failed tool spans carry their own error.type")

    edges = set()
    for s in spans:
        for e in s["events"]:
            if e["name"] == "tool_health.breaker.transition":
                frm = e["attrs"].get("tool_health.breaker.from")
                to = e["attrs"].get("tool_health.breaker.to")
                expect(frm and to, f"transition event with from/to on {s['name']}: {e['attrs']}")
                edges.add((frm, to))
    expect(("closed", "open") in edges, f"a closed → open transition event (saw {sorted(edges)})")

    summary = (
        f"{len(spans)} spans ({len(tool_spans)} execute_tool; decisions {decisions}), "
        f"transition edges {sorted(edges)}, metrics {sorted(seen)}"
    )
    return problems, summary


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        spans, metrics, resources = parse(f.read())
    if not spans and not metrics:
        return 2
    problems, summary = check(spans, metrics, resources)
    quiet = "--quiet" in sys.argv[2:]
    if problems:
        if not quiet:
            print("collector check failed:")
            for p in dict.fromkeys(problems):
                print(f"  - {p}")
            print(f"  ({summary})")
        return 1
    if not quiet:
        print(f"collector check passed: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
