#!/usr/bin/env python3
"""Prints the goal ratios of BENCHMARKS.md from criterion's results in target/criterion.

Run after `cargo bench` (all bench files, or some: missing figures print as n/a). Every ratio
uses criterion's median estimate of each benchmark, all from the same run.
"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "criterion")


def median_ns(bench):
    path = os.path.join(ROOT, *bench.split("/"), "new", "estimates.json")
    try:
        with open(path) as f:
            return json.load(f)["median"]["point_estimate"]
    except OSError:
        return None


def fmt_ns(ns):
    if ns is None:
        return "n/a"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def row(goal, what, value, target, ok=None):
    v = "n/a" if value is None else f"{value:.2f}"
    if value is None:
        verdict = "n/a"
    elif ok is None:
        verdict = "—"
    else:
        verdict = "met" if ok(value) else "NOT met"
    print(f"| {goal} | {what} | {v} | {target} | {verdict} |")


def main():
    m = {}
    names = [
        "closed/floor", "closed/recloser", "closed/failsafe", "closed/ours_by_name",
        "closed/ours_by_name_permit", "closed/ours_handle", "closed/ours_handle_permit",
        "open/ours_by_name_refused", "open/ours_handle_refused",
        "open/ours_by_name_refused_manual_clock", "open/recloser_refused",
        "open/system_clock_now",
        "tool_span/bare", "tool_span/noop_layer", "tool_span/ours", "tool_span/otel",
        "tool_span/both", "other_span/bare", "other_span/noop_layer", "other_span/ours",
        "scale/hot_tool/1", "scale/hot_tool/1000", "scale/hot_tool/100000",
        "scale/round_robin/1", "scale/round_robin/1000", "scale/round_robin/100000",
        "collect_10k/health_summary", "collect_10k/metrics_collection",
        "contention/reference_one_thread", "contention/reference_two_threads",
        "contention/one_thread", "contention/two_threads_same_tool",
        "contention/two_threads_two_tools",
    ]
    print("| benchmark | median |")
    print("|---|---|")
    for n in names:
        m[n] = median_ns(n)
        print(f"| `{n}` | {fmt_ns(m[n])} |")
    print()
    print("| goal | ratio | value | target | verdict |")
    print("|---|---|---|---|---|")
    g = m.get
    row(1, "by name / recloser", ratio(g("closed/ours_by_name"), g("closed/recloser")), "≤ 1.0", lambda v: v <= 1.0)
    row(1, "by name, permit path / recloser", ratio(g("closed/ours_by_name_permit"), g("closed/recloser")), "(info)")
    row(1, "handle / floor", ratio(g("closed/ours_handle"), g("closed/floor")), "≤ 1.5", lambda v: v <= 1.5)
    row(1, "handle, permit path / floor", ratio(g("closed/ours_handle_permit"), g("closed/floor")), "≤ 1.5", lambda v: v <= 1.5)
    row(1, "failsafe / recloser", ratio(g("closed/failsafe"), g("closed/recloser")), "(info)")
    row(2, "refusal by name / closed by name", ratio(g("open/ours_by_name_refused"), g("closed/ours_by_name")), "≤ 0.5", lambda v: v <= 0.5)
    row(2, "refusal by handle / closed by handle", ratio(g("open/ours_handle_refused"), g("closed/ours_handle")), "(info)")
    row(2, "refusal by name, manual clock / closed by name", ratio(g("open/ours_by_name_refused_manual_clock"), g("closed/ours_by_name")), "(bound)")
    row(2, "system clock read / closed by name", ratio(g("open/system_clock_now"), g("closed/ours_by_name")), "(bound)")
    added = lambda x: None if g(x) is None or g("tool_span/noop_layer") is None else g(x) - g("tool_span/noop_layer")
    row(3, "ours added / otel added", ratio(added("tool_span/ours"), added("tool_span/otel")), "≤ 0.5", lambda v: v <= 0.5)
    row(3, "both added / otel added", ratio(added("tool_span/both"), added("tool_span/otel")), "(info)")
    row(3, "non-tool span: ours / no-op layer", ratio(g("other_span/ours"), g("other_span/noop_layer")), "≤ 1.05", lambda v: v <= 1.05)
    row(4, "hot tool, 100,000 / 1 tracked", ratio(g("scale/hot_tool/100000"), g("scale/hot_tool/1")), "≤ 2.0", lambda v: v <= 2.0)
    row(4, "hot tool, 1,000 / 1 tracked", ratio(g("scale/hot_tool/1000"), g("scale/hot_tool/1")), "(info)")
    row(4, "round robin over 100,000 / 1 tracked", ratio(g("scale/round_robin/100000"), g("scale/hot_tool/1")), "(info; ≤ 2.0)", lambda v: v <= 2.0)
    mc = g("collect_10k/metrics_collection")
    row(4, "metrics collection at 10,000 tools, ms", None if mc is None else mc / 1e6, "≤ 10", lambda v: v <= 10)
    hs = g("collect_10k/health_summary")
    row(4, "health_summary at 10,000 tools, ms", None if hs is None else hs / 1e6, "(info)")
    row(5, "throughput, 2 threads on 2 tools / 1 thread", ratio(g("contention/one_thread"), g("contention/two_threads_two_tools")), "≥ 1.6", lambda v: v >= 1.6)
    row(5, "throughput, 2 threads on 1 tool / 1 thread", ratio(g("contention/one_thread"), g("contention/two_threads_same_tool")), "≥ 1.0", lambda v: v >= 1.0)
    row(5, "machine reference: 2 threads / 1 thread", ratio(g("contention/reference_one_thread"), g("contention/reference_two_threads")), "(bound)")


if __name__ == "__main__":
    sys.exit(main())
