"""Fleet mode from Python: registries joined over a real Valkey server with the crate's fleet
code share trips, one probe and operator controls. Two registries in this process are two
replicas (each its own fleet task and store connections), as two workers would be.

The server is the one the Rust fleet tests use (``TOOL_HEALTH_FLEET_TEST_SERVER``, set by
``.ci/run`` from ``scripts/valkey.sh``); without it the tests are skipped, and fail under
``CI=true``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

import tool_health as th

SERVER = os.environ.get("TOOL_HEALTH_FLEET_TEST_SERVER")

if not hasattr(th, "join_fleet"):
    pytest.skip("built without feature `fleet`", allow_module_level=True)
if not SERVER:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true: the fleet tests need TOOL_HEALTH_FLEET_TEST_SERVER")
    pytest.skip("no TOOL_HEALTH_FLEET_TEST_SERVER (bash scripts/valkey.sh)", allow_module_level=True)


def wait_for(what: str, condition: Callable[[], bool], deadline: float = 10.0) -> None:
    """Waits for an event of a real process (the fleet's task, the store), bounded."""
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def store() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert SERVER is not None
    server = subprocess.Popen(
        [SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, stopped as one
    )

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        wait_for("the store to listen", accepts)
        yield f"redis://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def replica(url: str, **kwargs: float) -> tuple[th.Registry, th.Fleet]:
    registry = th.Registry(failure_threshold=3, **kwargs)  # type: ignore[arg-type]
    fleet = th.join_fleet(registry, url, poll_interval=0.05, connect_timeout=10)
    return registry, fleet


def test_a_trip_spreads_and_controls_reach_every_replica(store: str) -> None:
    a, fleet_a = replica(store, recovery=60.0)
    b, fleet_b = replica(store, recovery=60.0)
    try:
        assert fleet_a.status()["connected"] and fleet_b.status()["replica"] != fleet_a.status()["replica"]
        for _ in range(3):
            with pytest.raises(ConnectionError):
                with a.call("search"):
                    raise ConnectionError("down")
        assert a.breaker_state("search") == "open"
        fleet_a.sync_now()
        wait_for("b to learn a's trip", lambda: not b.is_available("search"))
        with pytest.raises(th.Refused):
            with b.call("search"):
                pytest.fail("refused fleet-wide")
        assert b.snapshot("search").failure_count == 0  # type: ignore[union-attr]
        # An operator's force-open on one replica reaches the other.
        fleet_b.force_open("pay", 60)
        wait_for("a to learn the control", lambda: not a.is_available("pay"))
        fleet_b.release_control("pay")
        wait_for("a to learn the release", lambda: a.is_available("pay"))
    finally:
        fleet_a.shutdown()
        fleet_b.shutdown()
    with pytest.raises(th.FleetError):
        fleet_a.sync_now()
    assert a.allow("other"), "the registry works alone after shutdown"


def test_one_probe_for_the_whole_fleet(store: str) -> None:
    a, fleet_a = replica(store, recovery=1.0, probe_timeout=30.0)
    b, fleet_b = replica(store, recovery=1.0, probe_timeout=30.0)
    try:
        for _ in range(3):
            a.record_failure("search")
        fleet_a.sync_now()
        wait_for("b to open", lambda: b.breaker_state("search") == "open")
        # After the cooldown one replica wins the episode's probe; the other keeps refusing.
        def one_may_probe() -> bool:
            fleet_a.sync_now()
            fleet_b.sync_now()
            return a.is_available("search") != b.is_available("search")

        wait_for("the probe's claim", one_may_probe)
        permits = [a.check("search"), b.check("search")]
        granted = [p for p in permits if p is not None]
        assert len(granted) == 1 and granted[0].is_probe
        winner = a if permits[0] is not None else b
        winner.record("search", granted[0], "success")
        other = b if winner is a else a
        (fleet_a if winner is a else fleet_b).sync_now()
        wait_for("the recovery to spread", lambda: other.breaker_state("search") == "closed")
    finally:
        fleet_a.shutdown()
        fleet_b.shutdown()


def test_a_bad_url_is_a_fleet_error() -> None:
    with pytest.raises(th.FleetError):
        th.join_fleet(th.Registry(), "http://example.invalid")
    with pytest.raises(th.SettingError):
        th.join_fleet(th.Registry(), "redis://127.0.0.1:1", poll_interval=-1)
