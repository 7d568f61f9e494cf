"""tool-health: per-tool health stats and circuit breakers for AI-agent tools.

The Rust core of the ``tool-health`` crate, bound for Python: the same stats, breakers, probe
leases, stale-result rules, span conventions, classification, defaults and errors. Three ways
in:

* the call helper — ``registry.call(tool)`` (``with`` / ``async with``) and the
  ``@registry.tool(name)`` decorator: gate, timeout, outcome, cancellation;
* `ToolHealthSpanProcessor` — an OpenTelemetry SDK span processor: the tool calls in the
  spans an agent framework already makes feed the breakers, with no code in the agent;
* fleet mode — ``join_fleet(registry, "redis://...")``: trips, one probe and operator
  controls shared with every replica over Valkey/Redis, Rust services included;
* the gate by hand — ``registry.check(tool)`` / ``registry.record(tool, permit, outcome,
  seconds)``.

``docs/python.md`` in the repository is the guide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._call import Classify, ErrorClass, Registry
from ._core import (
    REFUSAL_MESSAGE,
    InvalidToolName,
    ManualClock,
    Permit,
    Refused,
    SettingError,
    Snapshot,
    SpanFeed,
    ToolCall,
)

try:
    from ._core import Fleet, FleetError, join_fleet
except ImportError:  # built without feature `fleet` (`--no-default-features --features abi3`)
    pass

if TYPE_CHECKING:
    from ._otel import ToolHealthSpanProcessor, publish_metrics

__all__ = [
    "REFUSAL_MESSAGE",
    "Classify",
    "ErrorClass",
    "Fleet",
    "FleetError",
    "InvalidToolName",
    "ManualClock",
    "Permit",
    "Refused",
    "Registry",
    "SettingError",
    "Snapshot",
    "SpanFeed",
    "ToolCall",
    "ToolHealthSpanProcessor",
    "join_fleet",
    "publish_metrics",
]

_OTEL = ("ToolHealthSpanProcessor", "publish_metrics")


def __getattr__(name: str) -> Any:
    # The OpenTelemetry parts are imported when first named: the rest needs no SDK.
    if name in _OTEL:
        from . import _otel

        return getattr(_otel, name)
    raise AttributeError(f"module 'tool_health' has no attribute {name!r}")
