"""The call helper: one tool call wrapped — gate, timeout, outcome, cancellation.

`registry.call(tool)` is a context manager (sync ``with`` and ``async with``: `ToolCall`, in
Rust) and `registry.tool(name)` a decorator for ``def`` and ``async def`` functions. Both gate the call
(raising `Refused` when the breaker refuses it), time it on the registry's clock, and record
its outcome through the permit: a return is a success, an exception a failure unless
``classify`` says otherwise, a cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``)
is recorded as cancelled and gives a probe back at once, a timeout is a failure
(``error.type`` = ``timeout``). The exception is always re-raised: the helper records, it never
swallows.

What is Python by nature lives here and `ToolCall` calls it only when a call needs it: the
classification of an exception (`_classified`, with the application's ``classify``), the asyncio
deadline (`_Deadline`) and the bookkeeping with OpenTelemetry's current span (`_enter_feed`,
when a span processor is attached).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar, overload

from . import _core
from ._core import Refused, ToolCall
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
    if feed.is_call_of(span, tool):
        span.set_attribute("tool_health.gate.decision", decision)
        if decision == "refused":
            span.set_attribute("error.type", "circuit_breaker_open")


def _enter_feed(
    feed: SpanFeed, registry: Registry, tool: str, decision: str
) -> Token[tuple[str, ...]] | None:
    """A `ToolCall`'s span bookkeeping when a span processor is attached (`decision`: the
    gate's, "allowed", "probe" or "refused"): the current span claimed, and — for an admitted
    call — the call marked open in this context, so that spans of this tool ending inside it
    are part of it. Returns the mark's token (the call resets it when it ends)."""
    _claim(feed, tool, decision)
    var = registry._open
    if decision == "refused" or var is None:
        return None
    return var.set((*var.get(), tool))


async def _ready(value: R) -> R:
    """An awaitable already done: what `ToolCall.__aenter__` and ``__aexit__`` return (the
    gate and the record never wait; awaiting a coroutine that returns at once costs no
    ``StopIteration``)."""
    return value


class _Deadline:
    """Cancels the current task at a deadline, and tells its own cancellation apart from
    any other (``asyncio.timeout`` on 3.11+, the same by hand on 3.10). An ``async with``
    `ToolCall` with a timeout arms one on entry and disarms it on exit."""

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
    """Per-tool health stats and circuit breakers: the Rust registry, with the call helper
    (``registry.call(tool)``, Rust's `ToolCall`, and the ``registry.tool`` decorator).

    ``Registry(failure_threshold=3, recovery=30.0, probe_timeout=30.0, tools=None,
    max_tools=10_000, *, max_name_len=256, clock=None)``: every setting is checked, a
    `SettingError` naming the first one outside its range.
    """

    _feed: SpanFeed | None = None
    _open: ContextVar[tuple[str, ...]] | None = None

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
        _core._check_timeout(timeout)

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
