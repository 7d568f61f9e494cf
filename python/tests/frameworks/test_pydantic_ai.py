"""Pydantic AI 2.68 with tool-health: the ToolHealth capability, and the span processor alone.

A FunctionModel scripts the model (no network); time moves with ManualClock.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tool_health import REFUSAL_MESSAGE, ManualClock, Registry, ToolHealthSpanProcessor
from tool_health.pydantic_ai import ToolHealth


class Script:
    """The model: each request takes the next step (tool calls, or a text answer) and notes
    which tools it was offered."""

    def __init__(self) -> None:
        self.steps: deque[list[tuple[str, dict[str, Any]]] | str] = deque()
        self.offered: list[list[str]] = []
        self.calls = 0

    def plan(self, *steps: list[tuple[str, dict[str, Any]]] | str) -> None:
        self.steps.extend(steps)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(t.name for t in info.function_tools))
        step = self.steps.popleft()
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        parts = []
        for name, args in step:
            self.calls += 1
            parts.append(ToolCallPart(name, args, tool_call_id=f"call_{self.calls}"))
        return ModelResponse(parts=parts)


class Backend:
    """The flaky tool's upstream: down until mended; counts the calls that reached it."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0


def returns(result: Any, tool: str) -> list[Any]:
    return [
        p.content
        for m in result.new_messages()
        for p in getattr(m, "parts", [])
        if isinstance(p, ToolReturnPart) and p.tool_name == tool
    ]


def make_agent(script: Script, backend: Backend, *capabilities: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), capabilities=list(capabilities))

    @agent.tool_plain
    async def flaky(x: int) -> str:
        """Fails while its upstream is down."""
        backend.calls += 1
        await asyncio.sleep(0)  # a yield: a second call in the same step gates meanwhile
        if not backend.up:
            raise ToolFailed(f"upstream answered 503 (x={x})")
        return f"fine {x}"

    @agent.tool_plain
    def weather(city: str) -> str:
        """Always works."""
        return f"sunny in {city}"

    @agent.tool_plain
    def picky(n: int) -> str:
        """Asks the model to try again unless n is even."""
        if n % 2:
            raise ModelRetry("n must be even")
        return f"even {n}"

    return agent


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry(clock: ManualClock) -> Registry:
    return Registry(clock=clock)


def test_failing_tool_trips_is_hidden_then_probed_once_and_back(
    registry: Registry, clock: ManualClock
) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend, ToolHealth(registry))

    # Three failures in one run: the fourth model request is no longer offered `flaky`.
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    result = agent.run_sync("go")
    assert backend.calls == 3
    assert [("flaky" in o) for o in script.offered] == [True, True, True, False]
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    assert all("503" in str(c) for c in returns(result, "flaky"))

    # During the cooldown: hidden from every request.
    clock.advance(10.0)
    script.plan("nothing to do")
    agent.run_sync("again")
    assert "flaky" not in script.offered[-1] and "weather" in script.offered[-1]

    # The cooldown over, the upstream mended: offered again; two calls in one step, one probe.
    clock.advance(20.0)
    backend.up = True
    script.plan([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")
    result = agent.run_sync("probe")
    assert "flaky" in script.offered[-2]
    assert backend.calls == 4, "exactly one of the two calls reached the tool: the probe"
    answers = returns(result, "flaky")
    assert len(answers) == 2
    assert sum(str(a).startswith("fine") for a in answers) == 1
    refusal = [a for a in answers if not str(a).startswith("fine")]
    assert str(refusal[0]).startswith(REFUSAL_MESSAGE)
    snap = registry.snapshot("flaky")
    assert snap is not None and snap.breaker == "closed"

    # Back for good.
    script.plan([("flaky", {"x": 6})], "done")
    result = agent.run_sync("after")
    assert returns(result, "flaky") == ["fine 6"]
    assert backend.calls == 5


def test_a_raising_tool_counts_as_a_failure(registry: Registry) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend, ToolHealth(registry))

    @agent.tool_plain(name="crash")
    def crash() -> str:
        """Raises: Pydantic AI ends the run with the exception."""
        raise RuntimeError("backend down")

    for _ in range(3):
        script.plan([("crash", {})])
        with pytest.raises(RuntimeError, match="backend down"):
            agent.run_sync("go")
    assert not registry.is_available("crash")
    script.plan("ok")
    agent.run_sync("go")
    assert "crash" not in script.offered[-1]


def test_model_retry_and_bad_arguments_are_the_models_mistakes(registry: Registry) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend, ToolHealth(registry))

    # ModelRetry four times, a retry then a good call in each run (one retry per run: the
    # agent's default budget).
    for _ in range(4):
        script.plan([("picky", {"n": 1})], [("picky", {"n": 2})], "ok")
        agent.run_sync("go")
    picky = registry.snapshot("picky")
    assert picky is not None
    assert (picky.failure_count, picky.breaker) == (0, "closed")
    assert (picky.ignored_count, picky.success_count) == (4, 4)

    # Arguments that fail validation never reach the tool's execution: nothing counted.
    for _ in range(4):
        script.plan([("weather", {"city": 7, "days": "x"})], "ok")
        agent.run_sync("go")
    weather = registry.snapshot("weather")
    assert weather is None or weather.failure_count == 0
    assert registry.is_available("weather")


