"""`ToolHealthSpanProcessor`: spans written by the real OpenTelemetry Python SDK, the captured
requests of real agent frameworks (the OTLP receiver's fixtures, replayed as SDK spans: the same
counts as the Rust receiver's tests), and one record when the call helper sees the same call."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Span, SpanContext, Status, StatusCode, Tracer

import tool_health as th

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "receiver" / "fixtures"


def provider(registry: th.Registry, **kwargs: object) -> tuple[TracerProvider, InMemorySpanExporter]:
    p = TracerProvider()
    p.add_span_processor(th.ToolHealthSpanProcessor(registry, **kwargs))  # type: ignore[arg-type]
    exporter = InMemorySpanExporter()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p, exporter


def counts(registry: th.Registry) -> dict[str, tuple[int, int, int]]:
    return {
        s.tool: (s.success_count, s.failure_count, s.ignored_count)
        for s in registry.health_summary()
    }


def execute_tool(tracer: Tracer, tool: str) -> AbstractContextManager[Span]:
    return tracer.start_as_current_span(
        f"execute_tool {tool}",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool},
    )


def test_the_processor_is_an_sdk_span_processor(registry: th.Registry) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    assert isinstance(th.ToolHealthSpanProcessor(registry), SpanProcessor)


def test_genai_spans_of_the_sdk_trip_the_breaker(registry: th.Registry) -> None:
    p, _ = provider(registry)
    tracer = p.get_tracer("my-agent")
    for _ in range(3):
        with pytest.raises(TimeoutError):
            with execute_tool(tracer, "search"):
                raise TimeoutError("upstream timed out")
    with execute_tool(tracer, "calc"):
        pass
    # A caller error (error.type) is ignored; a chat span naming a tool is no tool call.
    with execute_tool(tracer, "fetch") as span:
        span.set_attribute("error.type", "invalid_arguments")
    with tracer.start_as_current_span(
        "chat", attributes={"gen_ai.operation.name": "chat", "gen_ai.tool.name": "search"}
    ):
        pass
    assert counts(registry) == {"calc": (1, 0, 0), "fetch": (0, 0, 1), "search": (0, 3, 0)}
    assert registry.breaker_state("search") == "open"


def test_hostile_names_in_spans_are_refused(registry: th.Registry) -> None:
    p, _ = provider(registry)
    with pytest.raises(RuntimeError):
        with execute_tool(p.get_tracer("t"), "n" * 300):
            raise RuntimeError("x")
    assert registry.tracked_tools == 0


def test_strict_mode_and_caller_errors_through_the_processor(registry: th.Registry) -> None:
    p, _ = provider(registry, strict=True, caller_errors=["bad_input"])
    tracer = p.get_tracer("t")
    with execute_tool(tracer, "a"):
        pass  # strict: no completion marker → cancelled
    with execute_tool(tracer, "a") as span:
        span.set_status(Status(StatusCode.OK))
    with execute_tool(tracer, "a") as span:
        span.set_attribute("error.type", "bad_input")
    s = registry.snapshot("a")
    assert s is not None and (s.success_count, s.ignored_count, s.cancelled_count) == (1, 1, 1)


# --- the captured requests of real agent frameworks (tests/receiver/fixtures.rs) -------------

PYDANTIC = {"flaky": (0, 1, 0), "flaky_failed": (0, 1, 0), "flaky_retry": (1, 0, 1), "weather": (2, 0, 1)}
VERCEL = {"flaky": (0, 2, 0), "flaky_string": (0, 1, 0), "weather": (2, 0, 0)}
OPENAI_AGENTS = {"flaky": (0, 1, 0), "flaky_fatal": (0, 1, 0), "weather": (1, 2, 0)}
LANGCHAIN = {"flaky": (0, 1, 0), "flaky_handled": (0, 1, 0), "weather": (1, 0, 1)}
TRACELOOP = {"flaky": (0, 1, 0), "weather": (1, 1, 0)}
CAPTURES = {
    "pydantic-ai-v5-default": PYDANTIC,
    "pydantic-ai-v6": PYDANTIC,
    "pydantic-ai-v2": PYDANTIC,
    "pydantic-ai-v5-nocontent": PYDANTIC,
    "vercel-ai6": VERCEL,
    "vercel-ai7-otel": VERCEL,
    "vercel-ai7-legacy": VERCEL,
    "openai-agents-openinference": OPENAI_AGENTS,
    "openai-agents-openllmetry": OPENAI_AGENTS,
    "langchain-openinference": LANGCHAIN,
    "traceloop-sdk": TRACELOOP,
}


def value(v: AnyValue) -> object:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "array_value":
        return tuple(value(x) for x in v.array_value.values)
    return str(v)


def replay(capture: str) -> list[ReadableSpan]:
    """The capture's spans as the SDK hands them to a processor, in the order they ended."""
    request = ExportTraceServiceRequest()
    request.ParseFromString((FIXTURES / capture / "otlp.pb").read_bytes())
    spans = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                span_id = int.from_bytes(s.span_id, "big")
                parent = int.from_bytes(s.parent_span_id, "big") if s.parent_span_id else 0
                trace_id = int.from_bytes(s.trace_id, "big")
                spans.append(
                    ReadableSpan(
                        name=s.name,
                        context=SpanContext(trace_id, span_id, False),
                        parent=SpanContext(trace_id, parent, False) if parent else None,
                        attributes={a.key: value(a.value) for a in s.attributes},  # type: ignore[misc]
                        events=[
                            Event(e.name, {a.key: value(a.value) for a in e.attributes}, e.time_unix_nano)  # type: ignore[misc]
                            for e in s.events
                        ],
                        status=Status(StatusCode(s.status.code), s.status.message or None),
                        start_time=s.start_time_unix_nano,
                        end_time=s.end_time_unix_nano,
                        instrumentation_scope=InstrumentationScope(ss.scope.name, ss.scope.version),
                    )
                )
    spans.sort(key=lambda s: s.end_time or 0)
    return spans


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_every_captured_framework_counts_as_the_receiver_counts_it(capture: str) -> None:
    # A threshold no capture reaches: the counts are the point.
    registry = th.Registry(failure_threshold=100)
    processor = th.ToolHealthSpanProcessor(registry)
    spans = replay(capture)
    assert spans
    for span in spans:
        processor.on_end(span)
    processor.force_flush()
    assert counts(registry) == CAPTURES[capture]
    assert processor.feed.waiting == 0


