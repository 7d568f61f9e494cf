"""OpenAI Agents SDK (``openai-agents`` 0.24): function tools and MCP servers behind breakers.

::

    from agents import Agent
    from tool_health import Registry
    from tool_health.openai_agents import GatedMCPServer, gate_tools

    registry = Registry()
    agent = Agent(
        name="assistant",
        tools=gate_tools([search, weather], registry),
        mcp_servers=[GatedMCPServer(MCPServerStdio(params=...), registry)],
    )

:func:`gate_tool` returns a copy of a ``FunctionTool`` whose calls go through
``registry.call(tool)`` (gated, timed, recorded) and whose ``is_enabled`` is false while the tool
refuses now: the SDK leaves it out of the model's request until its cooldown ends, then offers it
for one probe. A call that still meets a refusal gets the refusal's text as its result.

The gate sits inside the SDK's failure handler, so the tool's exception is seen before the
handler turns it into "An error occurred while running the tool" (the span's
"Error running tool"): that is a **failure**, and so is an exception the handler lets through
(``failure_error_function=None``). Arguments the SDK cannot parse or validate
(``ModelBehaviorError``, raised before the function runs) are the model's mistake: counted as
ignored, never against the tool. A tool the SDK cuts off with its own ``timeout_seconds`` is
*cancelled*, not failed — give ``gate_tool`` a ``timeout`` instead for hanging tools to count.

MCP tools are not subject to ``is_enabled`` in the SDK (it converts them at each turn), so
:class:`GatedMCPServer` wraps the server instead: ``list_tools`` leaves out the tools that refuse
now, ``call_tool`` is one call of ``"{server}/{tool}"`` (the key the Rust MCP client and the
gateway use). A result with ``isError`` and a failed request count as failures; a JSON-RPC
"invalid params" error (-32602) is the model's mistake. A refusal is answered as an ``isError``
result whose text begins with ``REFUSAL_MESSAGE``, as the Rust MCP client answers it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable
from typing import Any, Literal

from agents import AgentBase, FunctionTool, ModelBehaviorError, RunContextWrapper
from agents.mcp import MCPServer
from agents.tool import Tool
from mcp import Tool as MCPTool
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent

from tool_health import ErrorClass, Refused, Registry
from tool_health._frameworks import INVALID_ARGUMENTS, TOOL_ERROR, acall

__all__ = ["GatedMCPServer", "gate_tool", "gate_tools"]


def _classify(exc: BaseException) -> ErrorClass | Literal["failure"]:
    if isinstance(exc, ModelBehaviorError):
        return INVALID_ARGUMENTS
    return "failure"  # error.type: the exception's, as OpenTelemetry writes it


def gate_tool(tool: FunctionTool, registry: Registry, *, timeout: float | None = None) -> FunctionTool:
    """A copy of ``tool`` gated, recorded and disabled for the model by its health in ``registry``.

    ``timeout`` (seconds) cuts a call off as a failure. The original tool is left as it was.
    """
    name = tool.name
    gated = copy.copy(tool)  # the SDK's own copy: its invoker is bound to the copy
    enabled = tool.is_enabled

    async def is_enabled(ctx: RunContextWrapper[Any], agent: AgentBase) -> bool:
        if not registry.is_available(name):
            return False
        if isinstance(enabled, bool):
            return enabled
        answer = enabled(ctx, agent)
        return bool(await answer) if inspect.isawaitable(answer) else bool(answer)

    gated.is_enabled = is_enabled
    invoker = gated.on_invoke_tool
    # The SDK's failure-handling invoker runs the parsing and the function in `_invoke_tool_impl`
    # and turns what it raises into the model's error text: gate that inner part, so the
    # exception is seen. Any other invoker is gated whole: what it raises is what it failed with.
    inner = getattr(invoker, "_invoke_tool_impl", None)
    if inner is not None and hasattr(invoker, "_on_handled_error"):

        async def gated_inner(ctx: Any, arguments: str) -> Any:
            return await acall(
                registry, name, lambda: inner(ctx, arguments),
                classify=_classify, refused=str, timeout=timeout,
            )

        gated_inner.__dict__.update(getattr(inner, "__dict__", {}))  # the SDK's markers
        setattr(invoker, "_invoke_tool_impl", gated_inner)  # the SDK invoker's own slot
    else:

        async def gated_invoker(ctx: Any, arguments: str) -> Any:
            return await acall(
                registry, name, lambda: invoker(ctx, arguments),
                classify=_classify, refused=str, timeout=timeout,
            )

        gated.on_invoke_tool = gated_invoker
    return gated


def gate_tools(
    tools: Iterable[Tool], registry: Registry, *, timeout: float | None = None
) -> list[Tool]:
    """:func:`gate_tool` on each ``FunctionTool`` of ``tools``; other tools (hosted ones: the
    model provider runs them) are passed through."""
    return [
        gate_tool(t, registry, timeout=timeout) if isinstance(t, FunctionTool) else t for t in tools
    ]


def _refusal(exc: Refused) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def _judge(result: CallToolResult) -> ErrorClass | None:
    return TOOL_ERROR if result.is_error else None


def _classify_mcp(exc: BaseException) -> ErrorClass | Literal["failure"]:
    if isinstance(exc, MCPError):
        if exc.code == INVALID_PARAMS:
            return INVALID_ARGUMENTS
        return ErrorClass.failure(str(exc.code))  # the JSON-RPC code, as the Rust MCP client
    return "failure"  # error.type: the exception's, as OpenTelemetry writes it


class GatedMCPServer(MCPServer):
    """An MCP server whose tools are gated, recorded and hidden by their health in ``registry``.

    Wraps a connected-or-not server of the SDK (``MCPServerStdio``, ``MCPServerStreamableHttp``,
    …): everything else — connecting, prompts, resources, approval and failure settings — is the
    wrapped server's. Breakers are keyed ``"{server.name}/{tool}"``.
    """

    def __init__(self, server: MCPServer, registry: Registry, *, timeout: float | None = None) -> None:
        # No MCPServer.__init__: every setting it would hold is read from the wrapped server.
        self.server = server
        self.registry = registry
        self.timeout = timeout

    def __getattr__(self, attr: str) -> Any:
        # Only reached for what this class lacks: the wrapped server's settings and methods.
        if attr == "server":
            raise AttributeError(attr)
        return getattr(self.server, attr)

    def key(self, tool: str) -> str:
        """The breaker's name of one of this server's tools."""
        return f"{self.server.name}/{tool}"

    @property
    def name(self) -> str:
        """The wrapped server's name."""
        return self.server.name

    async def connect(self) -> None:
        """Connects the wrapped server."""
        await self.server.connect()  # type: ignore[no-untyped-call]

    async def cleanup(self) -> None:
        """Cleans the wrapped server up."""
        await self.server.cleanup()  # type: ignore[no-untyped-call]

    async def __aenter__(self) -> GatedMCPServer:
        await self.server.connect()  # type: ignore[no-untyped-call]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.server.cleanup()  # type: ignore[no-untyped-call]

    async def list_tools(
        self, run_context: RunContextWrapper[Any] | None = None, agent: AgentBase | None = None
    ) -> list[MCPTool]:
        """The wrapped server's tools, less those that refuse now (no probe is taken)."""
        tools = await self.server.list_tools(run_context, agent)
        return [t for t in tools if self.registry.is_available(self.key(t.name))]

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        """One call of ``"{server}/{tool}"`` through the registry's call helper."""

        async def run() -> CallToolResult:
            if meta is None:
                return await self.server.call_tool(tool_name, arguments)
            return await self.server.call_tool(tool_name, arguments, meta=meta)

        return await acall(
            self.registry, self.key(tool_name), run,
            classify=_classify_mcp, judge=_judge, refused=_refusal, timeout=self.timeout,
        )

    @property
    def cached_tools(self) -> list[MCPTool] | None:
        """The wrapped server's cached tool list."""
        return self.server.cached_tools

    async def list_prompts(self) -> Any:
        """The wrapped server's prompts."""
        return await self.server.list_prompts()

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """One of the wrapped server's prompts."""
        return await self.server.get_prompt(name, arguments)

    async def list_resources(self, cursor: str | None = None) -> Any:
        """The wrapped server's resources."""
        return await self.server.list_resources(cursor)

    async def list_resource_templates(self, cursor: str | None = None) -> Any:
        """The wrapped server's resource templates."""
        return await self.server.list_resource_templates(cursor)

    async def read_resource(self, uri: str) -> Any:
        """One of the wrapped server's resources."""
        return await self.server.read_resource(uri)
