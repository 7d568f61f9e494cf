"""`publish_metrics` on a real OpenTelemetry Python `MeterProvider` with an in-memory reader:
the Rust crate's instrument names, units, attributes and the GenAI buckets, so the shipped
dashboards and alert rules read a Python agent unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    Metric,
    NumberDataPoint,
)

import tool_health as th

GENAI_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]


@pytest.fixture
def reader(registry: th.Registry) -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    th.publish_metrics(registry, provider.get_meter("tool_health"))
    yield reader
    provider.shutdown()


def metrics(reader: InMemoryMetricReader) -> dict[str, Metric]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        m.name: m
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


def points(metric: Metric) -> dict[tuple[tuple[str, object], ...], NumberDataPoint]:
    return {
        tuple(sorted((p.attributes or {}).items())): p
        for p in metric.data.data_points
        if isinstance(p, NumberDataPoint)
    }


def test_the_rust_crates_instruments(registry: th.Registry, reader: InMemoryMetricReader) -> None:
    for _ in range(3):
        assert registry.allow("search")
        registry.record_failure("search", 0.5)
    assert not registry.allow("search")  # refused
    with registry.call("calc"):
        pass
    with pytest.raises(ValueError):
        with registry.call("calc"):
            raise ValueError("bad")
    m = metrics(reader)
    assert {
        name: (metric.unit, type(metric.data).__name__) for name, metric in m.items()
    } == {
        "tool_health.score": ("1", "Gauge"),
        "tool_health.breaker.state": ("1", "Gauge"),
        "tool_health.calls": ("{call}", "Sum"),
        "tool_health.breaker.transitions": ("{transition}", "Sum"),
        "gen_ai.execute_tool.duration": ("s", "Histogram"),
    }
    calls = points(m["tool_health.calls"])
    assert calls[(("gen_ai.tool.name", "search"), ("tool_health.outcome", "failure"))].value == 3
    assert calls[(("gen_ai.tool.name", "search"), ("tool_health.outcome", "refused"))].value == 1
    assert calls[(("gen_ai.tool.name", "calc"), ("tool_health.outcome", "success"))].value == 1
    assert calls[(("gen_ai.tool.name", "search"), ("tool_health.outcome", "cancelled"))].value == 0
    state = points(m["tool_health.breaker.state"])
    assert state[(("gen_ai.tool.name", "search"), ("tool_health.breaker.state", "open"))].value == 1
    assert state[(("gen_ai.tool.name", "search"), ("tool_health.breaker.state", "closed"))].value == 0
    transitions = points(m["tool_health.breaker.transitions"])
    key = (
        ("gen_ai.tool.name", "search"),
        ("tool_health.breaker.from", "closed"),
        ("tool_health.breaker.to", "open"),
    )
    assert transitions[key].value == 1
    score = points(m["tool_health.score"])
    assert score[(("gen_ai.tool.name", "search"),)].value == pytest.approx(0.3 * 0 + 0.7 * 0.343)
    duration = {
        tuple(sorted((p.attributes or {}).items())): p
        for p in m["gen_ai.execute_tool.duration"].data.data_points
        if isinstance(p, HistogramDataPoint)
    }
    search = duration[(("error.type", "_OTHER"), ("gen_ai.tool.name", "search"))]
    assert search.count == 3 and search.sum == pytest.approx(1.5)
    assert list(search.explicit_bounds) == GENAI_BUCKETS
    failed = duration[(("error.type", "ValueError"), ("gen_ai.tool.name", "calc"))]
    assert failed.count == 1
    assert duration[(("gen_ai.tool.name", "calc"),)].count == 1


def test_counters_never_go_down(registry: th.Registry, reader: InMemoryMetricReader) -> None:
    registry.record_failure("t")
    before = points(metrics(reader)["tool_health.calls"])
    registry.reset("t")
    after = points(metrics(reader)["tool_health.calls"])
    key = (("gen_ai.tool.name", "t"), ("tool_health.outcome", "failure"))
    assert before[key].value == 1 and after[key].value == 1