def test_tools_outside_the_list_are_untouched(registry: Registry) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend, ToolHealth(registry, tools={"weather"}))
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], [("flaky", {"x": 4})], "ok")
    agent.run_sync("go")
    assert backend.calls == 4
    assert registry.snapshot("flaky") is None
    assert all("flaky" in o for o in script.offered)


# --- The span processor alone: Pydantic AI's own instrumentation, no capability -----------------


def instrument(agent: Agent[None, str], registry: Registry) -> InMemorySpanExporter:
    """Pydantic AI's instrumentation into a provider with the processor (and a memory exporter,
    to look at the spans it read)."""
    provider = TracerProvider()
    provider.add_span_processor(ToolHealthSpanProcessor(registry))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    return memory


def tool_spans(memory: InMemorySpanExporter, tool: str) -> list[Any]:
    return [s for s in memory.get_finished_spans() if (s.attributes or {}).get("gen_ai.tool.name") == tool]


def trip_through_spans(registry: Registry) -> tuple[Script, Backend, Agent[None, str]]:
    """Three failing calls of `flaky`, seen only by the processor: the breaker opens."""
    script, backend = Script(), Backend()
    agent = make_agent(script, backend)
    memory = instrument(agent, registry)
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    agent.run_sync("go")
    spans = tool_spans(memory, "flaky")
    assert [s.name for s in spans] == ["execute_tool flaky"] * 3
    assert all(s.status.status_code == StatusCode.ERROR for s in spans)
    return script, backend, agent


def test_processor_alone_trips_from_pydantic_ais_spans(registry: Registry) -> None:
    script, _, _ = trip_through_spans(registry)
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    assert not registry.is_available("flaky")
    # No integration: the model is still offered the tool (only the capability hides it).
    assert all("flaky" in o for o in script.offered)


def test_processor_alone_recovers_from_pydantic_ais_spans(registry: Registry, clock: ManualClock) -> None:
    # A call a second after the cooldown: its span starts after it, so it is the probe (the
    # receiver's span-probe rule), and its success closes the breaker.
    script, backend, agent = trip_through_spans(registry)
    clock.advance(31.0)
    backend.up = True
    script.plan([("flaky", {"x": 4})], "done")
    agent.run_sync("go")
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.success_count, snap.breaker) == (1, "closed")


def test_processor_alone_counts_model_retry_and_bad_arguments_as_the_models(registry: Registry) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend)
    memory = instrument(agent, registry)
    for _ in range(4):
        script.plan([("picky", {"n": 1})], [("picky", {"n": 2})], "ok")
        agent.run_sync("go")
        script.plan([("weather", {"city": 7})], [("weather", {"city": "Paris"})], "ok")
        agent.run_sync("go")
    # The spans are errors all the same: Pydantic AI marks why.
    retried = [s for s in tool_spans(memory, "picky") if s.status.status_code == StatusCode.ERROR]
    invalid = [s for s in tool_spans(memory, "weather") if s.status.status_code == StatusCode.ERROR]
    assert len(retried) == 4 and len(invalid) == 4
    assert all((s.attributes or {}).get("pydantic_ai.tool.failure_stage") == "validation" for s in invalid)
    for tool in ("picky", "weather"):
        snap = registry.snapshot(tool)
        assert snap is not None and (snap.failure_count, snap.success_count) == (0, 4), tool
        assert snap.breaker == "closed"


def test_capability_and_processor_together_record_each_call_once(
    registry: Registry, clock: ManualClock
) -> None:
    script, backend = Script(), Backend()
    agent = make_agent(script, backend, ToolHealth(registry))
    instrument(agent, registry)
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    agent.run_sync("go")
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    # The probe and a refused call in one step: the refused call's span (a success to Pydantic
    # AI: the refusal is its result) must not count, nor close anything.
    clock.advance(30.0)
    backend.up = True
    script.plan([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")
    agent.run_sync("go")
    snap = registry.snapshot("flaky")
    assert snap is not None
    assert (snap.failure_count, snap.success_count, snap.breaker) == (3, 1, "closed")
