"""The span processor: the tool spans an agent already makes (here GenAI `execute_tool` spans
written with the OpenTelemetry API) feed the breakers, with no code in the agent and no export
delay. Run: python examples/processor.py"""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Status, StatusCode

from tool_health import Registry, ToolHealthSpanProcessor

registry = Registry()
provider = TracerProvider()
provider.add_span_processor(ToolHealthSpanProcessor(registry))
# provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # your exporter, beside it
tracer = provider.get_tracer("my-agent")


def call_tool(tool: str, fail: bool) -> None:
    with tracer.start_as_current_span(
        f"execute_tool {tool}",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool},
    ) as span:
        if fail:
            span.set_attribute("error.type", "timeout")
            span.set_status(Status(StatusCode.ERROR, "upstream timed out"))


for _ in range(3):
    call_tool("search", fail=True)
call_tool("calc", fail=False)

assert not registry.allow("search"), "tripped by its spans alone"
assert registry.allow("calc")
print(registry.unavailable_tools())  # [('search', 30.0)]: for the agent's planner
