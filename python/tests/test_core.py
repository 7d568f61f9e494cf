"""The core semantics through the binding, against the cases the Rust tests pin: the trip,
the single probe (threads and asyncio tasks), the lease, stale results, caller errors,
cancellation, timeouts, hostile names, settings out of range."""

from __future__ import annotations

import asyncio
import inspect
import math
import threading

import pytest

import tool_health as th


def fail(registry: th.Registry, tool: str, n: int = 1) -> None:
    for _ in range(n):
        assert registry.allow(tool)
        registry.record_failure(tool, 0.5)


def counts(registry: th.Registry, tool: str) -> tuple[int, int, int, int, int]:
    s = registry.snapshot(tool)
    assert s is not None
    return (
        s.success_count,
        s.failure_count,
        s.ignored_count,
        s.refused_count,
        s.cancelled_count,
    )


def test_three_failures_trip_then_one_probe_closes(
    registry: th.Registry, clock: th.ManualClock
) -> None:
    fail(registry, "sql", 2)
    assert registry.breaker_state("sql") == "closed"
    fail(registry, "sql")
    assert registry.breaker_state("sql") == "open"
    assert not registry.allow("sql")
    assert registry.check("sql") is None
    assert registry.health_status("sql") == "unhealthy"
    assert registry.unavailable_tools() == [("sql", 30.0)]
    # The cooldown is inclusive: at exactly 30 s the probe is granted, to one caller.
    clock.advance(29.999)
    assert not registry.is_available("sql")
    clock.advance(0.001)
    assert registry.is_available("sql")
    permit = registry.check("sql")
    assert permit is not None and permit.is_probe
    assert registry.breaker_state("sql") == "half_open"
    assert registry.check("sql") is None, "one probe only"
    registry.record("sql", permit, "success", 0.04)
    assert registry.breaker_state("sql") == "closed"
    s = registry.snapshot("sql")
    assert s is not None
    assert (s.success_count, s.failure_count, s.refused_count) == (1, 3, 3)
    assert s.consecutive_failures == 0
    assert s.max_duration == 0.5


def test_ewma_and_score_are_the_crates(registry: th.Registry) -> None:
    # SPEC: failure → 0.7, failure → 0.49, success → 0.643; one failure scores 0.49.
    registry.record_failure("t")
    s = registry.snapshot("t")
    assert s is not None and s.ewma_success == pytest.approx(0.7) and s.score == pytest.approx(0.49)
    registry.record_failure("t")
    registry.record_success("t")
    s = registry.snapshot("t")
    assert s is not None and s.ewma_success == pytest.approx(0.643)
    assert registry.snapshot("never_seen") is None
    assert registry.tracked_tools == 1


def test_is_available_agrees_with_allow_and_creates_nothing(
    registry: th.Registry, clock: th.ManualClock
) -> None:
    assert registry.is_available("ghost") and registry.tracked_tools == 0
    fail(registry, "t", 3)
    for step in [0.0, 10.0, 20.0, 0.0, 5.0, 10.0, 30.0]:
        clock.advance(step)
        expected = registry.is_available("t")
        assert registry.allow("t") == expected


