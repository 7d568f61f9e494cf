"""A Pydantic AI agent (pydantic-ai-slim, FunctionModel: no network) exporting its spans over
OTLP/HTTP protobuf with the OpenTelemetry Python SDK (BatchSpanProcessor, its schedule from
OTEL_BSP_SCHEDULE_DELAY as any agent's). Driven by tests/agents/main.rs.

Scenarios (one agent run each, in the order given, repeats allowed):
  ok          weather(city='Paris', days=2)        succeeds
  raises      flaky(x=1) raises RuntimeError       the tool's failure (FLAKY_HEALED=1: succeeds)
  bad_args    weather(city='Paris', days='many')   argument validation fails (failure_stage =
              validation), then the model corrects itself
  model_retry flaky_retry(x=1) raises ModelRetry   then succeeds with x=2
  retries_used_up  insists(x=1) raises ModelRetry, and the model keeps asking the same until
              the tool's retries are used up (Pydantic AI raises UnexpectedModelBehavior)

Usage: python pydantic_agent.py --endpoint URL --scenarios a,b [--linger S] [--mark]
  --linger S  keep running S seconds before the final flush (the batch schedule delivers)
  --mark      print `tool-event {"tool", "ok", "t"}` (t: epoch seconds) as each tool body ends
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

SCRIPTS = {
    'ok': ('weather', {'city': 'Paris', 'days': 2}),
    'raises': ('flaky', {'x': 1}),
    'bad_args': ('weather', {'city': 'Paris', 'days': 'many'}),
    'model_retry': ('flaky_retry', {'x': 1}),
    'retries_used_up': ('insists', {'x': 1}),
}
MARK = False
HEALED = os.environ.get('FLAKY_HEALED') == '1'


def mark(tool: str, ok: bool) -> None:
    if MARK:
        print('tool-event ' + json.dumps({'tool': tool, 'ok': ok, 't': time.time()}), flush=True)


def model(scenario: str) -> FunctionModel:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(1 for m in messages if isinstance(m, ModelResponse))
        name, args = SCRIPTS[scenario]
        if turns == 0:
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f'call_{scenario}_0')])
        if turns == 1 and scenario == 'bad_args':
            return ModelResponse(parts=[ToolCallPart('weather', {'city': 'Paris', 'days': 2}, tool_call_id='fix')])
        if turns == 1 and scenario == 'model_retry':
            return ModelResponse(parts=[ToolCallPart('flaky_retry', {'x': 2}, tool_call_id='again')])
        if scenario == 'retries_used_up':
            # A model that does not listen: the same call every turn.
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f'insist_{turns}')])
        return ModelResponse(parts=[TextPart('done')])

    return FunctionModel(fn, model_name=f'scripted-{scenario}')


def agent(scenario: str, settings: InstrumentationSettings) -> Agent:
    a = Agent(model(scenario), name='test_agent', retries=2)
    a.instrument = settings

    @a.tool_plain
    def weather(city: str, days: int) -> dict:
        """Forecast for a city."""
        mark('weather', True)
        return {'city': city, 'days': days, 'forecast': 'sunny'}

    @a.tool_plain
    def flaky(x: int) -> str:
        """Raises unless healed."""
        mark('flaky', HEALED)
        if HEALED:
            return 'fine'
        raise RuntimeError(f'flaky backend down (x={x})')

    @a.tool_plain
    def insists(x: int) -> str:
        """Asks the model to retry unless x == 2 (the scripted model never listens)."""
        if x != 2:
            raise ModelRetry('x must be 2, try again')
        return 'ok with x=2'

    @a.tool_plain
    def flaky_retry(x: int) -> str:
        """Asks the model to retry when x == 1."""
        if x == 1:
            raise ModelRetry('x must be 2, try again')
        return 'ok with x=2'

    return a


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--endpoint', required=True)
    ap.add_argument('--scenarios', required=True)
    ap.add_argument('--linger', type=float, default=0.0)
    ap.add_argument('--mark', action='store_true')
    a = ap.parse_args()
    global MARK
    MARK = a.mark
    provider = TracerProvider(resource=Resource.create({'service.name': 'pydantic-agent'}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=a.endpoint)))
    settings = InstrumentationSettings(tracer_provider=provider)
    for scenario in a.scenarios.split(','):
        try:
            await agent(scenario, settings).run(f'scenario {scenario}')
            print(f'run {scenario}: ok', flush=True)
        except Exception as e:  # `raises` ends the run
            print(f'run {scenario}: {type(e).__name__}', flush=True)
    if a.linger:
        await asyncio.sleep(a.linger)
    provider.shutdown()  # flushes what is left


if __name__ == '__main__':
    asyncio.run(main())
