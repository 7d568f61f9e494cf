"""Runs the hot paths of tool_health `n` times after warming up, for test_rust_allocations.py
(run under valgrind's DHAT, which counts every heap allocation and where it came from).

    python hot_paths.py calls N   # the gate, the records, the call helper, the decorators
    python hot_paths.py spans N   # the span processor on a tool span and on another span
"""

from __future__ import annotations

import asyncio
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from tool_health import ManualClock, Registry, ToolHealthSpanProcessor

TOOL = "search"


def tool() -> int:
    return 1


async def atool() -> int:
    return 1


def spans() -> tuple[object, object]:
    tracer = TracerProvider().get_tracer("pydantic-ai", "2.68.0")
    tool_span = tracer.start_span(
        f"execute_tool {TOOL}",
        kind=SpanKind.INTERNAL,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL},
    )
    tool_span.end()
    model_span = tracer.start_span("chat gpt-5", kind=SpanKind.CLIENT)
    model_span.end()
    return tool_span, model_span


def main(group: str, n: int) -> None:
    registry = Registry(tools=[TOOL])
    clock = ManualClock()
    tripped = Registry(clock=clock)
    for _ in range(3):
        tripped.record_failure(TOOL, 0.01)
    check, record, call = registry.check, registry.record, registry.call
    decorated = registry.tool(TOOL)(tool)
    adecorated = registry.tool(TOOL)(atool)
    processor = ToolHealthSpanProcessor(Registry(tools=[TOOL]))
    tool_span, model_span = spans()
    loop = asyncio.new_event_loop()

    async def awith(k: int) -> None:
        for _ in range(k):
            async with call(TOOL):
                await atool()

    async def adeco(k: int) -> None:
        for _ in range(k):
            await adecorated()

    def calls(k: int) -> None:
        for _ in range(k):
            permit = check(TOOL)
            if permit is not None:
                record(TOOL, permit, "success", 0.001)
        for _ in range(k):
            registry.allow(TOOL)
            registry.is_available(TOOL)
            registry.record_success(TOOL, 0.001)
            registry.record_failure(TOOL, 0.001)
            registry.record_success(TOOL, 0.001)
        for _ in range(k):
            with call(TOOL):
                tool()
        for _ in range(k):
            decorated()
        loop.run_until_complete(awith(k))
        loop.run_until_complete(adeco(k))
        for _ in range(k):
            tripped.check(TOOL)  # refused: None
            tripped.is_available(TOOL)

    def spans_(k: int) -> None:
        for _ in range(k):
            processor.on_end(tool_span)  # type: ignore[arg-type]
            processor.on_end(model_span)  # type: ignore[arg-type]

    paths = calls if group == "calls" else spans_
    paths(20)  # first sights, caches, warm-up
    paths(n)
    loop.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
