"""Shared fixtures: a registry on a manual clock (no test sleeps to make time pass)."""

from __future__ import annotations

import pytest

import tool_health as th


@pytest.fixture
def clock() -> th.ManualClock:
    return th.ManualClock()


@pytest.fixture
def registry(clock: th.ManualClock) -> th.Registry:
    # The Rust tests' breaker: trips after 3, 30 s cooldown, 10 s probe lease.
    return th.Registry(failure_threshold=3, recovery=30.0, probe_timeout=10.0, clock=clock)
