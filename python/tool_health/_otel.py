"""OpenTelemetry: the span processor (spans into the Rust span core) and the metrics (the
Rust crate's instruments on a Python meter). Imported when first named: the OpenTelemetry SDK
is needed only here."""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from . import _core

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._call import Registry


class ToolHealthSpanProcessor(SpanProcessor):
    """Feeds a `Registry` from the tool calls in finished OpenTelemetry spans.

    Add it to the `TracerProvider` the agent's spans end in, beside the exporter's processor.
    Each finished span is read by the Rust span core — the same conventions as the Rust span
    processor and the OTLP receiver: GenAI ``execute_tool``, OpenInference ``TOOL``,
    OpenLLMetry, Pydantic AI, the OpenAI Agents SDK's bridges, LangChain through OpenInference,
    MCP client spans, the Vercel AI SDK — and its outcome recorded at once (no export delay).

    A call both gated by the call helper (`Registry.call`, `Registry.tool`) and seen here is
    one record, the helper's: this processor skips the tool span that was current when the
    helper gated the call (when it ends as a span of the same tool), and a span of the same tool
    that ends inside the helper's call (a framework span made inside it).

    `strict`: a tool span that marks no outcome reads as cancelled. `caller_errors`: the
    ``error.type`` values and exception types that are the caller's fault, in place of the
    defaults.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        strict: bool = False,
        caller_errors: Iterable[str] | None = None,
    ) -> None:
        if registry._open is None:
            registry._open = ContextVar("tool_health_open_calls", default=())
        self._feed = _core.SpanFeed(
            registry,
            strict=strict,
            caller_errors=None if caller_errors is None else list(caller_errors),
            open_calls=registry._open,
        )
        # The SDK calls `on_end` for every span: straight into Rust, no Python frame.
        self.on_end = self._feed.on_end  # type: ignore[method-assign]
        registry._feed = self._feed

    @property
    def feed(self) -> _core.SpanFeed:
        """The Rust feed spans go into."""
        return self._feed

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._feed.on_end(span)

    def shutdown(self) -> None:
        self._feed.flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._feed.flush()
        return True


def publish_metrics(registry: Registry, meter: Meter) -> None:
    """Registers the tool-health instruments on an OpenTelemetry Python `meter`: the Rust
    crate's own, with its names, units, descriptions and attributes —

    ========================================  ==================  ============
    ``tool_health.score``                     observable gauge    ``1``
    ``tool_health.breaker.state``             observable gauge    ``1``
    ``tool_health.calls``                     observable counter  ``{call}``
    ``tool_health.breaker.transitions``       observable counter  ``{transition}``
    ``gen_ai.execute_tool.duration``          histogram           ``s`` (GenAI buckets)
    ========================================  ==================  ============

    — so the shipped Grafana dashboards and alert rules work on a Python agent. The gauges and
    counters read the registry when the SDK collects; every finished call is recorded into the
    histogram from now on. Call it once per meter.
    """
    for source in _core.metric_sources(registry):
        if source.kind == "histogram":
            histogram = meter.create_histogram(
                source.name,
                unit=source.unit,
                description=source.description,
                explicit_bucket_boundaries_advisory=source.boundaries,
            )
            source.attach(histogram.record)
            continue
        callback = _observe(source)
        if source.kind == "gauge":
            meter.create_observable_gauge(
                source.name,
                callbacks=[callback],
                unit=source.unit,
                description=source.description,
            )
        else:
            meter.create_observable_counter(
                source.name,
                callbacks=[callback],
                unit=source.unit,
                description=source.description,
            )


def _observe(
    source: _core.MetricSource,
) -> Callable[[CallbackOptions], Sequence[Observation]]:
    def callback(options: CallbackOptions) -> Sequence[Observation]:
        return [Observation(value, attributes) for value, attributes in source.collect()]

    return callback
