// An MCP server written with the official TypeScript SDK (npm `@modelcontextprotocol/sdk`,
// `McpServer.registerTool`), for tool-health's integration tests (integrations/tests/mcp_sdk/).
//
//   node server.mjs stdio
//   node server.mjs http PORT          # streamable HTTP on 127.0.0.1:PORT, path /mcp
//   node server.mjs --sdk 1.20 stdio   # the same tools on SDK 1.20.2 (zod 3), whose answers
//                                      # to bad arguments were still JSON-RPC errors
//
// Tools: `ok` succeeds; `flaky` throws while the server is broken (it starts broken; `mend`
// mends it); `needs_int` takes an integer `n`; `hang` never answers; `die` kills the process
// mid-call; `seen` answers what the server received (every inbound request by method, and
// `tools/call` by tool name, `seen` itself left out) as JSON. Lines on stderr say when `hang`
// and `die` started.

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

const args = process.argv.slice(2);
let sdk = "current";
if (args[0] === "--sdk") {
  sdk = args[1];
  args.splice(0, 2);
}
const [mode, port] = args;

const base = sdk === "1.20" ? "sdk-1-20" : "@modelcontextprotocol/sdk";
const { McpServer } = await import(`${base}/server/mcp.js`);
const { StdioServerTransport } = await import(`${base}/server/stdio.js`);
const { StreamableHTTPServerTransport } = await import(`${base}/server/streamableHttp.js`);
const { z } = await import(sdk === "1.20" ? "zod-3" : "zod");

const methods = {};
const tools = {};
const state = { broken: true };

function count(message) {
  if (message && message.id !== undefined && typeof message.method === "string") {
    const name = message.method === "tools/call" ? message.params?.name : undefined;
    if (name === "seen") return;
    methods[message.method] = (methods[message.method] ?? 0) + 1;
    if (name !== undefined) tools[String(name)] = (tools[String(name)] ?? 0) + 1;
  }
}

const text = (t) => ({ content: [{ type: "text", text: t }] });

function build() {
  const server = new McpServer({ name: "tool-health-typescript-fixture", version: "1.0.0" });
  server.registerTool("ok", { description: "Succeeds." }, async () => text("fine"));
  server.registerTool("flaky", { description: "Throws while the server is broken." }, async () => {
    if (state.broken) throw new Error("flaky: upstream answered 503");
    return text("flaky works");
  });
  server.registerTool("mend", { description: "Mends `flaky`." }, async () => {
    state.broken = false;
    return text("mended");
  });
  server.registerTool(
    "needs_int",
    { description: "Doubles an integer.", inputSchema: { n: z.number().int() } },
    async ({ n }) => text(`twice ${n} is ${2 * n}`),
  );
  server.registerTool("hang", { description: "Never answers." }, async () => {
    console.error("hang started");
    return new Promise(() => {});
  });
  server.registerTool("die", { description: "Kills the process mid-call." }, async () => {
    console.error("die started");
    process.exit(3);
  });
  server.registerTool("seen", { description: "What the server received." }, async () =>
    text(JSON.stringify({ methods, tools })),
  );
  return server;
}

/** Connects `server` to `transport` and counts every message the transport delivers. */
async function connect(server, transport) {
  await server.connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    count(message);
    deliver?.(message, extra);
  };
}

if (mode === "http") {
  const sessions = new Map();
  const http = createServer(async (req, res) => {
    if (new URL(req.url, "http://127.0.0.1").pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    let body;
    if (req.method === "POST") {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    }
    const id = req.headers["mcp-session-id"];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport) {
      if (id || req.method !== "POST" || body?.method !== "initialize") {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await connect(build(), transport);
    }
    await transport.handleRequest(req, res, body);
  });
  http.listen(Number(port), "127.0.0.1", () => console.error(`listening on 127.0.0.1:${port}`));
} else {
  await connect(build(), new StdioServerTransport());
}
