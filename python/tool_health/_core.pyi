# The extension module tool_health._core (Rust, PyO3): the tool-health crate's registry,
# breakers and span inference. Applications import from `tool_health`, which re-exports these.
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from types import TracebackType
from typing import Final, Literal, final

from typing_extensions import Self, disjoint_base

REFUSAL_MESSAGE: Final[str]
"""The text a refused call reports to the model: every refusal's text begins with it."""
DEFAULT_MAX_TOOLS: Final[int]
DEFAULT_MAX_NAME_LEN: Final[int]

from ._call import Classify
from ._types import BreakerState, FleetStatus, HealthStatus, Outcome

__all__ = [
    "DEFAULT_MAX_NAME_LEN",
    "DEFAULT_MAX_TOOLS",
    "REFUSAL_MESSAGE",
    "Fleet",
    "FleetError",
    "InvalidToolName",
    "ManualClock",
    "MetricSource",
    "Permit",
    "Refused",
    "Registry",
    "SettingError",
    "Snapshot",
    "SpanFeed",
    "ToolCall",
    "_check_timeout",
    "join_fleet",
    "metric_sources",
]

class SettingError(ValueError):
    """A setting outside its range: `field` names it, `found` says what was given, `allowed`
    the range."""

    field: str
    found: str
    allowed: str

class Refused(Exception):
    """The breaker refused the call; the tool was not called. Not a failure of the tool:
    `str(e)` begins with REFUSAL_MESSAGE, `retry_after` is in how many seconds the gate could
    next admit a call (`math.inf`: not in any foreseeable time)."""

    tool: str
    retry_after: float

class InvalidToolName(ValueError):
    """A tool name longer than the registry's `max_name_len` bytes (the model's mistake:
    tell it so). Nothing was called, recorded or copied."""

    length: int
    max: int

@final
class ManualClock:
    """A clock that moves only when told: tests move time by hand."""

    def __new__(cls) -> Self: ...
    def advance(self, seconds: float) -> None:
        """Moves the time forward by `seconds` (0 or more)."""
    def now(self) -> float:
        """Seconds since the clock's origin."""

@final
class Permit:
    """Proof of admission: record the call's outcome through it, once."""

    @property
    def is_probe(self) -> bool:
        """Whether this call is the breaker's single probe."""
    @property
    def tool(self) -> str: ...

@final
class Snapshot:
    """One tool's stats and breaker at one instant."""

    @property
    def tool(self) -> str: ...
    @property
    def status(self) -> HealthStatus: ...
    @property
    def score(self) -> float: ...
    @property
    def success_rate(self) -> float: ...
    @property
    def ewma_success(self) -> float: ...
    @property
    def total_calls(self) -> int: ...
    @property
    def success_count(self) -> int: ...
    @property
    def failure_count(self) -> int: ...
    @property
    def ignored_count(self) -> int: ...
    @property
    def refused_count(self) -> int: ...
    @property
    def cancelled_count(self) -> int: ...
    @property
    def shadow_refused_count(self) -> int: ...
    @property
    def avg_duration(self) -> float:
        """Seconds."""
    @property
    def max_duration(self) -> float:
        """Seconds."""
    @property
    def breaker(self) -> BreakerState: ...
    @property
    def consecutive_failures(self) -> int: ...
    @property
    def retry_after(self) -> float | None:
        """While refused: seconds until the gate could next admit a call; None while it
        admits calls."""

@disjoint_base
class Registry:
    """Per-tool health stats and circuit breakers (the Rust `ToolHealthRegistry`)."""

    def __new__(
        cls,
        failure_threshold: int = 3,
        recovery: float = 30.0,
        probe_timeout: float = 30.0,
        tools: Iterable[str] | None = None,
        max_tools: int = 10_000,
        *,
        max_name_len: int = 256,
        clock: ManualClock | None = None,
        log_transitions: bool = False,
    ) -> Self: ...
    def allow(self, tool: str) -> bool:
        """The gate: may a call go through now? May grant the single probe."""
    def check(self, tool: str) -> Permit | None:
        """The gate with its permit, or None when refused."""
    def is_available(self, tool: str) -> bool:
        """What `allow` would answer now, consuming nothing."""
    def record_success(self, tool: str, seconds: float = 0.0) -> None: ...
    def record_failure(self, tool: str, seconds: float = 0.0) -> None: ...
    def record_ignored(self, tool: str, seconds: float = 0.0) -> None: ...
    def record(
        self,
        tool: str,
        permit: Permit,
        outcome: Outcome,
        seconds: float = 0.0,
        *,
        error_type: str | None = None,
    ) -> None:
        """Records a call admitted with `permit` (once per permit)."""
    def _begin(self, tool: str) -> Permit: ...
    def call(
        self, tool: str, timeout: float | None = None, classify: Classify | None = None
    ) -> ToolCall:
        """One call of `tool` as a context manager (``with`` or ``async with``): gated on
        entry (`Refused` raised when the breaker refuses it), recorded on exit."""
    def _finish(
        self,
        permit: Permit,
        outcome: Outcome | Literal["unrecorded"],
        error_type: str | None = None,
        timeout: float | None = None,
    ) -> str: ...
    def snapshot(self, tool: str) -> Snapshot | None: ...
    def health_summary(self) -> list[Snapshot]: ...
    def unavailable_tools(self) -> list[tuple[str, float]]: ...
    def breaker_state(self, tool: str) -> BreakerState: ...
    def health_status(self, tool: str) -> HealthStatus: ...
    def force_open_for(self, tool: str, seconds: float) -> bool: ...
    def force_open(self, tool: str) -> bool: ...
    def force_closed(self, tool: str) -> bool: ...
    def release_control(self, tool: str) -> None: ...
    def set_shadow(self, tool: str, on: bool) -> bool: ...
    def reset(self, tool: str) -> None: ...
    @property
    def tracked_tools(self) -> int: ...
    @property
    def max_name_len(self) -> int: ...
    def now(self) -> float:
        """The registry's clock, in seconds."""

