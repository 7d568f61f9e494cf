"""Pydantic AI (``pydantic-ai-slim`` 2.68): the :class:`ToolHealth` capability.

::

    from pydantic_ai import Agent
    from tool_health import Registry
    from tool_health.pydantic_ai import ToolHealth

    registry = Registry()
    agent = Agent(model, tools=[search], capabilities=[ToolHealth(registry)])

Every function tool call goes through ``registry.call(tool)``: gated, timed, recorded. A tool
that refuses now is left out of what the model is offered (``prepare_tools``, each step) and
comes back when its cooldown ends, for one probe. A call that still meets a refusal (a parallel
call in the same step took the probe) gets the refusal's text as its result.

What counts against a tool — the same rules as the span processor's Pydantic AI convention:

* a failure: any exception from the tool, and ``ToolFailed`` (the tool reporting that it failed);
* the model's mistake, never the tool's: ``ModelRetry`` (the tool asking the model to try again)
  and its retry budget running out; argument validation errors never reach the tool's execution
  and are not seen at all;
* nothing at all (the probe is given back): a call deferred or skipped (``CallDeferred``,
  ``ApprovalRequired``, ``SkipToolExecution``), a cancelled run.

The capability sits inside Pydantic AI's ``Instrumentation`` (always outermost), so the
``execute_tool`` span is current while the call helper runs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, WrapToolExecuteHandler
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    SkipToolExecution,
    ToolRetryError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition

from tool_health import ErrorClass, Registry
from tool_health._frameworks import acall

__all__ = ["ToolHealth"]

_MODEL_RETRY = (ToolRetryError, ModelRetry, UnexpectedModelBehavior)
"""The model's mistakes: ``ModelRetry`` (wrapped as ``ToolRetryError`` by the tool manager) and
the retry budget running out on it."""

_DID_NOT_RUN = (CallDeferred, ApprovalRequired, SkipToolExecution)


def _classify(exc: BaseException) -> ErrorClass | Literal["failure"]:
    if isinstance(exc, _MODEL_RETRY):
        return ErrorClass.caller_error("model_retry")
    if isinstance(exc, _DID_NOT_RUN):
        return ErrorClass.unrecorded("deferred")
    return "failure"  # error.type: the exception's, as OpenTelemetry writes it


@dataclass
class ToolHealth(AbstractCapability[Any]):
    """Gates, records and hides the agent's function tools by their health in ``registry``.

    ``timeout`` (seconds) cuts a call off as a failure. ``tools`` limits the capability to these
    tool names (the others run untouched); ``None``, the default, takes every function tool.
    """

    registry: Registry
    timeout: float | None = None
    tools: Collection[str] | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not spec-serializable: it holds a live registry."""
        return None

    def _gated(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Leaves out the tools that refuse now (the pure oracle: no probe is taken)."""
        return [t for t in tool_defs if not self._gated(t.name) or self.registry.is_available(t.name)]

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Runs the tool's execution as one call through the registry's call helper."""
        if not self._gated(tool_def.name):
            return await handler(args)
        return await acall(
            self.registry,
            tool_def.name,
            lambda: handler(args),
            classify=_classify,
            refused=str,
            timeout=self.timeout,
        )
