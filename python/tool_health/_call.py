"""The call helper: one tool call wrapped — gate, timeout, outcome, cancellation.

`registry.call(tool)` is a context manager (sync ``with`` and ``async with``) and
`registry.tool(name)` a decorator for ``def`` and ``async def`` functions. Both gate the call
(raising `Refused` when the breaker refuses it), time it on the registry's clock, and record
its outcome through the permit: a return is a success, an exception a failure unless
``classify`` says otherwise, a cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``)
is recorded as cancelled and gives a probe back at once, a timeout is a failure
(``error.type`` = ``timeout``). The exception is always re-raised: the helper records, it never
swallows.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar, overload

from . import _core
from ._core import Permit, Refused
from ._types import Outcome

if TYPE_CHECKING:
    from ._core import SpanFeed

P = ParamSpec("P")
R = TypeVar("R")

ErrorOutcome = Literal["failure", "caller_error", "success", "cancelled", "unrecorded"]


@dataclass(frozen=True)
class ErrorClass:
    """How a tool's exception counts: its outcome and its ``error.type``.

    Return one (or just its outcome's name) from a ``classify`` function.
    """

    outcome: ErrorOutcome
    error_type: str

    @staticmethod
    def failure(error_type: str) -> ErrorClass:
        """The tool failed: counts toward its breaker."""
        return ErrorClass("failure", error_type)

    @staticmethod
    def caller_error(error_type: str = "invalid_arguments") -> ErrorClass:
        """The caller's fault (bad arguments from the model): counted apart, never against
        the tool; a probe goes back."""
        return ErrorClass("caller_error", error_type)

    @staticmethod
    def success() -> ErrorClass:
        """An exception that says the tool works (e.g. "no results"): a success."""
        return ErrorClass("success", "")

    @staticmethod
    def cancelled() -> ErrorClass:
        """The call was given up before the tool answered: never fed to the breaker."""
        return ErrorClass("cancelled", "cancelled")

    @staticmethod
    def unrecorded(error_type: str) -> ErrorClass:
        """The exception says nothing about this tool (the call never reached it): nothing is
        recorded, a probe goes back at once."""
        return ErrorClass("unrecorded", error_type)


Classify = Callable[[BaseException], "ErrorClass | ErrorOutcome"]
"""A ``classify`` function: an exception → an `ErrorClass`, or an outcome's name."""

_RECORDED: dict[str, Outcome | Literal["unrecorded"]] = {
    "failure": "failure",
    "caller_error": "ignored",
    "success": "success",
    "cancelled": "cancelled",
    "unrecorded": "unrecorded",
}


def _error_type(exc: BaseException) -> str:
    # The exception's type as OpenTelemetry Python's `record_exception` writes
    # `exception.type` (`module.QualName`, the bare name for builtins), so a call reads the
    # same through the helper and through its span.
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


def _classified(
    exc: BaseException, classify: Classify | None
) -> tuple[Outcome | Literal["unrecorded"], str]:
    """The outcome and error type of a call that raised `exc`."""
    if not isinstance(exc, Exception):
        # CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit: the call was given
        # up, which says nothing about the tool.
        return "cancelled", "cancelled"
    if classify is None:
        return "failure", _error_type(exc)
    try:
        verdict = classify(exc)
    except Exception:
        # A broken classifier must not hide the tool's own exception.
        return "failure", _error_type(exc)
    if isinstance(verdict, ErrorClass):
        outcome, error_type = verdict.outcome, verdict.error_type or _error_type(exc)
    else:
        outcome, error_type = verdict, _error_type(exc)
    recorded = _RECORDED.get(outcome)
    if recorded is None:
        return "failure", error_type
    return recorded, error_type


def _setting_error(field: str, found: object, allowed: str) -> _core.SettingError:
    """A `SettingError` as the Rust side makes them: the text and the parts."""
    error = _core.SettingError(f"invalid setting `{field}`: {found!r}; allowed: {allowed}")
    error.field, error.found, error.allowed = field, repr(found), allowed
    return error


def _check_timeout(timeout: float | None) -> None:
    ok = timeout is None or (
        isinstance(timeout, (int, float))
        and not isinstance(timeout, bool)
        and 0 < timeout < float("inf")
    )
    if not ok:
        raise _setting_error(
            "timeout", timeout, "None, or a finite number of seconds above 0"
        )


def _claim(feed: SpanFeed, tool: str, decision: str) -> None:
    """Tells the span processor that this call is the helper's to record, when an
    OpenTelemetry span is current: the processor skips that span if it ends as a tool span of
    the same tool (one call, one record). When the span is already recognisable as this call's
    own tool span (by the Rust conventions), it is annotated as the Rust layer annotates its
    tool spans: ``tool_health.gate.decision``, and on a refusal ``error.type`` =
    ``circuit_breaker_open``."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if not span.is_recording():
        return
    feed.claim(span.get_span_context().span_id, tool)
    if feed.tool_name(span) == tool:
        span.set_attribute("tool_health.gate.decision", decision)
        if decision == "refused":
            span.set_attribute("error.type", "circuit_breaker_open")


class ToolCall:
    """One call of one tool: a context manager, sync (``with``) or async (``async with``).

    After the block: `outcome` is what was recorded ("success", "failure", "ignored",
    "cancelled" or "unrecorded"), `timed_out` whether the call overran its timeout.
    """

    __slots__ = (
        "_registry",
        "_tool",
        "_timeout",
        "_classify",
        "_feed",
        "_open",
        "_deadline",
        "permit",
        "outcome",
        "timed_out",
    )

    def __init__(
        self,
        registry: Registry,
        tool: str,
        timeout: float | None = None,
        classify: Classify | None = None,
    ) -> None:
        self._registry = registry
        self._tool = tool
        self._timeout = timeout
        self._classify = classify
        self._feed: SpanFeed | None = registry._feed
        self._open: Token[tuple[str, ...]] | None = None
        self._deadline: _Deadline | None = None
        self.permit: Permit | None = None
        self.outcome: str | None = None
        self.timed_out = False

    @property
    def tool(self) -> str:
        """The tool's name."""
        return self._tool

    @property
    def is_probe(self) -> bool:
        """Whether this call holds the breaker's single probe."""
        return self.permit is not None and self.permit.is_probe

    def _gate(self) -> None:
        feed = self._feed
        try:
            self.permit = self._registry._begin(self._tool)
        except Refused:
            if feed is not None:
                _claim(feed, self._tool, "refused")
            raise
        if feed is not None:
            _claim(feed, self._tool, "probe" if self.permit.is_probe else "allowed")
            # Spans of this tool that end inside the call are part of it.
            var = self._registry._open
            if var is not None:
                self._open = var.set((*var.get(), self._tool))

    def _settle(self, exc: BaseException | None, timed_out: bool = False) -> None:
        token, self._open = self._open, None
        if token is not None:
            token.var.reset(token)
        permit = self.permit
        if permit is None:
            return
        if timed_out:
            outcome: Outcome | Literal["unrecorded"] = "failure"
            error_type: str | None = "timeout"
        elif exc is None:
            outcome, error_type = "success", None
        else:
            outcome, error_type = _classified(exc, self._classify)
        # A sync call cannot be cut off: one that overran its timeout is a failure.
        timeout = self._timeout if exc is None and not timed_out else None
        self.outcome = self._registry._finish(permit, outcome, error_type, timeout)
        self.timed_out = timed_out or (outcome == "success" and self.outcome == "failure")

    def __enter__(self) -> ToolCall:
        if self._feed is None:
            self.permit = self._registry._begin(self._tool)
        else:
            self._gate()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc is None and self._timeout is None and self._open is None and self.permit is not None:
            # The common case in two calls: a success, no timeout, no span bookkeeping.
            self.outcome = self._registry._finish(self.permit, "success")
            return False
        self._settle(exc)
        return False

    async def __aenter__(self) -> ToolCall:
        self._gate()
        if self._timeout is not None:
            self._deadline = _Deadline(self._timeout)
            self._deadline.arm()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        deadline, self._deadline = self._deadline, None
        if deadline is not None and deadline.disarm(exc):
            # Our own deadline cancelled the body: a timeout, the tool's failure.
            self._settle(exc, timed_out=True)
            raise asyncio.TimeoutError(
                f"tool {self._tool!r} timed out after {self._timeout} s"
            ) from exc
        self._settle(exc)
        return False


class _Deadline:
    """Cancels the current task at a deadline, and tells its own cancellation apart from
    any other (``asyncio.timeout`` on 3.11+, the same by hand on 3.10)."""

    __slots__ = ("_delay", "_task", "_handle", "_fired", "_cancelling")

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False
        self._cancelling = 0

    def arm(self) -> None:
        task = asyncio.current_task()
        if task is None:
            return
        self._task = task
        if sys.version_info >= (3, 11):
            self._cancelling = task.cancelling()
        self._handle = asyncio.get_running_loop().call_later(self._delay, self._fire)

    def _fire(self) -> None:
        if self._task is not None and not self._task.done():
            self._fired = True
            self._task.cancel()

    def disarm(self, exc: BaseException | None) -> bool:
        """Whether the body ended because this deadline cancelled it."""
        if self._handle is not None:
            self._handle.cancel()
        if not self._fired:
            return False
        if sys.version_info >= (3, 11) and self._task is not None:
            # Our cancel is consumed here (as asyncio.timeout does), so an outer
            # cancellation still reads as one.
            if self._task.uncancel() > self._cancelling:
                return False
        return isinstance(exc, asyncio.CancelledError)


class Registry(_core.Registry):
    """Per-tool health stats and circuit breakers: the Rust registry, with the call helper.

    ``Registry(failure_threshold=3, recovery=30.0, probe_timeout=30.0, tools=None,
    max_tools=10_000, *, max_name_len=256, clock=None)``: every setting is checked, a
    `SettingError` naming the first one outside its range.
    """

    _feed: SpanFeed | None = None
    _open: ContextVar[tuple[str, ...]] | None = None

    def call(
        self,
        tool: str,
        timeout: float | None = None,
        classify: Classify | None = None,
    ) -> ToolCall:
        """One call of `tool` as a context manager (``with`` or ``async with``): gated on
        entry (`Refused` raised when the breaker refuses it), recorded on exit.

        `timeout` (seconds): in ``async with`` the body is cancelled at the deadline and
        `asyncio.TimeoutError` raised; a sync body cannot be cut off, so one that overran is
        recorded as a failure when it ends. Either way a timeout is a failure of the tool
        (``error.type`` = ``timeout``). `classify` says how an exception counts.
        """
        if timeout is not None:
            _check_timeout(timeout)
        return ToolCall(self, tool, timeout, classify)

    @overload
    def tool(self, name: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        /,
        *,
        timeout: float | None = None,
        classify: Classify | None = None,
        on_refusal: Literal["raise"] = "raise",
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        /,
        *,
        timeout: float | None = None,
        classify: Classify | None = None,
        on_refusal: Literal["return"],
    ) -> Callable[[Callable[P, R]], Callable[P, R | str]]: ...

    def tool(
        self,
        name: str | Callable[..., object] | None = None,
        /,
        *,
        timeout: float | None = None,
        classify: Classify | None = None,
        on_refusal: Literal["raise", "return"] = "raise",
    ) -> object:
        """A decorator for a tool function, ``def`` or ``async def``: every call goes through
        `call` (gate, timeout, outcome). The tool's name is `name`, else the function's. An
        ``async def`` stays a coroutine function (frameworks check it).

        `on_refusal="return"`: a refused call returns the refusal text (it begins with
        REFUSAL_MESSAGE) as the tool's result instead of raising `Refused` — for frameworks
        that show a tool's result to the model.
        """
        if callable(name):
            return self.tool()(name)
        if on_refusal not in ("raise", "return"):
            raise _setting_error("on_refusal", on_refusal, '"raise" or "return"')
        soft = on_refusal == "return"
        _check_timeout(timeout)

        def decorate(func: Callable[..., object]) -> Callable[..., object]:
            tool = name if name is not None else func.__name__
            if inspect.iscoroutinefunction(func):
                afunc: Callable[..., Awaitable[object]] = func

                @functools.wraps(func)
                async def acall(*args: object, **kwargs: object) -> object:
                    try:
                        if timeout is None and self._feed is None:
                            # No deadline, no span bookkeeping: the gate and the record alone.
                            permit = self._begin(tool)
                            try:
                                result = await afunc(*args, **kwargs)
                            except BaseException as exc:
                                self._finish(permit, *_classified(exc, classify))
                                raise
                            self._finish(permit, "success")
                            return result
                        async with ToolCall(self, tool, timeout, classify):
                            return await afunc(*args, **kwargs)
                    except Refused as refused:
                        if soft:
                            return str(refused)
                        raise

                return acall

            @functools.wraps(func)
            def call(*args: object, **kwargs: object) -> object:
                try:
                    if self._feed is None:
                        # No span bookkeeping: the gate and the record alone (a sync call's
                        # timeout is checked by the record, from the registry's clock).
                        permit = self._begin(tool)
                        try:
                            result = func(*args, **kwargs)
                        except BaseException as exc:
                            self._finish(permit, *_classified(exc, classify))
                            raise
                        self._finish(permit, "success", None, timeout)
                        return result
                    with ToolCall(self, tool, timeout, classify):
                        return func(*args, **kwargs)
                except Refused as refused:
                    if soft:
                        return str(refused)
                    raise

            return call

        return decorate
