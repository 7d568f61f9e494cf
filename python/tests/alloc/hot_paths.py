"""Runs the hot paths of tool_health `n` times after warming up, for test_rust_allocations.py
(run under valgrind's DHAT, which counts every heap allocation and where it came from).

    python hot_paths.py calls N   # the gate, the records, the call helper, the decorators
    python hot_paths.py spans N   # the span processor: tool spans (succeeding, failing with an
                                  # exception event, OpenInference's), a model span, and the
                                  # call helper inside a tool span (a claim, an open call)
"""

from __future__ import annotations

import asyncio
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from tool_health import ManualClock, Registry, ToolHealthSpanProcessor

TOOL = "search"


def tool() -> int:
    return 1


async def atool() -> int:
    return 1


def spans() -> list[object]:
    """Finished spans, each handed to the processor again and again."""
    tracer = TracerProvider().get_tracer("pydantic-ai", "2.68.0")
    tool_span = tracer.start_span(
        f"execute_tool {TOOL}",
        kind=SpanKind.INTERNAL,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL},
    )
    tool_span.end()
    model_span = tracer.start_span("chat gpt-5", kind=SpanKind.CLIENT)
    model_span.end()
    failed = tracer.start_span(
        "execute_tool fetch",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"},
    )
    failed.record_exception(ConnectionError("upstream down"))
    failed.set_status(Status(StatusCode.ERROR))
    failed.end()
    openinference = TracerProvider().get_tracer("openinference.instrumentation.openai_agents")
    weather = openinference.start_span(
        "weather", attributes={"openinference.span.kind": "TOOL", "tool.name": "weather"}
    )
    weather.set_status(Status(StatusCode.OK))
    weather.end()
    return [tool_span, model_span, failed, weather]


def caller_error(exc: BaseException) -> str:
    return "caller_error"


def main(group: str, n: int) -> None:
    registry = Registry(tools=[TOOL])
    clock = ManualClock()
    tripped = Registry(clock=clock)
    for _ in range(3):
        tripped.record_failure(TOOL, 0.01)
    check, record, call = registry.check, registry.record, registry.call
    decorated = registry.tool(TOOL)(tool)
    adecorated = registry.tool(TOOL)(atool)
    # Never trips: the failing span fails every round.
    processor = ToolHealthSpanProcessor(Registry(failure_threshold=0, tools=[TOOL]))
    finished = spans()
    # The call helper inside its tool span, with a processor on the provider: the span is
    # claimed and annotated, the call marked open, the span skipped when it ends.
    helped = Registry(tools=[TOOL])
    provider = TracerProvider()
    provider.add_span_processor(ToolHealthSpanProcessor(helped))
    tracer = provider.get_tracer("my-agent")
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
    loop = asyncio.new_event_loop()

    async def awith(k: int) -> None:
        for _ in range(k):
            async with call(TOOL):
                await atool()
            async with call(TOOL, timeout=5):
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
            with call(TOOL, timeout=5):
                tool()
            try:
                with call("flaky", classify=caller_error):
                    raise ValueError("a bad argument")
            except ValueError:
                pass
        for _ in range(k):
            decorated()
        loop.run_until_complete(awith(k))
        loop.run_until_complete(adeco(k))
        for _ in range(k):
            tripped.check(TOOL)  # refused: None
            tripped.is_available(TOOL)

    def spans_(k: int) -> None:
        for _ in range(k):
            for span in finished:
                processor.on_end(span)  # type: ignore[arg-type]
        for _ in range(k):
            with tracer.start_as_current_span(f"execute_tool {TOOL}", attributes=attributes):
                with helped.call(TOOL):
                    tool()

    paths = calls if group == "calls" else spans_
    paths(20)  # first sights, caches, warm-up
    paths(n)
    loop.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
