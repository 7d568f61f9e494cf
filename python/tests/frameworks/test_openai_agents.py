"""OpenAI Agents SDK 0.24 with tool-health: gated function tools and a gated MCP server, and the
span processor alone (through either OpenTelemetry bridge: OpenInference's or OpenLLMetry's).

The SDK's own ScriptedModel (a `Model` returning scripted tool calls) stands in for the model: no
network. The MCP server is the real Python SDK server of the project's MCP tests
(integrations/servers/python/server.py) over stdio. Time moves with ManualClock.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, UserError, function_tool
from agents.items import ToolCallOutputItem
from agents.mcp import MCPServerStdio
from agents.tool import Tool
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp.types import TextContent
from openinference.instrumentation.openai_agents import (
    OpenAIAgentsInstrumentor as OpenInferenceInstrumentor,
)
from opentelemetry.instrumentation.openai_agents import (
    OpenAIAgentsInstrumentor as OpenLLMetryInstrumentor,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tool_health import REFUSAL_MESSAGE, ManualClock, Registry, ToolHealthSpanProcessor
from tool_health.openai_agents import GatedMCPServer, gate_tool, gate_tools

os.environ.pop("OPENAI_API_KEY", None)
NO_TRACING = RunConfig(tracing_disabled=True)
MCP_SERVER = Path(__file__).resolve().parents[3] / "integrations" / "servers" / "python" / "server.py"


class Script:
    """Plans the ScriptedModel's steps: a list of tool calls, or a text answer."""

    def __init__(self) -> None:
        self.model = ScriptedModel()
        self.made = 0

    def plan(self, *steps: list[tuple[str, Any]] | str) -> None:
        for step in steps:
            if isinstance(step, str):
                self.model.enqueue([assistant_message(step)])
                continue
            items = []
            for name, args in step:
                self.made += 1
                items.append(function_call(name, args, call_id=f"call_{self.made}"))
            self.model.enqueue(items)

    def offered(self) -> list[list[str]]:
        return [sorted(t.name for t in c.tools if isinstance(t, FunctionTool)) for c in self.model.calls]


class Backend:
    def __init__(self) -> None:
        self.up = False
        self.calls = 0


def make_tools(backend: Backend) -> list[Tool]:
    @function_tool
    async def flaky(x: int) -> str:
        """Fails while its upstream is down."""
        backend.calls += 1
        await asyncio.sleep(0)  # a yield: a second call in the same step gates meanwhile
        if not backend.up:
            raise RuntimeError(f"upstream answered 503 (x={x})")
        return f"fine {x}"

    @function_tool(failure_error_function=None)
    def fatal(x: int) -> str:
        """Raises, and the SDK lets the error end the run."""
        raise RuntimeError(f"fatal backend down (x={x})")

    @function_tool
    def weather(city: str, days: int) -> str:
        """Always works."""
        return f"sunny in {city} for {days} days"

    return [flaky, fatal, weather]


def outputs(result: Any) -> list[str]:
    """The tool results of a run, as text (an MCP tool's is a text item)."""
    texts = []
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem):
            out = item.output
            texts.append(out["text"] if isinstance(out, dict) and "text" in out else str(out))
    return texts


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry(clock: ManualClock) -> Registry:
    return Registry(clock=clock)


