// The official TypeScript MCP SDK client (npm `@modelcontextprotocol/sdk`, `Client`) as a host of
// the gateway, for the gateway's tests (gateway/tests/sdk_clients/). The test drives it line by
// line, as it drives the Python client (../python/client.py):
//
//   node client.mjs stdio COMMAND ARG...   # launches the gateway itself, over stdio
//   node client.mjs http URL               # the gateway's /mcp, over streamable HTTP
//
// stdin, one JSON object a line (answered in order):
//
//   {"id": 1, "op": "list"}                                  -> {"id": 1, "tools": ["rs__ok", ...]}
//   {"id": 2, "op": "call", "name": "rs__ok", "arguments": {}}
//       -> {"id": 2, "isError": false, "text": "fine"}  or  {"id": 2, "error": {"code": -32602, "message": "..."}}
//   {"id": 3, "op": "bench", "name": "rs__echo", "arguments": {...}, "n": 100}
//       -> {"id": 3, "ns": [...]}: n sequential calls, each one's time in nanoseconds
//          (gateway/benches/sdk_clients.rs)
//
// stdout, besides the answers: {"event": "ready", "protocol": "...", "server": "..."} once
// connected, and {"event": "list_changed", "via": "notification"} for each
// `notifications/tools/list_changed` the client receives. Everything else (the gateway's log,
// when it is launched over stdio) goes to stderr. The client ends when stdin closes.

import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "tool-health-gateway-test-typescript", version: "1.0.0" });
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  emit({ event: "list_changed", via: "notification" });
});
await client.connect(transport);
emit({
  event: "ready",
  protocol: transport.protocolVersion ?? null,
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
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor);
      out.tools = tools;
    } else if (cmd.op === "call") {
      const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} });
      out.isError = Boolean(result.isError);
      out.text = (result.content ?? []).find((c) => c.type === "text")?.text ?? "";
    } else if (cmd.op === "bench") {
      const ns = [];
      for (let i = 0; i < cmd.n; i++) {
        const start = process.hrtime.bigint();
        const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} });
        ns.push(Number(process.hrtime.bigint() - start));
        if (result.isError) throw new Error(`bench call failed: ${JSON.stringify(result.content)}`);
      }
      out.ns = ns;
    } else {
      out.error = { code: 0, message: `unknown op ${cmd.op}` };
    }
  } catch (e) {
    out.error = { code: e instanceof McpError ? e.code : 0, message: String(e?.message ?? e) };
  }
  emit(out);
}
await client.close();
