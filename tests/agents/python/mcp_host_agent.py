"""An agent's tool calls to an MCP server, as a GenAI-instrumented agent makes them: each call
in an `execute_tool {tool}` span (the OpenTelemetry GenAI conventions), through the official
Python MCP SDK client (`mcp` 2.3.0, which opens its own client span and sends its trace context
in each request's `_meta.traceparent`), the spans exported over OTLP/HTTP protobuf by the
OpenTelemetry Python SDK. Driven by gateway/tests/gateway/feeds.rs: the MCP server is the
tool-health gateway, and the spans go to the same gateway's `/v1/traces`.

Usage: python mcp_host_agent.py --mcp URL --endpoint URL --tool NAME --runs N
"""

from __future__ import annotations

import argparse

import anyio
from mcp import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--mcp', required=True)
    ap.add_argument('--endpoint', required=True)
    ap.add_argument('--tool', required=True)
    ap.add_argument('--runs', type=int, default=1)
    a = ap.parse_args()
    provider = TracerProvider(resource=Resource.create({'service.name': 'mcp-host-agent'}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=a.endpoint)))
    # The MCP SDK's own client spans (and the traceparent it sends) use the global provider.
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer('mcp-host-agent')
    async with Client(a.mcp) as client:
        for i in range(a.runs):
            attrs = {'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': a.tool}
            with tracer.start_as_current_span(f'execute_tool {a.tool}', attributes=attrs) as span:
                result = await client.call_tool(a.tool, {})
                if result.is_error:
                    span.set_attribute('error.type', 'tool_error')
                    span.set_status(Status(StatusCode.ERROR))
            print(f'call {i}: error={result.is_error}', flush=True)
    provider.shutdown()


if __name__ == '__main__':
    anyio.run(main)
