"""LangChain 1.5 / LangGraph 1.2: the :class:`ToolHealthMiddleware` agent middleware.

::

    from langchain.agents import create_agent
    from tool_health import Registry
    from tool_health.langchain import ToolHealthMiddleware

    registry = Registry()
    agent = create_agent(model, tools=[search], middleware=[ToolHealthMiddleware(registry)])

Every tool call goes through ``registry.call(tool)`` (``wrap_tool_call``, sync and async): gated,
timed, recorded. Tools that refuse now are left out of the model's request (``wrap_model_call``)
and come back when their cooldown ends, for one probe; a call that still meets a refusal gets a
``ToolMessage(status="error")`` whose text is the refusal's.

What counts against a tool, as LangChain reports it:

* a failure: an exception from the tool (``ToolException`` included), and a
  ``ToolMessage(status="error")`` for arguments that are valid — a ``ToolException`` the tool
  handles itself (``handle_tool_error``), or any error ``ToolNode``'s ``handle_tool_errors``
  turned into a message;
* the model's mistake, never the tool's: arguments that fail the tool's schema — ``ToolNode``
  answers them with an error ``ToolMessage`` (or raises ``ToolInvocationError``), and the
  middleware checks the call's arguments against ``tool.tool_call_schema`` (the schema the model
  was shown) to tell them from the tool's own errors; a call of an unknown tool (nothing to
  gate: ``ToolNode`` answers it);
* nothing at all (the probe is given back): LangGraph's control flow (an ``interrupt()``, a ``Command``
  to a parent graph), a cancelled run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ToolCallRequest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import BaseModel, ValidationError

from tool_health import ErrorClass, Refused, Registry
from tool_health._frameworks import INVALID_ARGUMENTS, TOOL_ERROR, acall, call

__all__ = ["ToolHealthMiddleware"]


def _bad_arguments(request: ToolCallRequest) -> bool:
    """Whether the call's arguments fail the schema the model was shown."""
    tool = request.tool
    schema = tool.tool_call_schema if tool is not None else None
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return False  # a JSON-schema dict: LangChain validates nothing against it
    try:
        schema.model_validate(request.tool_call.get("args", {}))
    except ValidationError:
        return True
    return False


class _Call:
    """One tool call's judgement: its exceptions and its result."""

    def __init__(self, request: ToolCallRequest) -> None:
        self.request = request

    def classify(self, exc: BaseException) -> ErrorClass | Literal["failure"]:
        if isinstance(exc, GraphBubbleUp):
            return ErrorClass.unrecorded("interrupted")
        if isinstance(exc, (ToolInvocationError, ValidationError)) and _bad_arguments(self.request):
            return INVALID_ARGUMENTS
        return "failure"  # error.type: the exception's, as OpenTelemetry writes it

    def judge(self, result: Any) -> ErrorClass | None:
        if isinstance(result, ToolMessage) and result.status == "error":
            return INVALID_ARGUMENTS if _bad_arguments(self.request) else TOOL_ERROR
        return None

    def refused(self, exc: Refused) -> ToolMessage:
        return ToolMessage(
            content=str(exc),
            name=self.request.tool_call["name"],
            tool_call_id=self.request.tool_call["id"],
            status="error",
        )


class ToolHealthMiddleware(AgentMiddleware):
    """Gates, records and hides the agent's tools by their health in ``registry``.

    ``timeout`` (seconds) cuts a call off as a failure. ``tools`` limits the middleware to these
    tool names (the others run untouched); ``None``, the default, takes every tool.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        timeout: float | None = None,
        tools: Collection[str] | None = None,
    ) -> None:
        super().__init__()
        self.registry = registry
        self.timeout = timeout
        self.only = None if tools is None else frozenset(tools)
        self.tools = []  # registers no tools of its own

    def _gated(self, name: str) -> bool:
        return self.only is None or name in self.only

    def _hidden(self, tool: BaseTool | dict[str, Any]) -> bool:
        return (
            isinstance(tool, BaseTool)
            and self._gated(tool.name)
            and not self.registry.is_available(tool.name)
        )

    def _visible(self, request: ModelRequest) -> ModelRequest:
        kept = [t for t in request.tools if not self._hidden(t)]
        return request if len(kept) == len(request.tools) else request.override(tools=kept)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Leaves out the tools that refuse now (the pure oracle: no probe is taken)."""
        return handler(self._visible(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """The async twin of :meth:`wrap_model_call`."""
        return await handler(self._visible(request))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        """Runs the tool call as one call through the registry's call helper."""
        if request.tool is None or not self._gated(request.tool.name):
            return handler(request)
        one = _Call(request)
        return call(
            self.registry,
            request.tool.name,
            lambda: handler(request),
            classify=one.classify,
            judge=one.judge,
            refused=one.refused,
            timeout=self.timeout,
        )

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        """The async twin of :meth:`wrap_tool_call`."""
        if request.tool is None or not self._gated(request.tool.name):
            return await handler(request)
        one = _Call(request)
        return await acall(
            self.registry,
            request.tool.name,
            lambda: handler(request),
            classify=one.classify,
            judge=one.judge,
            refused=one.refused,
            timeout=self.timeout,
        )