# --- one call, one record -------------------------------------------------------------------


def test_a_helper_call_inside_its_tool_span_is_one_record(registry: th.Registry) -> None:
    p, exporter = provider(registry)
    tracer = p.get_tracer("my-agent")
    for _ in range(3):
        with pytest.raises(ConnectionError):
            with execute_tool(tracer, "search"):
                with registry.call("search"):
                    raise ConnectionError("down")
    assert counts(registry) == {"search": (0, 3, 0)}
    assert registry.breaker_state("search") == "open"
    # The span was annotated as the Rust layer annotates its tool spans.
    decisions = [s.attributes.get("tool_health.gate.decision") for s in exporter.get_finished_spans()]  # type: ignore[union-attr]
    assert decisions == ["allowed"] * 3
    # A refusal inside the tool span: the SDK records `Refused` on it; nothing but the refusal.
    with pytest.raises(th.Refused):
        with execute_tool(tracer, "search"):
            with registry.call("search"):
                pytest.fail("refused")
    refused = exporter.get_finished_spans()[-1]
    assert refused.attributes is not None
    assert refused.attributes["tool_health.gate.decision"] == "refused"
    assert refused.attributes["error.type"] == "circuit_breaker_open"
    s = registry.snapshot("search")
    assert s is not None and (s.failure_count, s.refused_count) == (3, 1)


def test_a_tool_name_set_only_at_the_spans_end_is_still_one_record(registry: th.Registry) -> None:
    # The OpenAI Agents SDK through OpenInference: the current span at entry is named after
    # the tool; `tool.name` comes at its end.
    p, _ = provider(registry)
    tracer = p.get_tracer("openinference.instrumentation.openai_agents")
    with tracer.start_as_current_span("weather") as span:
        with registry.call("weather"):
            pass
        span.set_attribute("openinference.span.kind", "TOOL")
        span.set_attribute("tool.name", "weather")
        span.set_status(Status(StatusCode.OK))
    assert counts(registry) == {"weather": (1, 0, 0)}


def test_a_framework_span_inside_the_helpers_call_is_part_of_it(registry: th.Registry) -> None:
    # LangChain through OpenInference: the tool's span starts and ends inside the call.
    p, _ = provider(registry)
    tracer = p.get_tracer("openinference.instrumentation.langchain")

    async def main() -> None:
        async with registry.call("weather"):
            with tracer.start_as_current_span(
                "weather", attributes={"openinference.span.kind": "TOOL", "tool.name": "weather"}
            ) as span:
                span.set_status(Status(StatusCode.ERROR))
            raise ValueError("the tool failed")

    import asyncio

    with pytest.raises(ValueError):
        asyncio.run(main())
    assert counts(registry) == {"weather": (0, 1, 0)}
    # Outside any helper call the same span counts on its own.
    with tracer.start_as_current_span(
        "weather", attributes={"openinference.span.kind": "TOOL", "tool.name": "weather"}
    ) as span:
        span.set_status(Status(StatusCode.OK))
    assert counts(registry) == {"weather": (1, 1, 0)}


def test_another_tools_helper_call_inside_a_tool_span_leaves_its_record(registry: th.Registry) -> None:
    p, _ = provider(registry)
    tracer = p.get_tracer("my-agent")
    with execute_tool(tracer, "plan"):
        with registry.call("search"):
            pass
    assert counts(registry) == {"plan": (1, 0, 0), "search": (1, 0, 0)}


