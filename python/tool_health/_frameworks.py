"""What the framework integrations share: one tool call through the registry's call helper.

``registry.call(tool)`` gates on entry (raising :class:`~tool_health.Refused`), applies the
timeout, and records from how its block ends: normally a success, an exception as the
integration's ``classify`` says (a failure by default), a cancellation cancelled. Frameworks
report some failures as *values* — a LangChain ``ToolMessage(status="error")``, an MCP result
with ``isError`` — so an integration judges the value too: a judgement other than a success
leaves the block as :class:`_Judged`, which the classifier answers with that judgement, and the
value goes back to the framework unchanged. A refusal becomes the framework's soft result (the
refusal's text, which begins with ``REFUSAL_MESSAGE`` and says when to retry).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from tool_health import ErrorClass, Refused, Registry

T = TypeVar("T")
R = TypeVar("R")

Classify = Callable[[BaseException], "ErrorClass | Literal['failure']"]
"""How an exception from the framework counts (``"failure"``: with the exception's own
``error.type``, as OpenTelemetry writes it)."""

Judge = Callable[[T], "ErrorClass | None"]
"""How a value the framework returned counts: ``None`` for a success."""

TOOL_ERROR = ErrorClass.failure("tool_error")
"""A failure the framework reported as the tool's result (the Rust MCP client's ``error.type``
for an ``isError`` result)."""

INVALID_ARGUMENTS = ErrorClass.caller_error("invalid_arguments")
"""Arguments that fail the tool's schema: the model's mistake."""


class _Judged(Exception):
    """A value the framework returned, judged not a success: carries it out of the helper's block."""

    def __init__(self, value: object, verdict: ErrorClass) -> None:
        super().__init__(verdict.outcome)
        self.value = value
        self.verdict = verdict


def _classifier(classify: Classify) -> Callable[[BaseException], "ErrorClass | Literal['failure']"]:
    def answer(exc: BaseException) -> ErrorClass | Literal["failure"]:
        if isinstance(exc, _Judged):
            return exc.verdict
        return classify(exc)

    return answer


def _success(_value: object) -> ErrorClass | None:
    return None


async def acall(
    registry: Registry,
    tool: str,
    run: Callable[[], Awaitable[T]],
    *,
    classify: Classify,
    refused: Callable[[Refused], R],
    judge: Judge[T] = _success,
    timeout: float | None = None,
) -> T | R:
    """Runs ``run()`` as one call of ``tool``; a refusal at the gate answers ``refused(exc)``."""
    entered = False
    try:
        async with registry.call(tool, timeout=timeout, classify=_classifier(classify)):
            entered = True
            value = await run()
            verdict = judge(value)
            if verdict is not None:
                raise _Judged(value, verdict)
            return value
    except _Judged as judged:
        return judged.value  # type: ignore[return-value]
    except Refused as exc:
        if entered:  # the tool's own (a call it made was refused): its outcome, not our gate's
            raise
        return refused(exc)


def call(
    registry: Registry,
    tool: str,
    run: Callable[[], T],
    *,
    classify: Classify,
    refused: Callable[[Refused], R],
    judge: Judge[T] = _success,
    timeout: float | None = None,
) -> T | R:
    """The blocking twin of :func:`acall`."""
    entered = False
    try:
        with registry.call(tool, timeout=timeout, classify=_classifier(classify)):
            entered = True
            value = run()
            verdict = judge(value)
            if verdict is not None:
                raise _Judged(value, verdict)
            return value
    except _Judged as judged:
        return judged.value  # type: ignore[return-value]
    except Refused as exc:
        if entered:
            raise
        return refused(exc)
