"""tool_health's cost per tool call from Python, side by side with the Python breakers, and the
span processor's cost per tool span beside the OpenTelemetry SDK's own BatchSpanProcessor.

A benchmark, not a test: it prints medians and the ratios of medians, and exits 0 whatever they
are. Run it with the wheel and the pinned baselines installed (python/benches/requirements.txt):

    python python/benches/overhead.py [--rounds 40] [--target-ms 15] [--record runs.jsonl]
    python python/benches/overhead.py --summary runs.jsonl   # median and range of each ratio

Method. The cost is the calling thread's CPU time (``time.thread_time_ns``: neighbours on a
shared machine do not count; ``--wall`` uses the wall clock instead). Every contender is a loop
of ``n`` calls (``n`` sized once so a batch takes about
``--target-ms``); each round times one batch of every contender, in a fresh random order, so
drift and noise from other processes fall on all of them alike; the figure of a contender is the
median over the rounds of (batch time / n). The bare call is the floor: the same function, not
wrapped. *Overhead* is a contender's median minus the floor's. Goals (issue 31): the gate and
record of a call through tool_health at most 0.5x pybreaker's ``call``; the processor's
``on_end`` on a tool span at most 0.5x ``BatchSpanProcessor.on_end``.

Sync contenders call ``def tool(): return 1``; async ones await ``async def atool(): return 1``
inside one running loop. Every breaker is closed and stays closed (the tool always succeeds):
the path every healthy call takes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata as md
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import pybreaker
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
from purgatory import AsyncCircuitBreakerFactory

import tool_health
from tool_health import Registry, ToolHealthSpanProcessor

TOOL = "search"

CLOCK = time.thread_time_ns
"""What a batch costs: the CPU time of the calling thread. The machine's cores are shared, so
wall time also counts the moments the thread waited for a core; the thread's own CPU time does
not. Work a contender hands to another thread (BatchSpanProcessor's exporter thread) is not the
caller's cost and is not counted — its hand-off is."""


def tool() -> int:
    return 1


async def atool() -> int:
    return 1


# --- sync contenders: each runs n calls ------------------------------------------------------


def make_sync(registry: Registry, breaker: pybreaker.CircuitBreaker) -> dict[str, Callable[[int], Any]]:
    decorated = registry.tool(TOOL)(tool)
    wrapped = breaker(tool)
    check, record, call = registry.check, registry.record, registry.call
    clock = time.perf_counter

    def bare(n: int) -> None:
        f = tool
        for _ in range(n):
            f()

    def pybreaker_call(n: int) -> None:
        c, f = breaker.call, tool
        for _ in range(n):
            c(f)

    def pybreaker_decorator(n: int) -> None:
        for _ in range(n):
            wrapped()

    def th_check_record(n: int) -> None:
        f = tool
        for _ in range(n):
            permit = check(TOOL)
            if permit is None:  # refused: what a caller of the gate by hand checks
                continue
            start = clock()
            f()
            record(TOOL, permit, "success", clock() - start)

    def th_with(n: int) -> None:
        f = tool
        for _ in range(n):
            with call(TOOL):
                f()

    def th_decorator(n: int) -> None:
        for _ in range(n):
            decorated()

    return {
        "bare call (floor)": bare,
        "pybreaker 1.4 call": pybreaker_call,
        "pybreaker 1.4 decorator": pybreaker_decorator,
        "tool_health check + record": th_check_record,
        "tool_health with call": th_with,
        "tool_health decorator": th_decorator,
    }


# --- async contenders: each awaits n calls in one loop ----------------------------------------


def make_async(
    registry: Registry, factory: AsyncCircuitBreakerFactory, loop: asyncio.AbstractEventLoop
) -> dict[str, Callable[[int], Any]]:
    decorated = registry.tool(TOOL)(atool)
    guarded = factory(TOOL)(atool)
    call = registry.call

    async def abare(n: int) -> None:
        f = atool
        for _ in range(n):
            await f()

    async def purgatory_decorator(n: int) -> None:
        for _ in range(n):
            await guarded()

    async def purgatory_with(n: int) -> None:
        f, get = atool, factory.get_breaker
        for _ in range(n):
            async with await get(TOOL):
                await f()

    async def th_async_with(n: int) -> None:
        f = atool
        for _ in range(n):
            async with call(TOOL):
                await f()

    async def th_async_decorator(n: int) -> None:
        for _ in range(n):
            await decorated()

    def run(coro: Callable[[int], Any]) -> Callable[[int], Any]:
        return lambda n: loop.run_until_complete(coro(n))

    return {
        "bare await (floor)": run(abare),
        "purgatory 3.0 decorator": run(purgatory_decorator),
        "purgatory 3.0 async with": run(purgatory_with),
        "tool_health async with call": run(th_async_with),
        "tool_health async decorator": run(th_async_decorator),
    }


# --- span processors: each ends n times on one finished span ----------------------------------


class Discard(SpanExporter):
    """An exporter that drops every batch: BatchSpanProcessor's own cost, no transport."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def finished_spans() -> tuple[ReadableSpan, ReadableSpan]:
    """A Pydantic AI tool span (its instrumentation's attributes, as captured) and a model span."""
    tracer = TracerProvider().get_tracer("pydantic-ai", "2.68.0")
    tool_span = tracer.start_span(
        f"execute_tool {TOOL}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": TOOL,
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"query":"rust"}',
            "gen_ai.agent.name": "agent",
            "logfire.msg": f"running tool: {TOOL}",
            "gen_ai.tool.call.result": '"results for rust"',
        },
    )
    tool_span.end()
    model_span = tracer.start_span(
        "chat gpt-5", kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat"}
    )
    model_span.end()
    return tool_span, model_span  # type: ignore[return-value]


