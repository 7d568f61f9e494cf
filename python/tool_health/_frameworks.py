"""What the framework integrations share: one tool call through the registry's call helper.

``registry.call(tool)`` gates on entry (raising :class:`~tool_health.Refused`), applies the
timeout, and records from how its block ends: normally a success, an exception a failure unless
the classifier calls it the caller's error, a cancellation cancelled. Frameworks report some
failures as *values* — a LangChain ``ToolMessage(status="error")``, an MCP result with
``isError`` — so each integration judges the value too: a verdict other than a success leaves the
block as :class:`_Judged`, which the classifier answers with that verdict, and the value goes back
to the framework unchanged. A refusal becomes the framework's soft result (the refusal's text,
which begins with ``REFUSAL_MESSAGE`` and says when to retry).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from tool_health import Refused, Registry

Verdict = Literal["success", "failure", "caller_error"]
"""How a call ended: a success, the tool's failure, or the caller's (the model's) error."""

T = TypeVar("T")
R = TypeVar("R")


class _Judged(Exception):
    """A value the framework returned, judged not a success: carries it out of the helper's block."""

    def __init__(self, value: object, verdict: Verdict) -> None:
        super().__init__(verdict)
        self.value = value
        self.verdict = verdict


def _classifier(
    classify: Callable[[BaseException], Verdict],
) -> Callable[[BaseException], str]:
    def answer(exc: BaseException) -> str:
        if isinstance(exc, _Judged):
            return exc.verdict
        return classify(exc)

    return answer


def _success(_value: object) -> Verdict:
    return "success"


async def acall(
    registry: Registry,
    tool: str,
    run: Callable[[], Awaitable[T]],
    *,
    classify: Callable[[BaseException], Verdict],
    refused: Callable[[Refused], R],
    judge: Callable[[T], Verdict] = _success,
    timeout: float | None = None,
) -> T | R:
    """Runs ``run()`` as one call of ``tool``; a refusal at the gate answers ``refused(exc)``."""
    entered = False
    try:
        async with registry.call(tool, timeout=timeout, classify=_classifier(classify)):
            entered = True
            value = await run()
            verdict = judge(value)
            if verdict != "success":
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
    classify: Callable[[BaseException], Verdict],
    refused: Callable[[Refused], R],
    judge: Callable[[T], Verdict] = _success,
    timeout: float | None = None,
) -> T | R:
    """The blocking twin of :func:`acall`."""
    entered = False
    try:
        with registry.call(tool, timeout=timeout, classify=_classifier(classify)):
            entered = True
            value = run()
            verdict = judge(value)
            if verdict != "success":
                raise _Judged(value, verdict)
            return value
    except _Judged as judged:
        return judged.value  # type: ignore[return-value]
    except Refused as exc:
        if entered:
            raise
        return refused(exc)
