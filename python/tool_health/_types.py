"""The literal types of the binding's values (runtime names for the stub's annotations)."""

from __future__ import annotations

from typing import Literal, TypedDict

Outcome = Literal["success", "failure", "ignored", "cancelled"]
"""An outcome `Registry.record` takes."""

BreakerState = Literal["closed", "open", "half_open"]
"""A breaker's state."""

HealthStatus = Literal["healthy", "degraded", "unhealthy"]
"""A tool's health status."""


class FleetStatus(TypedDict):
    """`Fleet.status()`: how the fleet is doing."""

    connected: bool
    """Whether the last exchange with the store succeeded."""
    sync_lag: float | None
    """Seconds since the last complete exchange with the store (None: none yet)."""
    last_error: str | None
    """The last connection or command error (redacted), if any since the last success."""
    replica: str
    """This replica's id in the store (random per start)."""
    applied: int
    """Decisions of other replicas applied here so far."""
    rejected: int
    """Values from the store not trusted so far."""