def make_processors(registry: Registry) -> tuple[dict[str, Callable[[int], Any]], list[Any]]:
    tool_span, model_span = finished_spans()
    ours = ToolHealthSpanProcessor(registry)
    batch = BatchSpanProcessor(Discard())

    def loop(on_end: Callable[[ReadableSpan], None], span: ReadableSpan) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                on_end(span)

        return run

    def bare(n: int) -> None:  # the loop and a call of a no-op method: the floor
        f = noop
        for _ in range(n):
            f(tool_span)

    return {
        "no-op on_end (floor)": bare,
        "BatchSpanProcessor.on_end, tool span": loop(batch.on_end, tool_span),
        "ToolHealthSpanProcessor.on_end, tool span": loop(ours.on_end, tool_span),
        "ToolHealthSpanProcessor.on_end, model span": loop(ours.on_end, model_span),
    }, [batch, ours]


def noop(_span: ReadableSpan) -> None:
    pass


# --- the harness ------------------------------------------------------------------------------


def calibrate(run: Callable[[int], Any], target_s: float) -> int:
    n = 64
    while True:
        start = time.perf_counter()
        run(n)
        took = time.perf_counter() - start
        if took >= target_s / 4:
            return max(1, int(n * target_s / took))
        n *= 4


def measure(groups: dict[str, dict[str, Callable[[int], Any]]], rounds: int, target_s: float) -> dict[str, dict[str, list[float]]]:
    sizes = {g: {k: calibrate(f, target_s) for k, f in c.items()} for g, c in groups.items()}
    samples: dict[str, dict[str, list[float]]] = {g: {k: [] for k in c} for g, c in groups.items()}
    order = [(g, k) for g, c in groups.items() for k in c]
    gc.collect()
    for _ in range(rounds):
        random.shuffle(order)
        for g, k in order:
            n = sizes[g][k]
            start = CLOCK()
            groups[g][k](n)
            samples[g][k].append((CLOCK() - start) / n)
    return samples


