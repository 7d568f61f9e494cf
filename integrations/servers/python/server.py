"""An MCP server written with the official Python SDK (PyPI `mcp`, `MCPServer`), for
tool-health's integration tests (integrations/tests/mcp_sdk/).

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
from mcp.server.mcpserver import MCPServer

methods: Counter[str] = Counter()
tools: Counter[str] = Counter()
state = {"broken": True}


async def count(ctx: Any, call_next: Any) -> Any:
    """Counts every inbound request (not notifications) before the SDK validates it."""
    if ctx.request_id is not None:
        name = (ctx.params or {}).get("name") if ctx.method == "tools/call" else None
        if name != "seen":
            methods[ctx.method] += 1
            if name is not None:
                tools[str(name)] += 1
    return await call_next(ctx)


server = MCPServer("tool-health-python-fixture", middleware=[count], log_level="WARNING")


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
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        print(f"listening on 127.0.0.1:{sys.argv[2]}", file=sys.stderr, flush=True)
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