def test_failing_tool_trips_is_disabled_then_probed_once_and_back(
    registry: Registry, clock: ManualClock
) -> None:
    script, backend = Script(), Backend()
    agent = Agent(name="a", model=script.model, tools=gate_tools(make_tools(backend), registry))

    def run(*steps: list[tuple[str, Any]] | str) -> Any:
        script.plan(*steps)
        return Runner.run_sync(agent, "go", run_config=NO_TRACING)

    # The failure handler answers "An error occurred while running the tool": three failures.
    result = run([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    assert backend.calls == 3
    assert [("flaky" in o) for o in script.offered()] == [True, True, True, False]
    assert all("error occurred" in o for o in outputs(result))
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")

    clock.advance(10.0)
    run("nothing to do")
    assert "flaky" not in script.offered()[-1] and "weather" in script.offered()[-1]

    clock.advance(20.0)
    backend.up = True
    result = run([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")
    assert "flaky" in script.offered()[-2]
    assert backend.calls == 4, "exactly one of the two calls reached the tool: the probe"
    answers = outputs(result)
    assert sorted(a.startswith("fine") for a in answers) == [False, True]
    assert next(a for a in answers if not a.startswith("fine")).startswith(REFUSAL_MESSAGE)
    snap = registry.snapshot("flaky")
    assert snap is not None and snap.breaker == "closed"

    result = run([("flaky", {"x": 6})], "done")
    assert outputs(result) == ["fine 6"]


def test_bad_arguments_are_the_models_mistake(registry: Registry) -> None:
    script = Script()
    agent = Agent(name="a", model=script.model, tools=gate_tools(make_tools(Backend()), registry))
    for _ in range(2):
        script.plan([("weather", {"city": "Paris", "days": "many"}), ("weather", '{"city": ')], "ok")
        result = Runner.run_sync(agent, "go", run_config=NO_TRACING)
        assert all("error occurred" in o for o in outputs(result))
    snap = registry.snapshot("weather")
    assert snap is not None
    assert (snap.failure_count, snap.ignored_count, snap.breaker) == (0, 4, "closed")


def test_an_error_the_handler_lets_through_is_a_failure(registry: Registry) -> None:
    script = Script()
    agent = Agent(name="a", model=script.model, tools=gate_tools(make_tools(Backend()), registry))
    for x in range(3):
        script.plan([("fatal", {"x": x})])
        with pytest.raises(UserError):
            Runner.run_sync(agent, "go", run_config=NO_TRACING)
    assert not registry.is_available("fatal")
    script.plan("ok")
    Runner.run_sync(agent, "go", run_config=NO_TRACING)
    assert "fatal" not in script.offered()[-1]


def test_the_original_tool_is_left_alone(registry: Registry) -> None:
    backend = Backend()
    [flaky, _, _] = make_tools(backend)
    assert isinstance(flaky, FunctionTool)
    gated = gate_tool(flaky, registry)
    assert gated is not flaky and gated.on_invoke_tool is not flaky.on_invoke_tool
    script = Script()
    agent = Agent(name="a", model=script.model, tools=[flaky])
    for x in range(4):
        script.plan([("flaky", {"x": x})], "ok")
        Runner.run_sync(agent, "go", run_config=NO_TRACING)
    assert backend.calls == 4 and registry.snapshot("flaky") is None


def test_mcp_tools_trip_are_hidden_then_probed_once_and_back(
    registry: Registry, clock: ManualClock
) -> None:
    async def scenario() -> None:
        stdio = MCPServerStdio(
            name="py",
            params={"command": sys.executable, "args": [str(MCP_SERVER), "stdio"]},
            cache_tools_list=False,
        )
        async with GatedMCPServer(stdio, registry) as server:
            script = Script()
            agent = Agent(name="a", model=script.model, mcp_servers=[server])

            async def run(*steps: list[tuple[str, Any]] | str) -> Any:
                script.plan(*steps)
                return await Runner.run(agent, "go", run_config=NO_TRACING)

            # The server starts broken: `flaky` answers isError three times.
            result = await run([("flaky", {})], [("flaky", {})], [("flaky", {})], "gave up")
            assert all("Error executing tool flaky" in o for o in outputs(result)), outputs(result)
            assert [("flaky" in o) for o in script.offered()] == [True, True, True, False]
            snap = registry.snapshot("py/flaky")
            assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")

            # Mended, but still cooling down: hidden; `ok` and `mend` are untouched.
            result = await run([("mend", {})], "mended")
            assert outputs(result) == ["mended"]
            assert "flaky" not in script.offered()[-1]

            clock.advance(30.0)
            result = await run([("flaky", {}), ("flaky", {})], "done")
            answers = outputs(result)
            assert sorted(a == "flaky works" for a in answers) == [False, True]
            assert next(a for a in answers if a != "flaky works").startswith(REFUSAL_MESSAGE)
            seen = (await stdio.call_tool("seen", {})).content[0]
            assert isinstance(seen, TextContent)
            assert '"flaky": 4' in seen.text, "the refused call never reached the server"
            snap = registry.snapshot("py/flaky")
            assert snap is not None and snap.breaker == "closed"

            result = await run([("flaky", {})], "done")
            assert outputs(result) == ["flaky works"]

    asyncio.run(scenario())


# --- The span processor alone: the SDK's tracing through an OpenTelemetry bridge, no gating -----


@pytest.fixture(params=["openinference", "openllmetry"])
def spans(request: pytest.FixtureRequest, registry: Registry) -> Iterator[InMemorySpanExporter]:
    """One of the two bridges on PyPI (each replaces the SDK's trace processors: nothing is
    uploaded) into a provider with the processor."""
    provider = TracerProvider()
    provider.add_span_processor(ToolHealthSpanProcessor(registry))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if request.param == "openinference":
        instrumentor: Any = OpenInferenceInstrumentor()
    else:
        instrumentor = OpenLLMetryInstrumentor(replace_existing_processors=True)
    instrumentor.instrument(tracer_provider=provider)
    yield memory
    instrumentor.uninstrument()


def tool_spans(memory: InMemorySpanExporter, tool: str) -> list[Any]:
    """The tool spans of `tool`: OpenInference's (`tool.name`) or OpenLLMetry's (`gen_ai.tool.name`)."""
    found = []
    for s in memory.get_finished_spans():
        a = s.attributes or {}
        if a.get("openinference.span.kind") == "TOOL" and a.get("tool.name") == tool:
            found.append(s)
        elif a.get("gen_ai.operation.name") == "execute_tool" and a.get("gen_ai.tool.name") == tool:
            found.append(s)
    return found


def trip_through_spans(spans: InMemorySpanExporter) -> tuple[Script, Backend, Agent[Any]]:
    """Three failing calls of `flaky`, seen only by the processor: the breaker opens."""
    script, backend = Script(), Backend()
    agent = Agent(name="a", model=script.model, tools=make_tools(backend))
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    Runner.run_sync(agent, "go")
    failed = tool_spans(spans, "flaky")
    assert len(failed) == 3 and all(s.status.status_code == StatusCode.ERROR for s in failed)
    assert all("Error running tool (non-fatal)" in (s.status.description or "") for s in failed)
    return script, backend, agent


def test_processor_alone_trips_from_the_bridges_spans(
    registry: Registry, spans: InMemorySpanExporter
) -> None:
    trip_through_spans(spans)
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    assert not registry.is_available("flaky")


def test_processor_alone_recovers_from_the_bridges_spans(
    registry: Registry, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    script, backend, agent = trip_through_spans(spans)
    clock.advance(31.0)  # a call a second after the cooldown: its span starts after it
    backend.up = True
    script.plan([("flaky", {"x": 4})], "done")
    Runner.run_sync(agent, "go")
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.success_count, snap.breaker) == (1, "closed")


def test_processor_alone_cannot_tell_bad_arguments_from_a_failure(
    registry: Registry, spans: InMemorySpanExporter
) -> None:
    """The bridge's blind spot, proven: the SDK turns bad arguments into the same "Error running
    tool (non-fatal)" span as a raising tool, so the processor alone counts them against the
    tool (the gated tool does not: test_bad_arguments_are_the_models_mistake)."""
    script = Script()
    agent = Agent(name="a", model=script.model, tools=make_tools(Backend()))
    script.plan([("weather", {"city": "Paris", "days": "many"})], [("flaky", {"x": 1})], "ok")
    Runner.run_sync(agent, "go")
    [bad] = tool_spans(spans, "weather")
    [raised] = tool_spans(spans, "flaky")
    assert bad.status.status_code == raised.status.status_code == StatusCode.ERROR
    assert bad.status.description.replace("weather", "T") == raised.status.description.replace("flaky", "T")
    snap = registry.snapshot("weather")
    assert snap is not None and snap.failure_count == 1


def test_gated_tools_and_processor_together_record_each_call_once(
    registry: Registry, clock: ManualClock, spans: InMemorySpanExporter
) -> None:
    script, backend = Script(), Backend()
    agent = Agent(name="a", model=script.model, tools=gate_tools(make_tools(backend), registry))
    script.plan([("flaky", {"x": 1})], [("flaky", {"x": 2})], [("flaky", {"x": 3})], "gave up")
    Runner.run_sync(agent, "go")
    assert len(tool_spans(spans, "flaky")) == 3
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.breaker) == (3, "open")
    clock.advance(30.0)
    backend.up = True
    script.plan([("flaky", {"x": 4}), ("flaky", {"x": 5})], "done")  # the probe, and a refusal
    Runner.run_sync(agent, "go")
    snap = registry.snapshot("flaky")
    assert snap is not None
    assert (snap.failure_count, snap.success_count, snap.breaker) == (3, 1, "closed")


def test_processor_alone_cannot_see_an_mcp_tools_error_result(
    registry: Registry, spans: InMemorySpanExporter
) -> None:
    """The bridges' other blind spot, proven: the SDK hands an MCP `isError` result to the model
    as the tool's output and ends the tool span OK, so the processor alone counts a failing MCP
    tool as succeeding (GatedMCPServer counts it: test_mcp_tools_trip_are_hidden_...)."""

    async def scenario() -> None:
        stdio = MCPServerStdio(
            name="py", params={"command": sys.executable, "args": [str(MCP_SERVER), "stdio"]}
        )
        async with stdio:
            script = Script()
            agent = Agent(name="a", model=script.model, mcp_servers=[stdio])
            script.plan([("flaky", {})], [("flaky", {})], [("flaky", {})], "gave up")
            result = await Runner.run(agent, "go")
            assert all("Error executing tool flaky" in o for o in outputs(result))

    asyncio.run(scenario())
    flaky = tool_spans(spans, "flaky")
    assert len(flaky) == 3 and all(s.status.status_code != StatusCode.ERROR for s in flaky)
    snap = registry.snapshot("flaky")
    assert snap is not None and (snap.failure_count, snap.success_count, snap.breaker) == (0, 3, "closed")
