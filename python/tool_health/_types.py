"""The literal types of the binding's values (runtime names for the stub's annotations)."""

from __future__ import annotations

from typing import Literal

Outcome = Literal["success", "failure", "ignored", "cancelled"]
"""An outcome `Registry.record` takes."""

BreakerState = Literal["closed", "open", "half_open"]
"""A breaker's state."""

HealthStatus = Literal["healthy", "degraded", "unhealthy"]
"""A tool's health status."""
