"""The official Python MCP SDK client (PyPI `mcp` 2.3, `mcp.Client`) as a host that uses what a
server offers besides tools, and says what it saw — for the gateway's pass-through comparison
(gateway/tests/sdk_clients/passthrough.rs): `server-everything` directly (a handshake-era
server: the client speaks 2025-11-25 with it) and through the gateway (the client speaks MCP
2026-07-28 with it: per-request envelopes, `resultType`, and resource updates on
`subscriptions/listen` instead of `resources/subscribe`).

    python survey.py stdio COMMAND ARG...
    python survey.py http URL

SURVEY_EVERYTHING is the prefix of server-everything's tools there ("" directly, "ev__" through
the gateway), SURVEY_URI the prefix of its resource URIs ("" or "tool-health://ev/").

It prints one JSON object: the protocol version, the tools, resources, templates and prompts
listed, what each read, get and completion answered, and the resource updates heard.
"""

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

FIXED = {"city": "Paris", "state": "CA", "resourceType": "Text", "resourceId": "1"}


def error(e: BaseException) -> dict[str, Any]:
    return {"error": {"code": getattr(e, "code", 0), "message": str(getattr(e, "message", e))}}


async def pages(fetch: Any, key: str) -> list[Any]:
    items: list[Any] = []
    cursor = None
    while True:
        page = await fetch(cursor=cursor, cache_mode="refresh")
        items.extend(getattr(page, key))
        cursor = page.next_cursor
        if cursor is None:
            return items


async def survey(client: Client, out: dict[str, Any]) -> None:
    ev = os.environ.get("SURVEY_EVERYTHING", "")
    prefix = os.environ.get("SURVEY_URI", "")
    out["protocol"] = client.protocol_version
    out["tools"] = sorted(t.name for t in await pages(client.list_tools, "tools"))
    resources = await pages(client.list_resources, "resources")
    out["resources"] = [{"uri": str(r.uri), "name": r.name, "mimeType": r.mime_type} for r in resources]
    templates = await pages(client.list_resource_templates, "resource_templates")
    out["templates"] = [{"uriTemplate": t.uri_template, "name": t.name} for t in templates]
    out["reads"] = {}
    for r in resources:
        try:
            read = await client.read_resource(str(r.uri), cache_mode="refresh")
            out["reads"][str(r.uri)] = [
                {"uri": str(c.uri), "mimeType": c.mime_type, "text": getattr(c, "text", None)}
                for c in read.contents
            ]
        except MCPError as e:
            out["reads"][str(r.uri)] = error(e)
    completions: list[Any] = []
    prompts = await pages(client.list_prompts, "prompts")
    out["prompts"] = [{"name": p.name, "arguments": [a.name for a in p.arguments or []]} for p in prompts]
    out["gets"] = {}
    for p in prompts:
        args: dict[str, str] = {}
        for a in p.arguments or []:
            try:
                done = await client.complete(
                    types.PromptReference(type="ref/prompt", name=p.name),
                    {"name": a.name, "value": ""},
                    context_arguments=dict(args) or None,
                )
                values = list(done.completion.values)
            except MCPError as e:
                values = []
                completions.append({"prompt": p.name, "argument": a.name, **error(e)})
            else:
                completions.append({"prompt": p.name, "argument": a.name, "values": values})
            args[a.name] = values[0] if values else FIXED.get(a.name, "1")
        try:
            got = await client.get_prompt(p.name, args)
            out["gets"][p.name] = [
                {"role": m.role, "type": m.content.type, "text": getattr(m.content, "text", None)}
                for m in got.messages
            ]
        except MCPError as e:
            out["gets"][p.name] = error(e)
    out["completions"] = completions

    # One resource update: on the listen stream (2026-07-28) or by resources/subscribe.
    watched = f"{prefix}demo://resource/static/document/architecture.md"
    updates: list[str] = []
    toggle = f"{ev}toggle-subscriber-updates"
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        async with client.listen(resource_subscriptions=[watched]) as sub:
            await client.call_tool(toggle, {})
            with anyio.move_on_after(20):
                async for event in sub:
                    uri = getattr(event, "uri", None)
                    if uri is not None:
                        updates.append(str(uri))
                        break
            await client.call_tool(toggle, {})
    else:
        got_one = anyio.Event()

        async def on_message(message: Any) -> None:
            root = getattr(message, "root", message)
            if isinstance(root, types.ResourceUpdatedNotification):
                updates.append(str(root.params.uri))
                got_one.set()

        client.session._message_handler = on_message  # the handler of this session
        await client.subscribe_resource(watched)
        await client.call_tool(toggle, {})
        with anyio.move_on_after(20):
            await got_one.wait()
        await client.call_tool(toggle, {})
        await client.unsubscribe_resource(watched)
    out["updates"] = updates[:1]


async def main() -> None:
    if sys.argv[1] == "stdio":
        server: Any = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
    else:
        server = sys.argv[2]
    out: dict[str, Any] = {}
    async with Client(server, cache=None) as client:
        await survey(client, out)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    anyio.run(main)
