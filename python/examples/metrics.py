"""The Rust crate's metrics on an OpenTelemetry Python meter: the same instrument names, units
and attributes, so the shipped Grafana dashboards and alert rules read a Python agent.
Run: python examples/metrics.py"""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tool_health import Registry, publish_metrics

registry = Registry()
reader = InMemoryMetricReader()  # your OTLP or Prometheus reader in production
provider = MeterProvider(metric_readers=[reader])
publish_metrics(registry, provider.get_meter("tool_health"))

with registry.call("search"):
    pass

data = reader.get_metrics_data()
assert data is not None
names = sorted(m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics)
print(names)
assert names == [
    "gen_ai.execute_tool.duration",
    "tool_health.breaker.state",
    "tool_health.breaker.transitions",
    "tool_health.calls",
    "tool_health.score",
]