@final
class ToolCall:
    """One call of one tool: a context manager, sync (``with``) or async (``async with``).

    After the block: `outcome` is what was recorded ("success", "failure", "ignored",
    "cancelled" or "unrecorded"), `timed_out` whether the call overran its timeout."""

    def __new__(
        cls,
        registry: Registry,
        tool: str,
        timeout: float | None = None,
        classify: Classify | None = None,
    ) -> Self: ...
    @property
    def tool(self) -> str:
        """The tool's name."""
    @property
    def is_probe(self) -> bool:
        """Whether this call holds the breaker's single probe."""
    @property
    def permit(self) -> Permit | None:
        """The permit, once the gate admitted the call."""
    @property
    def outcome(self) -> str | None:
        """What was recorded (None before the call ends, or when it was refused)."""
    @property
    def timed_out(self) -> bool:
        """Whether the call overran its timeout."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]: ...
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Awaitable[Literal[False]]: ...

def _check_timeout(timeout: float | None) -> None: ...

@final
class SpanFeed:
    """Feeds a registry from finished OpenTelemetry Python spans (the span processor's core)."""

    def __new__(
        cls,
        registry: Registry,
        *,
        strict: bool = False,
        caller_errors: list[str] | None = None,
        open_calls: ContextVar[tuple[str, ...]] | None = None,
    ) -> Self: ...
    def on_end(self, span: object) -> None: ...
    def tool_name(self, span: object) -> str | None: ...
    def is_call_of(self, span: object, tool: str) -> bool: ...
    def claim(self, span_id: int, tool: str) -> None: ...
    def flush(self) -> None: ...
    @property
    def waiting(self) -> int: ...

@final
class MetricSource:
    """One instrument of the Rust crate's publish_metrics, to be created on a Python meter."""

    @property
    def kind(self) -> Literal["gauge", "counter", "histogram"]: ...
    @property
    def name(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def boundaries(self) -> list[float] | None: ...
    def collect(self) -> list[tuple[float | int, dict[str, str | bool | int | float]]]: ...
    def attach(self, record: Callable[..., object]) -> None: ...

def metric_sources(registry: Registry) -> list[MetricSource]: ...

class FleetError(Exception):
    """Fleet mode could not do something (a setting, the store out of reach, credentials
    refused, the fleet stopped). Never holds a credential."""

@final
class Fleet:
    """A running fleet member beside one registry."""

    def status(self) -> FleetStatus: ...
    def wait_connected(self, timeout: float) -> None: ...
    def sync_now(self) -> None: ...
    def force_open(self, tool: str, seconds: float | None = None) -> None: ...
    def force_closed(self, tool: str) -> None: ...
    def release_control(self, tool: str) -> None: ...
    def set_shadow(self, tool: str, on: bool) -> None: ...
    def reset(self, tool: str) -> None: ...
    def shutdown(self) -> None: ...

def join_fleet(
    registry: Registry,
    url: str,
    *,
    prefix: str | None = None,
    poll_interval: float | None = None,
    command_timeout: float | None = None,
    probe_lease: float | None = None,
    username: str | None = None,
    password: str | None = None,
    connect_timeout: float | None = None,
) -> Fleet:
    """Joins `registry` to the fleet on the store at `url` (``redis://host:port/db``): the
    crate's fleet mode, so Python workers and Rust replicas share trips, one probe per fleet
    and operator controls. Returns at once; `connect_timeout` seconds: wait for the store."""