def test_a_single_probe_under_threads(registry: th.Registry, clock: th.ManualClock) -> None:
    fail(registry, "t", 3)
    clock.advance(30)
    barrier = threading.Barrier(16)
    permits: list[th.Permit | None] = []
    lock = threading.Lock()

    def race() -> None:
        barrier.wait()
        p = registry.check("t")
        with lock:
            permits.append(p)

    threads = [threading.Thread(target=race) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    granted = [p for p in permits if p is not None]
    assert len(granted) == 1 and granted[0].is_probe
    assert counts(registry, "t")[3] == 15


def test_a_single_probe_under_asyncio_tasks(registry: th.Registry, clock: th.ManualClock) -> None:
    fail(registry, "t", 3)
    clock.advance(30)

    async def main() -> list[str]:
        release = asyncio.Event()

        async def one() -> str:
            try:
                async with registry.call("t"):
                    await release.wait()
                    return "ran"
            except th.Refused as e:
                assert str(e).startswith(th.REFUSAL_MESSAGE)
                return "refused"

        tasks = [asyncio.create_task(one()) for _ in range(10)]
        await asyncio.sleep(0)
        release.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert sorted(results) == ["ran"] + ["refused"] * 9
    assert registry.breaker_state("t") == "closed"


def test_the_probe_lease_expires(registry: th.Registry, clock: th.ManualClock) -> None:
    fail(registry, "t", 3)
    clock.advance(30)
    probe = registry.check("t")
    assert probe is not None and probe.is_probe
    clock.advance(10)  # the lease (10 s) ends: open again, with no call to notice it
    assert registry.breaker_state("t") == "open"
    assert not registry.is_available("t")
    # A late success of the expired probe does not close: the cooldown runs from the lease's end.
    registry.record("t", probe, "success", 10.0)
    assert registry.breaker_state("t") == "open"
    clock.advance(30)
    second = registry.check("t")
    assert second is not None and second.is_probe


def test_stale_results(registry: th.Registry, clock: th.ManualClock) -> None:
    old = registry.check("t")
    assert old is not None
    fail(registry, "t", 3)
    # A success while open describes a pre-trip world: ignored.
    registry.record("t", old, "success", 0.1)
    assert registry.breaker_state("t") == "open"
    assert registry.snapshot("t").consecutive_failures == 3  # type: ignore[union-attr]
    clock.advance(30)
    probe = registry.check("t")
    assert probe is not None
    registry.record("t", probe, "success")
    assert registry.breaker_state("t") == "closed"
    # A failure of an older episode cannot re-open the new one.
    stale = th.Registry(failure_threshold=1, recovery=30.0, clock=clock)
    before = stale.check("s")
    stale.record_failure("s")
    clock.advance(30)
    p = stale.check("s")
    assert p is not None
    stale.record("s", p, "success")
    assert before is not None
    stale.record("s", before, "failure")
    assert stale.breaker_state("s") == "closed"


def test_a_permit_records_once_and_only_in_its_registry(registry: th.Registry) -> None:
    p = registry.check("t")
    assert p is not None
    registry.record("t", p, "success")
    with pytest.raises(ValueError, match="recorded already"):
        registry.record("t", p, "failure")
    other = th.Registry()
    q = other.check("t")
    assert q is not None
    with pytest.raises(ValueError, match="another registry"):
        registry.record("t", q, "success")
    with pytest.raises(ValueError, match="outcome"):
        registry.record("t", registry.check("t"), "maybe")  # type: ignore[arg-type]


def test_caller_errors_are_ignored_reraised_and_give_the_probe_back(
    registry: th.Registry, clock: th.ManualClock
) -> None:
    fail(registry, "t", 3)
    clock.advance(30)

    def classify(e: BaseException) -> th.ErrorClass:
        return th.ErrorClass.caller_error("invalid_arguments")

    with pytest.raises(KeyError):
        with registry.call("t", classify=classify) as call:
            assert call.is_probe
            raise KeyError("bad argument from the model")
    assert call.outcome == "ignored"
    assert counts(registry, "t")[2] == 1
    # The probe went back at once: the next call probes.
    assert registry.breaker_state("t") == "open"
    p = registry.check("t")
    assert p is not None and p.is_probe
    # The string forms too.
    for verdict, outcome in [("caller_error", "ignored"), ("failure", "failure"), ("unrecorded", "unrecorded")]:
        with pytest.raises(ValueError):
            with registry.call("u", classify=lambda e, v=verdict: v) as c:  # type: ignore[misc]
                raise ValueError("x")
        assert c.outcome == outcome


def test_an_exception_is_a_failure_named_by_its_class(registry: th.Registry) -> None:
    for _ in range(3):
        with pytest.raises(ConnectionError):
            with registry.call("fetch"):
                raise ConnectionError("upstream down")
    assert registry.breaker_state("fetch") == "open"
    with pytest.raises(th.Refused) as refused:
        with registry.call("fetch"):
            pytest.fail("a refused call must not run")
    assert str(refused.value).startswith(th.REFUSAL_MESSAGE)
    assert refused.value.retry_after == 30.0
    assert refused.value.tool == "fetch"
    assert "retry in 30.0 s" in str(refused.value)


def test_a_broken_classifier_leaves_the_tools_exception_a_failure(registry: th.Registry) -> None:
    def broken(e: BaseException) -> th.ErrorClass:
        raise RuntimeError("classifier bug")

    with pytest.raises(ValueError):
        with registry.call("t", classify=broken) as call:
            raise ValueError("tool")
    assert call.outcome == "failure"


def test_cancellation_is_recorded_cancelled_and_the_probe_goes_back(
    registry: th.Registry, clock: th.ManualClock
) -> None:
    fail(registry, "t", 3)
    clock.advance(30)

    async def main() -> None:
        started = asyncio.Event()

        async def probe() -> None:
            async with registry.call("t") as call:
                assert call.is_probe
                started.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(probe())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert counts(registry, "t")[4] == 1
    p = registry.check("t")
    assert p is not None and p.is_probe, "the cancelled probe was given back"


def test_an_async_timeout_is_a_failure(registry: th.Registry) -> None:
    async def main() -> None:
        for _ in range(3):
            with pytest.raises(asyncio.TimeoutError):
                async with registry.call("slow", timeout=0.01):
                    await asyncio.Event().wait()

    asyncio.run(main())
    assert counts(registry, "slow")[1] == 3
    assert registry.breaker_state("slow") == "open"


def test_an_outer_cancellation_is_not_our_timeout(registry: th.Registry) -> None:
    async def main() -> None:
        async def body() -> None:
            async with registry.call("t", timeout=60):
                await asyncio.Event().wait()

        task = asyncio.create_task(body())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert counts(registry, "t")[4] == 1


def test_a_sync_call_that_overran_its_timeout_is_a_failure(
    registry: th.Registry, clock: th.ManualClock
) -> None:
    with registry.call("t", timeout=5) as call:
        clock.advance(6)
    assert call.timed_out and call.outcome == "failure"
    with registry.call("t", timeout=5) as call:
        clock.advance(5)
    assert not call.timed_out and call.outcome == "success"
    assert counts(registry, "t")[:2] == (1, 1)


def test_the_decorator_keeps_coroutine_functions_and_signatures(registry: th.Registry) -> None:
    @registry.tool("weather", timeout=5)
    async def weather(city: str, days: int = 1) -> str:
        """The forecast."""
        return f"{city}: sunny for {days}"

    @registry.tool
    def calc(x: int) -> int:
        return x * 2

    assert inspect.iscoroutinefunction(weather)
    assert weather.__name__ == "weather" and weather.__doc__ == "The forecast."
    assert list(inspect.signature(weather).parameters) == ["city", "days"]
    assert asyncio.run(weather("Paris", days=2)) == "Paris: sunny for 2"
    assert calc(21) == 42
    assert counts(registry, "weather")[0] == 1 and counts(registry, "calc")[0] == 1


def test_a_soft_refusal_is_the_tools_result(registry: th.Registry) -> None:
    @registry.tool("flaky", on_refusal="return")
    def flaky() -> str:
        raise OSError("down")

    for _ in range(3):
        with pytest.raises(OSError):
            flaky()
    text = flaky()
    assert text.startswith(th.REFUSAL_MESSAGE)


def test_hostile_names_over_256_bytes_are_refused_and_never_tracked(registry: th.Registry) -> None:
    name = "x" * 257
    assert not registry.allow(name)
    assert registry.check(name) is None
    assert not registry.is_available(name)
    with pytest.raises(th.InvalidToolName) as e:
        with registry.call(name):
            pytest.fail("never called")
    assert str(e.value) == "invalid tool name: 257 bytes, longer than the 256 allowed"
    assert e.value.length == 257 and e.value.max == 256
    assert isinstance(e.value, ValueError) and not isinstance(e.value, th.Refused)
    registry.record_failure(name)
    assert registry.tracked_tools == 0
    assert registry.snapshot(name) is None
    # 256 bytes is a name.
    assert registry.allow("y" * 256)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"failure_threshold": -1}, "failure_threshold"),
        ({"failure_threshold": 2**32}, "failure_threshold"),
        ({"failure_threshold": 10**100}, "failure_threshold"),
        ({"failure_threshold": 2.5}, "failure_threshold"),
        ({"failure_threshold": True}, "failure_threshold"),
        ({"recovery": -1.0}, "recovery"),
        ({"recovery": math.nan}, "recovery"),
        ({"recovery": math.inf}, "recovery"),
        ({"recovery": 10**30}, "recovery"),
        ({"recovery": "30"}, "recovery"),
        ({"probe_timeout": -0.001}, "probe_timeout"),
        ({"max_tools": 0}, "max_tools"),
        ({"max_tools": 2**64}, "max_tools"),
        ({"max_name_len": 0}, "max_name_len"),
        ({"max_name_len": 65_537}, "max_name_len"),
        ({"tools": "search"}, "tools"),
        ({"tools": [1]}, "tools"),
        ({"tools": ["x" * 257]}, "tools"),
        ({"tools": ["a", "b"], "max_tools": 1}, "tools"),
        ({"clock": object()}, "clock"),
    ],
)
def test_settings_out_of_range(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(th.SettingError) as e:
        th.Registry(**kwargs)  # type: ignore[arg-type]
    assert e.value.field == field
    assert isinstance(e.value, ValueError)
    assert str(e.value).startswith(f"invalid setting `{field}`:")
    assert e.value.allowed in str(e.value)


def test_settings_at_their_bounds() -> None:
    th.Registry(failure_threshold=0, recovery=0, probe_timeout=0, max_tools=1, max_name_len=1)
    th.Registry(failure_threshold=2**32 - 1, recovery=1e18, max_name_len=65_536)
    for bad in [0, -1, math.inf, math.nan, "1"]:
        with pytest.raises(th.SettingError) as e:
            th.Registry().call("t", timeout=bad)  # type: ignore[arg-type]
        assert e.value.field == "timeout"
    with pytest.raises(th.SettingError):
        th.ManualClock().advance(-1)
    with pytest.raises(th.SettingError):
        th.Registry().record_success("t", -1)


def test_operator_controls(registry: th.Registry, clock: th.ManualClock) -> None:
    assert registry.force_open_for("pay", 60)
    assert not registry.allow("pay")
    assert registry.unavailable_tools() == [("pay", 60.0)]
    clock.advance(60)
    assert registry.allow("pay")
    assert registry.force_open("pay")
    assert registry.unavailable_tools() == [("pay", math.inf)]
    with pytest.raises(th.Refused) as e:
        with registry.call("pay"):
            pass
    assert e.value.retry_after == math.inf and "until released" in str(e.value)
    registry.release_control("pay")
    fail(registry, "pay", 3)
    assert registry.force_closed("pay")
    assert registry.allow("pay"), "forced closed lets every call through"
    registry.reset("pay")
    s = registry.snapshot("pay")
    assert s is not None and s.failure_count == 0 and s.breaker == "closed"


def test_declared_tools_and_summary() -> None:
    registry = th.Registry(tools=["b", "a"])
    assert registry.tracked_tools == 2
    assert [s.tool for s in registry.health_summary()] == ["a", "b"]
    assert repr(registry.snapshot("a")).startswith('Snapshot(tool="a"')


def test_extreme_values_never_panic(clock: th.ManualClock) -> None:
    # Durations at the edges of what the core holds, through every entry point that takes one:
    # each answer is a value or a SettingError, never a Rust panic (PanicException).
    edges = [0.0, 1e-9, 1e9, 4e18, 1.8e19]
    for recovery in edges:
        for lease in edges:
            registry = th.Registry(failure_threshold=1, recovery=recovery, probe_timeout=lease, clock=clock)
            for step in edges:
                registry.record_failure("t", step)
                registry.allow("t")
                clock.advance(step)
                registry.check("t")
                registry.force_open_for("u", step)
                registry.unavailable_tools()
                registry.health_summary()
                try:
                    with registry.call("v", timeout=max(step, 1e-9)):
                        clock.advance(step)
                except th.Refused:
                    pass
    with pytest.raises(th.SettingError):
        th.Registry().record_success("t", 1e20)


def test_the_call_helper_is_one_rust_object_with_its_state_after_the_block(registry: th.Registry) -> None:
    call = registry.call("t")
    assert isinstance(call, th.ToolCall) and call.tool == "t"
    assert call.permit is None and call.outcome is None and not call.is_probe
    with call as entered:
        assert entered is call and call.permit is not None
    assert (call.outcome, call.timed_out) == ("success", False)
    # The permit was recorded through: a second record is refused.
    permit = call.permit
    assert permit is not None
    with pytest.raises(ValueError, match="recorded already"):
        registry.record("t", permit, "success")
    # Made directly, as `registry.call` makes it; the timeout is checked the same way.
    with th.ToolCall(registry, "u", 5) as direct:
        pass
    assert direct.outcome == "success"
    for bad in (0, -1, math.inf, True, "5"):
        with pytest.raises(th.SettingError, match="timeout"):
            registry.call("t", timeout=bad)
        with pytest.raises(th.SettingError, match="timeout"):
            th.ToolCall(registry, "t", bad)
    assert counts(registry, "t")[0] == 1 and counts(registry, "u")[0] == 1


def test_async_with_gives_the_call_and_records_a_classified_exception(registry: th.Registry) -> None:
    async def main() -> th.ToolCall:
        with pytest.raises(KeyError):
            async with registry.call("t", classify=lambda e: "caller_error") as call:
                assert call.tool == "t" and call.permit is not None
                raise KeyError("a bad argument")
        return call

    call = asyncio.run(main())
    assert call.outcome == "ignored"
    assert counts(registry, "t")[2] == 1