def test_a_refused_exception_in_a_span_is_no_failure(registry: th.Registry) -> None:
    # A refusal raised in a framework's tool span the helper could not mark (not current).
    p, _ = provider(registry)
    tracer = p.get_tracer("my-agent")
    registry.force_open("search")
    with pytest.raises(th.Refused):
        with execute_tool(tracer, "search"):
            raise registry_refusal(registry)
    s = registry.snapshot("search")
    assert s is not None and s.failure_count == 0


def registry_refusal(registry: th.Registry) -> th.Refused:
    try:
        registry._begin("search")
    except th.Refused as e:
        return e
    raise AssertionError("not refused")


def test_the_processor_alone_brings_a_tool_back(registry: th.Registry, clock: th.ManualClock) -> None:
    # No gate in the agent: three failing spans trip the breaker; after the cooldown the agent
    # calls the tool again, and that call's span is the probe: its success closes the breaker.
    p, _ = provider(registry)
    tracer = p.get_tracer("my-agent")
    for _ in range(3):
        with pytest.raises(OSError):
            with execute_tool(tracer, "search"):
                raise OSError("down")
    assert registry.breaker_state("search") == "open"
    clock.advance(31)
    with execute_tool(tracer, "search"):
        pass
    assert registry.breaker_state("search") == "closed"


# --- what the processor reads of a span -----------------------------------------------------


class Watched(Mapping[str, object]):
    """Attributes that record each key looked up and refuse to be walked: the processor must
    ask by key, never read a span whole."""

    def __init__(self, values: dict[str, object]) -> None:
        self._values = values
        self.asked: list[str] = []

    def __getitem__(self, key: str) -> object:
        self.asked.append(key)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the processor walked the attributes")

    def __len__(self) -> int:
        return len(self._values)


class WatchedSpan:
    """A finished span (public attributes only, as any SDK-compatible span object) that records
    which of its fields were read."""

    def __init__(self, name: str, scope: str, attributes: dict[str, object]) -> None:
        self.read: set[str] = set()
        self._fields: dict[str, object] = {
            "name": name,
            "instrumentation_scope": InstrumentationScope(scope),
            "attributes": Watched(attributes),
            "status": Status(StatusCode.OK),
            "events": (),
            "context": SpanContext(1, 0x42, False),
            "parent": None,
            "start_time": 1_000_000_000,
            "end_time": 1_040_000_000,
        }

    def __getattr__(self, field: str) -> object:
        if field.startswith("_"):
            raise AttributeError(field)  # no SDK slots: the public fields
        self.read.add(field)
        return self._fields[field]

    @property
    def asked(self) -> list[str]:
        attributes = self._fields["attributes"]
        assert isinstance(attributes, Watched)
        return attributes.asked


def test_a_span_that_can_be_no_tool_call_is_asked_a_few_keys_and_nothing_else(registry: th.Registry) -> None:
    processor = th.ToolHealthSpanProcessor(registry)
    attributes: dict[str, object] = {f"llm.input_messages.{i}.message.content": "x" * 100 for i in range(50)}
    attributes["gen_ai.operation.name"] = "chat"
    span = WatchedSpan("chat gpt-5", "pydantic-ai", attributes)
    processor.on_end(span)  # type: ignore[arg-type]
    # The target and the keys that would make it some convention's tool span: no status,
    # events, ids or times, and none of the span's own attributes.
    assert span.read == {"name", "instrumentation_scope", "attributes"}
    assert len(span.asked) <= 10 and not any(k.startswith("llm.") for k in span.asked)
    assert registry.tracked_tools == 0


def test_a_tool_span_is_read_by_the_keys_its_convention_reads(registry: th.Registry) -> None:
    processor = th.ToolHealthSpanProcessor(registry)
    span = WatchedSpan(
        "execute_tool search",
        "pydantic-ai",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"query": "rust"}',
            "gen_ai.tool.call.result": "results",
        },
    )
    processor.on_end(span)  # type: ignore[arg-type]
    asked = set(span.asked)
    assert {"gen_ai.tool.name", "gen_ai.operation.name", "error.type"} <= asked
    assert not asked & {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
    assert len(span.asked) == len(asked), "each key asked once"
    # No claim and no nested call: the ids are not needed.
    assert "context" not in span.read and "parent" not in span.read
    assert counts(registry) == {"search": (1, 0, 0)}


def test_a_name_that_is_not_utf8_is_read_with_replacement_characters(registry: th.Registry) -> None:
    p, _ = provider(registry)
    with pytest.raises(RuntimeError):
        with execute_tool(p.get_tracer("t"), "se\ud800arch"):
            raise RuntimeError("x")
    # The lone surrogate's three bytes, each replaced (as before the reading on demand).
    assert counts(registry) == {"se\ufffd\ufffd\ufffdarch": (0, 1, 0)}