def report(samples: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"groups": {}, "ratios": {}}
    for group, by_name in samples.items():
        medians = {k: statistics.median(v) for k, v in by_name.items()}
        floor_name = next(k for k in medians if "floor" in k)
        floor = medians[floor_name]
        print(f"\n## {group}\n")
        print("| contender | median ns/call | overhead ns (− floor) | p10–p90 ns |")
        print("|---|---:|---:|---:|")
        rows = {}
        for k, m in medians.items():
            qs = statistics.quantiles(by_name[k], n=10)
            over = m - floor if k != floor_name else 0.0
            rows[k] = {"median_ns": round(m, 1), "overhead_ns": round(over, 1), "p10_ns": round(qs[0], 1), "p90_ns": round(qs[-1], 1)}
            print(f"| {k} | {m:.1f} | {over:.1f} | {qs[0]:.1f}–{qs[-1]:.1f} |")
        out["groups"][group] = rows

    def ratio(group: str, a: str, b: str) -> None:
        rows = out["groups"][group]
        raw = rows[a]["median_ns"] / rows[b]["median_ns"]
        over = rows[a]["overhead_ns"] / rows[b]["overhead_ns"] if rows[b]["overhead_ns"] > 0 else float("nan")
        out["ratios"][f"{a} / {b}"] = {"raw": round(raw, 3), "overhead": round(over, 3)}
        print(f"| {a} / {b} | {raw:.2f}x | {over:.2f}x |")

    print("\n## Ratios of medians (raw: whole call; overhead: minus the floor)\n")
    print("| ratio | raw | overhead |")
    print("|---|---:|---:|")
    for ours in ("tool_health check + record", "tool_health with call", "tool_health decorator"):
        ratio("sync", ours, "pybreaker 1.4 call")
    ratio("sync", "tool_health decorator", "pybreaker 1.4 decorator")
    for ours in ("tool_health async with call", "tool_health async decorator"):
        ratio("async", ours, "purgatory 3.0 async with")
    ratio("async", "tool_health async decorator", "purgatory 3.0 decorator")
    ratio("span processors", "ToolHealthSpanProcessor.on_end, tool span", "BatchSpanProcessor.on_end, tool span")
    ratio("span processors", "ToolHealthSpanProcessor.on_end, model span", "BatchSpanProcessor.on_end, tool span")
    return out


def summary(path: str) -> None:
    """The median (and range) over recorded runs of each ratio and each contender's median."""
    runs = [json.loads(line) for line in open(path) if line.strip()]
    print(f"{len(runs)} runs; {runs[-1]['versions']}")
    print("\n| ratio of medians | raw: median (range) | overhead: median (range) |")
    print("|---|---|---|")
    for name in runs[-1]["ratios"]:
        raw = sorted(r["ratios"][name]["raw"] for r in runs)
        over = sorted(r["ratios"][name]["overhead"] for r in runs)
        print(
            f"| {name} | {statistics.median(raw):.2f}x ({raw[0]:.2f}–{raw[-1]:.2f}) "
            f"| {statistics.median(over):.2f}x ({over[0]:.2f}–{over[-1]:.2f}) |"
        )
    print("\n| contender | median ns/call over the runs (range) |")
    print("|---|---|")
    for group, rows in runs[-1]["groups"].items():
        for name in rows:
            ns = sorted(r["groups"][group][name]["median_ns"] for r in runs)
            print(f"| {name} | {statistics.median(ns):.0f} ({ns[0]:.0f}–{ns[-1]:.0f}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--target-ms", type=float, default=15.0)
    ap.add_argument("--wall", action="store_true", help="time with the wall clock (perf_counter)")
    ap.add_argument("--record", default=None, help="append this run's figures (one JSON line)")
    ap.add_argument("--summary", default=None, help="summarise the runs recorded in this file")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary)
        return
    if a.wall:
        global CLOCK
        CLOCK = time.perf_counter_ns

    registry = Registry(tools=[TOOL])
    breaker = pybreaker.CircuitBreaker(fail_max=3, reset_timeout=30)
    loop = asyncio.new_event_loop()
    factory = AsyncCircuitBreakerFactory(default_threshold=3, default_ttl=30)
    loop.run_until_complete(factory.initialize())
    processors, to_stop = make_processors(Registry(tools=[TOOL]))
    groups = {
        "sync": make_sync(registry, breaker),
        "async": make_async(registry, factory, loop),
        "span processors": processors,
    }
    for runs in groups.values():  # warm up: first sights, caches
        for run in runs.values():
            run(1_000)
    versions = {p: md.version(p) for p in ("pybreaker", "purgatory", "opentelemetry-sdk")}
    versions["tool-health"] = getattr(tool_health, "__version__", "?")
    print(f"python {platform.python_version()} ({sys.implementation.name}), {platform.machine()}; {versions}")
    clock = "wall clock" if a.wall else "the thread's CPU time"
    print(f"{a.rounds} rounds, batches of ~{a.target_ms:g} ms, interleaved in random order; {clock}")
    samples = measure(groups, a.rounds, a.target_ms / 1000)
    out = report(samples)
    for p in to_stop:
        p.shutdown()
    loop.close()
    snap = registry.snapshot(TOOL)
    assert snap is not None
    print(f"\nsanity: {TOOL} closed={snap.breaker == 'closed'}, successes={snap.success_count}, failures={snap.failure_count}")
    if a.record:
        out["versions"] = versions
        out["python"] = platform.python_version()
        with open(a.record, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
