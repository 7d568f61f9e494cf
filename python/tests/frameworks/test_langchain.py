"""LangChain 1.5 (create_agent on LangGraph 1.2) with tool-health: the ToolHealthMiddleware, and
the span processor alone (OpenInference's LangChain instrumentation).

LangChain's own fake chat model scripts the model (no network); time moves with ManualClock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import Field

from tool_health import REFUSAL_MESSAGE, ManualClock, Registry, ToolHealthSpanProcessor
from tool_health.langchain import ToolHealthMiddleware

Step = list[tuple[str, dict[str, Any]]] | str


class ScriptedChat(FakeMessagesListChatModel):
    """LangChain's fake chat model, answering the planned steps in order; notes the tools each
    request was bound with (create_agent binds them on every model call)."""

    offered: list[list[str]] = Field(default_factory=list)
    made: int = 0

    def plan(self, *steps: Step) -> None:
        messages: list[BaseMessage] = []
        for step in steps:
            if isinstance(step, str):
                messages.append(AIMessage(content=step))
                continue
            calls = []
            for name, args in step:
                self.made += 1
                calls.append({"name": name, "args": args, "id": f"call_{self.made}", "type": "tool_call"})
            messages.append(AIMessage(content="", tool_calls=calls))
        self.responses = messages
        self.i = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        self.offered.append(sorted(t.name if isinstance(t, BaseTool) else t["name"] for t in tools))
        return self


class Backend:
    def __init__(self) -> None:
        self.up = False
        self.calls = 0


def make_tools(backend: Backend) -> list[BaseTool]:
    @tool
    async def flaky(x: int) -> str:
        """Fails while its upstream is down (a ToolException the tool reports as its result)."""
        backend.calls += 1
        await asyncio.sleep(0)  # a yield: a second call in the same step gates meanwhile
        if not backend.up:
            raise ToolException(f"upstream answered 503 (x={x})")
        return f"fine {x}"

    flaky.handle_tool_error = True

    @tool
    def crash(x: int) -> str:
        """Raises: ToolNode re-raises it and the run fails."""
        backend.calls += 1
        raise RuntimeError(f"backend down (x={x})")

    @tool
    def unhandled(x: int) -> str:
        """Raises a ToolException it does not handle."""
        raise ToolException(f"no such resource {x}")

    @tool
    def weather(city: str, days: int) -> str:
        """Always works."""
        return f"sunny in {city} for {days} days"

    return [flaky, crash, unhandled, weather]


def tool_messages(state: dict[str, Any], name: str) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == name]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry(clock: ManualClock) -> Registry:
    return Registry(clock=clock)


def test_failing_tool_trips_is_hidden_then_probed_once_and_back(
    registry: Registry, clock: ManualClock
) -> None:
    backend = Backend()
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(backend), middleware=[ToolHealthMiddleware(registry)])

    def run(*steps: Step) -> dict[str, Any]:
        model.plan(*steps)
        return asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))

    # A handled ToolException three times in one run: the fourth request no longer binds `flaky`.
    state = run([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    assert backend.calls == 3
    assert [("flaky" in o) for o in model.offered] == [True, True, True, False]
    assert all(m.status == "error" and "503" in str(m.content) for m in tool_messages(state, "flaky"))
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")

    clock.advance(10.0)
    run("nothing to do")
    assert "flaky" not in model.offered[-1] and "weather" in model.offered[-1]

    # The cooldown over, the upstream mended: two calls in one step, one probe.
    clock.advance(20.0)
    backend.up = True
    state = run([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")
    assert "flaky" in model.offered[-2]
    assert backend.calls == 4, "exactly one of the two calls reached the tool: the probe"
    answers = tool_messages(state, "flaky")
    assert sorted(m.status for m in answers) == ["error", "success"]
    refusal = next(m for m in answers if m.status == "error")
    assert str(refusal.content).startswith(REFUSAL_MESSAGE)
    snap = registry.snapshot("flaky")
    assert snap is not None and snap.breaker == "closed"

    state = run([("flaky", {"x": 6})], "done")
    assert [m.content for m in tool_messages(state, "flaky")] == ["fine 6"]


def test_sync_raising_tool_fails_the_run_and_trips(registry: Registry) -> None:
    backend = Backend()
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(backend), middleware=[ToolHealthMiddleware(registry)])
    for x in range(3):
        model.plan([("crash", {"x": x})])
        with pytest.raises(RuntimeError, match="backend down"):
            agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert not registry.is_available("crash")
    model.plan([("crash", {"x": 9})], "ok")
    state = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert "crash" not in model.offered[-2]
    assert backend.calls == 3, "the refused call never reached the tool"
    [refusal] = tool_messages(state, "crash")
    assert refusal.status == "error" and str(refusal.content).startswith(REFUSAL_MESSAGE)


def test_unhandled_tool_exception_is_a_failure(registry: Registry) -> None:
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(Backend()), middleware=[ToolHealthMiddleware(registry)])
    for x in range(3):
        model.plan([("unhandled", {"x": x})])
        with pytest.raises(ToolException):
            agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    snap = registry.snapshot("unhandled")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")


def test_bad_arguments_and_unknown_tools_are_the_models_mistakes(registry: Registry) -> None:
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(Backend()), middleware=[ToolHealthMiddleware(registry)])
    for _ in range(4):
        model.plan([("weather", {"city": "Paris", "days": "many"}), ("nosuch", {})], "ok")
        state = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
        [bad] = tool_messages(state, "weather")
        assert bad.status == "error"
    snap = registry.snapshot("weather")
    assert snap is not None
    assert (snap.failure_count, snap.ignored_count, snap.breaker) == (0, 4, "closed")
    assert registry.snapshot("nosuch") is None


# --- The span processor alone: OpenInference's LangChain instrumentation, no middleware ---------


@pytest.fixture
def spans(registry: Registry) -> Iterator[InMemorySpanExporter]:
    """OpenInference's LangChain instrumentation into a provider with the processor."""
    provider = TracerProvider()
    provider.add_span_processor(ToolHealthSpanProcessor(registry))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield memory
    instrumentor.uninstrument()


