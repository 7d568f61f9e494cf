#!/usr/bin/env python3
"""Prints the goal ratios of BENCHMARKS.md from criterion's results in target/criterion.

    python3 benches/ratios.py                    # this run: every median, every ratio
    python3 benches/ratios.py --record runs.jsonl   # the same, and append the run to a file
    python3 benches/ratios.py --summary runs.jsonl  # median (min–max) of each ratio over runs

Run after `cargo bench` (all bench files, or some: missing figures print as n/a). Every ratio
divides criterion's median estimates of two benchmarks of the same run.
"""
import json
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "criterion")

BENCHES = [
    "closed/floor", "closed/recloser", "closed/failsafe", "closed/ours_by_name",
    "closed/ours_by_name_permit", "closed/ours_handle", "closed/ours_handle_permit",
    "open/ours_by_name_refused", "open/ours_handle_refused",
    "open/ours_by_name_refused_manual_clock", "open/recloser_refused", "open/system_clock_now",
    "open/system_clock_now_coarse",
    "tool_span/bare", "tool_span/noop_layer", "tool_span/ours", "tool_span/otel",
    "tool_span/both", "other_span/bare", "other_span/noop_layer", "other_span/ours",
    "other_span/noop_layer_during_tool_call", "other_span/ours_during_tool_call",
    "rig_span/noop_layer", "rig_span/ours", "rig_span/otel", "rig_span/both",
    "scale/hot_tool/1", "scale/hot_tool/1000", "scale/hot_tool/100000",
    "scale/round_robin/1", "scale/round_robin/1000", "scale/round_robin/100000",
    "collect_10k/health_summary", "collect_10k/metrics_collection",
    "collect_10k/sdk_floor_same_series", "collect_500/metrics_collection",
    "collect_500/sdk_floor_same_series",
    "contention/reference_one_thread", "contention/reference_two_threads",
    "contention/one_thread", "contention/two_threads_same_tool",
    "contention/two_threads_two_tools",
    "status_10k/health_summary", "status_10k/tools_json_all", "status_10k/tools_json_first_page",
    "status_events/record_plain", "status_events/record_slow_client",
    "status_events/stream_1000_transitions",
]


def median_ns(bench):
    path = os.path.join(ROOT, *bench.split("/"), "new", "estimates.json")
    try:
        with open(path) as f:
            return json.load(f)["median"]["point_estimate"]
    except OSError:
        return None


def div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def sub(a, b):
    return None if a is None or b is None else a - b


