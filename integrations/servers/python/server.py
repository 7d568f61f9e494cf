"""An MCP server written with the official Python SDK (PyPI `mcp`, `MCPServer`; or `FastMCP` of
the SDK's 1.x line, the handshake era, when that is the `mcp` installed), for tool-health's
integration tests (integrations/tests/mcp_sdk/, the gateway's).

    python server.py stdio
    python server.py http PORT        # streamable HTTP on 127.0.0.1:PORT, path /mcp

Tools: `ok` succeeds; `flaky` raises while the server is broken (it starts broken; `mend`
mends it); `needs_int` takes an integer `n`; `hang` never answers; `die` kills the process
mid-call; `seen` answers what the server received (every inbound request by method, and
`tools/call` by tool name, `seen` itself left out) as JSON. Lines on stderr say when `hang` and
`die` started, so a test can act while they are in flight.
"""

import json
import os
import sys
from collections import Counter
from typing import Any

import anyio

methods: Counter[str] = Counter()
tools: Counter[str] = Counter()
state = {"broken": True}


def counted(method: str, name: Any) -> None:
    """Counts one inbound request (`name`: the tool of a `tools/call`)."""
    if name != "seen":
        methods[method] += 1
        if name is not None:
            tools[str(name)] += 1


async def count(ctx: Any, call_next: Any) -> Any:
    """Counts every inbound request (not notifications) before the SDK validates it."""
    if ctx.request_id is not None:
        counted(ctx.method, (ctx.params or {}).get("name") if ctx.method == "tools/call" else None)
    return await call_next(ctx)


try:
    from mcp.server.mcpserver import MCPServer

    V1 = False
    server: Any = MCPServer("tool-health-python-fixture", middleware=[count], log_level="WARNING")
except ImportError:
    # The SDK's 1.x line (`FastMCP`, the handshake era only): no middleware; the requests its
    # handlers receive are counted instead (`initialize` is the session's, not counted).
    from mcp.server.fastmcp import FastMCP

    V1 = True
    server = FastMCP("tool-health-python-fixture", log_level="WARNING")


def count_v1() -> None:
    """1.x: wraps every request handler of the low-level server to count what it receives."""
    handlers = server._mcp_server.request_handlers
    for kind, handler in list(handlers.items()):

        def wrap(handler: Any) -> Any:
            async def counting(request: Any) -> Any:
                # The SDK calls its own list handler with `None` to cache the tool definitions.
                method = getattr(request, "method", None)
                if method is not None:
                    params = getattr(request, "params", None)
                    counted(method, getattr(params, "name", None) if method == "tools/call" else None)
                return await handler(request)

            return counting

        handlers[kind] = wrap(handler)


@server.tool()
def ok() -> str:
    """Succeeds."""
    return "fine"


@server.tool()
def flaky() -> str:
    """Raises while the server is broken."""
    if state["broken"]:
        raise RuntimeError("flaky: upstream answered 503")
    return "flaky works"


@server.tool()
def mend() -> str:
    """Mends `flaky`."""
    state["broken"] = False
    return "mended"


@server.tool()
def needs_int(n: int) -> str:
    """Doubles an integer."""
    return f"twice {n} is {2 * n}"


@server.tool()
async def hang() -> str:
    """Never answers."""
    print("hang started", file=sys.stderr, flush=True)
    await anyio.sleep_forever()
    return ""


@server.tool()
def die() -> str:
    """Kills the process mid-call."""
    print("die started", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def seen() -> str:
    """What the server received."""
    return json.dumps({"methods": dict(methods), "tools": dict(tools)}, sort_keys=True)


if __name__ == "__main__":
    if V1:
        count_v1()
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        print(f"listening on 127.0.0.1:{sys.argv[2]}", file=sys.stderr, flush=True)
        if V1:
            server.settings.host = "127.0.0.1"
            server.settings.port = int(sys.argv[2])
            server.run("streamable-http")
        else:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