def tool_spans(memory: InMemorySpanExporter, tool: str) -> list[Any]:
    return [
        s
        for s in memory.get_finished_spans()
        if (s.attributes or {}).get("openinference.span.kind") == "TOOL" and s.name == tool
    ]


def trip_through_spans(spans: InMemorySpanExporter) -> tuple[ScriptedChat, Backend, Any]:
    """Two handled ToolExceptions and a third, with a raising tool between: seen only by the
    processor."""
    backend = Backend()
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(backend))
    # A handled ToolException: the span is OK, the failure is in its output ("status": "error").
    model.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], "gave up")
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    assert [s.status.status_code for s in tool_spans(spans, "flaky")] == [StatusCode.OK] * 2
    # A raising tool: the span is ERROR, the run fails.
    model.plan([("crash", {"x": 1})])
    with pytest.raises(RuntimeError):
        agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert [s.status.status_code for s in tool_spans(spans, "crash")] == [StatusCode.ERROR]
    model.plan([("flaky", {"x": 3})], "gave up")
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    return model, backend, agent


def test_processor_alone_trips_from_openinference_spans(
    registry: Registry, spans: InMemorySpanExporter
) -> None:
    trip_through_spans(spans)
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    snap = registry.snapshot("crash")
    assert snap is not None and snap.failure_count == 1


def test_processor_alone_recovers_from_openinference_spans(
    registry: Registry, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    model, backend, agent = trip_through_spans(spans)
    clock.advance(31.0)  # a call a second after the cooldown: its span starts after it
    backend.up = True
    model.plan([("flaky", {"x": 4})], "done")
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.success_count, snap.breaker) == (1, "closed")


def test_processor_alone_counts_bad_arguments_as_the_models(
    registry: Registry, spans: InMemorySpanExporter
) -> None:
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(Backend()))
    for _ in range(4):
        model.plan([("weather", {"city": "Paris", "days": "many"})], "ok")
        agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    bad = tool_spans(spans, "weather")
    assert len(bad) == 4 and all(s.status.status_code == StatusCode.ERROR for s in bad)
    snap = registry.snapshot("weather")
    assert snap is None or (snap.failure_count == 0 and snap.breaker == "closed")


def test_middleware_and_processor_together_record_each_call_once(
    registry: Registry, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    backend = Backend()
    model = ScriptedChat(responses=[])
    agent = create_agent(model, tools=make_tools(backend), middleware=[ToolHealthMiddleware(registry)])

    def run(*steps: Step) -> None:
        model.plan(*steps)
        asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))

    run([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    clock.advance(30.0)
    backend.up = True
    run([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")  # the probe, and a refusal
    snap = registry.snapshot("flaky")
    assert snap is not None
    assert (snap.failure_count, snap.success_count, snap.breaker) == (3, 1, "closed")