def ratios(m):
    """(goal, what, value, target, check or None) for every row of the goal table."""
    g = m.get
    ms = lambda x: None if x is None else x / 1e6
    return [
        (1, "by name / recloser", div(g("closed/ours_by_name"), g("closed/recloser")), "≤ 1.0", lambda v: v <= 1.0),
        (1, "by name, permit path / recloser", div(g("closed/ours_by_name_permit"), g("closed/recloser")), "≤ 1.0", lambda v: v <= 1.0),
        (1, "handle / floor", div(g("closed/ours_handle"), g("closed/floor")), "≤ 1.5", lambda v: v <= 1.5),
        (1, "handle, permit path / floor", div(g("closed/ours_handle_permit"), g("closed/floor")), "≤ 1.5", lambda v: v <= 1.5),
        (1, "failsafe / recloser", div(g("closed/failsafe"), g("closed/recloser")), "info", None),
        (2, "refusal by name / closed by name", div(g("open/ours_by_name_refused"), g("closed/ours_by_name")), "≤ 0.5", lambda v: v <= 0.5),
        (2, "refusal by handle / closed by handle", div(g("open/ours_handle_refused"), g("closed/ours_handle")), "≤ 0.5", lambda v: v <= 0.5),
        (2, "refusal by name, manual clock / closed by name", div(g("open/ours_by_name_refused_manual_clock"), g("closed/ours_by_name")), "bound", None),
        (2, "one system clock read / closed by name", div(g("open/system_clock_now"), g("closed/ours_by_name")), "bound", None),
        (3, "ours added / otel added", div(sub(g("tool_span/ours"), g("tool_span/noop_layer")), sub(g("tool_span/otel"), g("tool_span/noop_layer"))), "≤ 0.5", lambda v: v <= 0.5),
        (3, "both added / otel added", div(sub(g("tool_span/both"), g("tool_span/noop_layer")), sub(g("tool_span/otel"), g("tool_span/noop_layer"))), "info", None),
        (3, "rig's span shape (fields recorded later): ours added / otel added", div(sub(g("rig_span/ours"), g("rig_span/noop_layer")), sub(g("rig_span/otel"), g("rig_span/noop_layer"))), "≤ 0.5", lambda v: v <= 0.5),
        (3, "non-tool span: ours / no-op layer", div(g("other_span/ours"), g("other_span/noop_layer")), "≤ 1.05", lambda v: v <= 1.05),
        (3, "non-tool span during a tool call: ours / no-op layer", div(g("other_span/ours_during_tool_call"), g("other_span/noop_layer_during_tool_call")), "≤ 1.05", lambda v: v <= 1.05),
        (4, "hot tool: 100,000 / 1 tracked", div(g("scale/hot_tool/100000"), g("scale/hot_tool/1")), "≤ 2.0", lambda v: v <= 2.0),
        (4, "hot tool: 1,000 / 1 tracked", div(g("scale/hot_tool/1000"), g("scale/hot_tool/1")), "info", None),
        (4, "round robin over 100,000 / hot tool, 1 tracked", div(g("scale/round_robin/100000"), g("scale/hot_tool/1")), "info", None),
        (4, "metrics collection at 10,000 tools / the SDK's floor for the same series", div(g("collect_10k/metrics_collection"), g("collect_10k/sdk_floor_same_series")), "≤ 1.0", lambda v: v <= 1.0),
        (5, "status: /tools JSON of 10,000 tools (ms)", ms(g("status_10k/tools_json_all")), "≤ 50", lambda v: v <= 50),
        (5, "status: /tools JSON of 10,000 tools / health_summary of them", div(g("status_10k/tools_json_all"), g("status_10k/health_summary")), "info", None),
        (5, "status: first page (100 of 10,000) (ms)", ms(g("status_10k/tools_json_first_page")), "info", None),
        (5, "status: 1,000 transitions through the stream (ms; goal ≤ 1000: keeps up with 1,000/s)", ms(g("status_events/stream_1000_transitions")), "≤ 1000", lambda v: v <= 1000),
        (5, "status: recording with a stalled client / without a status router", div(g("status_events/record_slow_client"), g("status_events/record_plain")), "info", None),
        (4, "metrics collection at 500 tools (ms)", ms(g("collect_500/metrics_collection")), "≤ 10", lambda v: v <= 10),
        (4, "metrics collection at 500 tools / the SDK's floor for the same series", div(g("collect_500/metrics_collection"), g("collect_500/sdk_floor_same_series")), "info", None),
        (4, "metrics collection at 10,000 tools (ms)", ms(g("collect_10k/metrics_collection")), "info", None),
        (4, "health_summary at 10,000 tools (ms)", ms(g("collect_10k/health_summary")), "info", None),
        (5, "throughput: 2 threads, 2 tools / 1 thread", div(g("contention/one_thread"), g("contention/two_threads_two_tools")), "≥ 1.6", lambda v: v >= 1.6),
        (5, "throughput: 2 threads, 1 tool / 1 thread", div(g("contention/one_thread"), g("contention/two_threads_same_tool")), "≥ 1.0", lambda v: v >= 1.0),
        (5, "machine reference: 2 threads / 1 thread", div(g("contention/reference_one_thread"), g("contention/reference_two_threads")), "bound", None),
    ]


def verdict(value, check):
    if value is None:
        return "n/a"
    if check is None:
        return "—"
    return "met" if check(value) else "**not met**"


def fmt_ns(ns):
    if ns is None:
        return "n/a"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"


def this_run(record):
    m = {b: median_ns(b) for b in BENCHES}
    print("| benchmark | median |")
    print("|---|---|")
    for b in BENCHES:
        print(f"| `{b}` | {fmt_ns(m[b])} |")
    print()
    print("| goal | ratio | value | target | verdict |")
    print("|---|---|---|---|---|")
    rows = ratios(m)
    for goal, what, value, target, check in rows:
        v = "n/a" if value is None else f"{value:.2f}"
        print(f"| {goal} | {what} | {v} | {target} | {verdict(value, check)} |")
    if record:
        with open(record, "a") as f:
            f.write(json.dumps({"medians_ns": m}) + "\n")


def summary(path):
    runs = [json.loads(line)["medians_ns"] for line in open(path) if line.strip()]
    print(f"{len(runs)} runs. Each cell: median of the per-run values (min – max).\n")
    print("| benchmark | median ns over runs (min – max) |")
    print("|---|---|")
    for b in BENCHES:
        vs = [r[b] for r in runs if r.get(b) is not None]
        if vs:
            print(f"| `{b}` | {fmt_ns(statistics.median(vs))} ({fmt_ns(min(vs))} – {fmt_ns(max(vs))}) |")
    print()
    print("| goal | ratio | median (min – max) | target | verdict on the median | runs meeting it |")
    print("|---|---|---|---|---|---|")
    per_run = [ratios(r) for r in runs]
    for i, (goal, what, _, target, check) in enumerate(per_run[0]):
        vs = [rows[i][2] for rows in per_run if rows[i][2] is not None]
        if not vs:
            print(f"| {goal} | {what} | n/a | {target} | n/a | |")
            continue
        med = statistics.median(vs)
        meeting = "" if check is None else f"{sum(1 for v in vs if check(v))} of {len(vs)}"
        print(f"| {goal} | {what} | {med:.2f} ({min(vs):.2f} – {max(vs):.2f}) | {target} | {verdict(med, check)} | {meeting} |")


def main(argv):
    if len(argv) == 3 and argv[1] == "--summary":
        summary(argv[2])
    elif len(argv) == 3 and argv[1] == "--record":
        this_run(argv[2])
    elif len(argv) == 1:
        this_run(None)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
