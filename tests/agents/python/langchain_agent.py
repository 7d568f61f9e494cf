"""A LangChain v1 agent (create_agent on LangGraph, a scripted fake chat model: no network)
instrumented by OpenInference (openinference-instrumentation-langchain), exporting its spans over
OTLP/HTTP protobuf with the OpenTelemetry Python SDK (BatchSpanProcessor, its schedule from
OTEL_BSP_SCHEDULE_DELAY). Driven by tests/agents/main.rs.

Scenarios (one agent.invoke each, in the order given, repeats allowed):
  ok             weather(city='Paris', days=2)        succeeds
  raises         flaky(x=1) raises RuntimeError       the tool's failure (FLAKY_HEALED=1: succeeds)
  bad_args       weather(city='Paris', days='many')   pydantic ValidationError: the caller's error
  tool_exception flaky_handled(x=1) raises a handled ToolException: the tool's failure

Usage: python langchain_agent.py --endpoint URL --scenarios a,b [--linger S] [--mark]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import ToolException, tool
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

MARK = False
HEALED = os.environ.get('FLAKY_HEALED') == '1'


def mark(tool_name: str, ok: bool) -> None:
    if MARK:
        print('tool-event ' + json.dumps({'tool': tool_name, 'ok': ok, 't': time.time()}), flush=True)


class ScriptedChat(FakeMessagesListChatModel):
    """FakeMessagesListChatModel that accepts bind_tools (create_agent calls it)."""

    def bind_tools(self, tools: Any, **kwargs: Any):  # noqa: D102
        return self


@tool
def weather(city: str, days: int) -> dict:
    """Forecast for a city."""
    mark('weather', True)
    return {'city': city, 'days': days, 'forecast': 'sunny'}


@tool
def flaky(x: int) -> str:
    """Raises unless healed."""
    mark('flaky', HEALED)
    if HEALED:
        return 'fine'
    raise RuntimeError(f'flaky backend down (x={x})')


@tool
def flaky_handled(x: int) -> str:
    """Raises a ToolException, which the tool turns into its result."""
    raise ToolException(f'no such resource {x}')


flaky_handled.handle_tool_error = True

SCRIPTS = {
    'ok': ('weather', {'city': 'Paris', 'days': 2}),
    'raises': ('flaky', {'x': 1}),
    'bad_args': ('weather', {'city': 'Paris', 'days': 'many'}),
    'tool_exception': ('flaky_handled', {'x': 1}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--endpoint', required=True)
    ap.add_argument('--scenarios', required=True)
    ap.add_argument('--linger', type=float, default=0.0)
    ap.add_argument('--mark', action='store_true')
    a = ap.parse_args()
    global MARK
    MARK = a.mark
    provider = TracerProvider(resource=Resource.create({'service.name': 'langchain-agent'}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=a.endpoint)))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    for i, scenario in enumerate(a.scenarios.split(',')):
        name, args = SCRIPTS[scenario]
        model = ScriptedChat(
            responses=[
                AIMessage(content='', tool_calls=[{'name': name, 'args': args, 'id': f'call_{i}', 'type': 'tool_call'}]),
                AIMessage(content=f'done {scenario}'),
            ]
        )
        agent = create_agent(model, tools=[weather, flaky, flaky_handled], name='test_agent')
        try:
            agent.invoke({'messages': [{'role': 'user', 'content': f'scenario {scenario}'}]})
            print(f'run {scenario}: ok', flush=True)
        except Exception as e:  # `raises` ends the run
            print(f'run {scenario}: {type(e).__name__}', flush=True)
    if a.linger:
        time.sleep(a.linger)
    provider.shutdown()


if __name__ == '__main__':
    main()
