// The official TypeScript MCP SDK 2.x client (npm `@modelcontextprotocol/client` 2.4, `Client`)
// as a host of the gateway, for the gateway's tests (gateway/tests/sdk_clients/). The test
// drives it line by line, as it drives the other clients (../python/client.py,
// ../typescript/client.mjs):
//
//   node client.mjs [--era auto|legacy] stdio COMMAND ARG...   # launches the gateway itself
//   node client.mjs [--era auto|legacy] http URL               # the gateway's /mcp
//
// `--era auto` (the default here) is the SDK's `versionNegotiation: { mode: 'auto' }`: it
// probes with `server/discover` and speaks MCP 2026-07-28 when the server offers it; `legacy`
// is the SDK's own default, the 2025 `initialize` handshake.
//
// stdin, one JSON object a line (answered in order):
//
//   {"id": 1, "op": "list"}       -> {"id": 1, "tools": ["rs__ok", ...], "ttlMs": 0, "cacheScope": "private"}
//   {"id": 1, "op": "list", "cache": "use"}   the SDK's response cache may answer (default: "refresh")
//   {"id": 2, "op": "call", "name": "rs__ok", "arguments": {}}
//       -> {"id": 2, "isError": false, "text": "fine"}  or  {"id": 2, "error": {"code": -32602, "message": "..."}}
//
// stdout, besides the answers: {"event": "ready", "protocol": "...", "era": "modern"|"legacy",
// "server": "..."} once connected, and {"event": "list_changed", "via": "listen"|"notification"}
// each time the client hears that the tool list changed — on a 2026-07-28 connection through the
// `subscriptions/listen` stream it opens, else as the session's notification. Everything else
// (the gateway's log, when it is launched over stdio) goes to stderr. The client ends when stdin
// closes.

import { createInterface } from "node:readline";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const args = process.argv.slice(2);
let era = "auto";
if (args[0] === "--era") {
  era = args[1];
  args.splice(0, 2);
}
const [mode, target, ...rest] = args;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client(
  { name: "tool-health-gateway-test-typescript-2", version: "1.0.0" },
  { versionNegotiation: { mode: era } },
);
await client.connect(transport);
const modern = client.getProtocolEra() === "modern";
client.setNotificationHandler("notifications/tools/list_changed", async () => {
  emit({ event: "list_changed", via: modern ? "listen" : "notification" });
});
let subscription;
if (modern) {
  subscription = await client.listen({ toolsListChanged: true });
}
emit({
  event: "ready",
  protocol: client.getNegotiatedProtocolVersion() ?? null,
  era: client.getProtocolEra() ?? null,
  server: client.getServerVersion()?.name ?? null,
});

// Answered one at a time, in order.
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  const out = { id: cmd.id ?? null };
  try {
    if (cmd.op === "list") {
      const tools = [];
      let cursor;
      let page;
      do {
        page = await client.listTools(cursor ? { cursor } : undefined, { cacheMode: cmd.cache ?? "refresh" });
        tools.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor);
      out.tools = tools;
      out.ttlMs = page.ttlMs ?? null;
      out.cacheScope = page.cacheScope ?? null;
    } else if (cmd.op === "call") {
      const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} });
      out.isError = Boolean(result.isError);
      out.text = (result.content ?? []).find((c) => c.type === "text")?.text ?? "";
    } else {
      out.error = { code: 0, message: `unknown op ${cmd.op}` };
    }
  } catch (e) {
    out.error = {
      code: e instanceof ProtocolError ? e.code : typeof e?.code === "number" ? e.code : 0,
      message: String(e?.message ?? e),
    };
  }
  emit(out);
}
await subscription?.close();
if (mode === "http") await transport.terminateSession?.();
await client.close();
