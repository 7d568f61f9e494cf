"""The official Python MCP SDK client (PyPI `mcp`, `mcp.Client`) as a host of the gateway, for
the gateway's tests (gateway/tests/sdk_clients/). The test drives it line by line:

    python client.py [--mode auto|legacy] stdio COMMAND ARG...   # launches the gateway itself, over stdio
    python client.py [--mode auto|legacy] http URL               # the gateway's /mcp, over streamable HTTP

`--mode` is the client's `mode`: `auto` (its default: `server/discover`, MCP 2026-07-28 when the
server offers it) or `legacy` (the `initialize` handshake of the 2025 revisions).

stdin, one JSON object a line (answered in order):

    {"id": 1, "op": "list"}                                  -> {"id": 1, "tools": ["rs__ok", ...]}
    {"id": 2, "op": "call", "name": "rs__ok", "arguments": {}}
        -> {"id": 2, "isError": false, "text": "fine"}  or  {"id": 2, "error": {"code": -32602, "message": "..."}}
    {"id": 3, "op": "bench", "name": "rs__echo", "arguments": {...}, "n": 100}
        -> {"id": 3, "ns": [...]}: n sequential calls, each one's time in nanoseconds
           (gateway/benches/sdk_clients.rs)

stdout, besides the answers: {"event": "ready", "protocol": "...", "server": "..."} once
connected, and {"event": "list_changed"} each time the client hears that the tool list changed
— through `subscriptions/listen` on a 2026-07-28 connection (what the client's default `auto`
mode negotiates when the server offers it), else through `notifications/tools/list_changed`
delivered to the message handler. The client's response cache is off: the test wants each
`list` to reach the gateway. Everything else (the gateway's log, when it is launched over stdio)
goes to stderr. The client ends when stdin closes.
"""

import json
import os
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# Whether the connection is 2026-07-28: the client then also hands each event of the listen
# stream to the message handler (its "tee"), which must not count it twice.
MODERN = {"on": False}


async def on_message(message: Any) -> None:
    """Handshake-era connections: the notification arrives here."""
    root = getattr(message, "root", message)
    if isinstance(root, types.ToolListChangedNotification) and not MODERN["on"]:
        emit({"event": "list_changed", "via": "notification"})


def text_of(result: Any) -> str:
    for block in result.content or []:
        if getattr(block, "type", None) == "text":
            return block.text
    return ""


async def answer(client: Client, cmd: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cmd.get("id")}
    try:
        if cmd["op"] == "list":
            tools: list[str] = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            out["tools"] = tools
        elif cmd["op"] == "call":
            result = await client.call_tool(cmd["name"], cmd.get("arguments") or {})
            out["isError"] = bool(result.is_error)
            out["text"] = text_of(result)
        elif cmd["op"] == "bench":
            ns: list[int] = []
            for _ in range(cmd["n"]):
                start = time.perf_counter_ns()
                result = await client.call_tool(cmd["name"], cmd.get("arguments") or {})
                ns.append(time.perf_counter_ns() - start)
                if result.is_error:
                    raise RuntimeError(f"bench call failed: {text_of(result)}")
            out["ns"] = ns
        else:
            out["error"] = {"code": 0, "message": f"unknown op {cmd['op']!r}"}
    except MCPError as e:
        out["error"] = {"code": e.code, "message": e.message}
    return out


async def listen(client: Client, ready: anyio.Event) -> None:
    """2026-07-28 connections: the change events of one `subscriptions/listen` stream. A server
    without subscriptions (the benches' pass-through proxy answers -32601) has none to send."""
    try:
        async with client.listen(tools_list_changed=True) as sub:
            ready.set()
            async for _event in sub:
                emit({"event": "list_changed", "via": "listen"})
    except MCPError as e:
        if e.code != -32601:
            raise
        print(f"client.py: the server offers no subscriptions/listen ({e.message})", file=sys.stderr)
        ready.set()


async def main() -> None:
    args = sys.argv[1:]
    era = "auto"
    if args[0] == "--mode":
        era = args[1]
        args = args[2:]
    mode = args[0]
    if mode == "stdio":
        server: Any = StdioServerParameters(command=args[1], args=args[2:], env=dict(os.environ))
    else:
        server = args[1]
    async with Client(server, mode=era, message_handler=on_message, cache=None) as client:
        async with anyio.create_task_group() as tg:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                MODERN["on"] = True
                ready = anyio.Event()
                tg.start_soon(listen, client, ready)
                with anyio.fail_after(30):
                    await ready.wait()
            emit({"event": "ready", "protocol": client.protocol_version, "server": client.server_info.name if client.server_info else None})
            stdin = anyio.wrap_file(sys.stdin)
            async for line in stdin:
                line = line.strip()
                if not line:
                    continue
                emit(await answer(client, json.loads(line)))
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
