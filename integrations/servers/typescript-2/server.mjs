// An MCP server written with the official TypeScript SDK 2.x (npm `@modelcontextprotocol/server`
// 2.4: `McpServer`, `serveStdio`, `createMcpHandler`), for the gateway's tests of MCP 2026-07-28
// (gateway/tests/sdk_clients/, gateway/tests/gateway/).
//
//   node server.mjs [OPTIONS] stdio
//   node server.mjs [OPTIONS] http PORT    # streamable HTTP on 127.0.0.1:PORT, path /mcp
//
// Options:
//   --legacy serve|reject   how a 2025-era opening (`initialize`) is met: served (the SDK's
//                           default) or refused with -32022 — `reject` is a server that speaks
//                           only 2026-07-28
//   --tools-ttl MS          the `ttlMs` (cacheScope "public") of its `tools/list` results
//
// Tools, as the other fixture servers (../python/server.py, ../typescript/server.mjs): `ok`
// succeeds; `flaky` throws while the server is broken (it starts broken; `mend` mends it);
// `needs_int` takes an integer `n`; `hang` never answers; `die` kills the process mid-call;
// `seen` answers what the server received (every inbound request by method, and `tools/call` by
// tool name, `seen` itself left out; HTTP requests also by their `Mcp-Method` header, under
// `headers`) as JSON; `grow` adds a tool `grown` and says so (`notifications/tools/list_changed`,
// on the `subscriptions/listen` streams of 2026-07-28 clients). Lines on stderr say when `hang`
// and `die` started, and when it listens.

import { createServer } from "node:http";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod/v4";

const args = process.argv.slice(2);
const options = { legacy: "serve", toolsTtl: undefined };
while (args[0]?.startsWith("--")) {
  const [flag, value] = args.splice(0, 2);
  if (flag === "--legacy") options.legacy = value;
  else if (flag === "--tools-ttl") options.toolsTtl = Number(value);
  else throw new Error(`unknown option ${flag}`);
}
const [mode, port] = args;

const methods = {};
const tools = {};
const headers = {};
const state = { broken: true, grown: false };

/** Counts a request (`header`: its `Mcp-Method` header, over HTTP). */
function count(message, header) {
  if (message && message.id !== undefined && typeof message.method === "string") {
    const name = message.method === "tools/call" ? message.params?.name : undefined;
    if (name === "seen") return;
    methods[message.method] = (methods[message.method] ?? 0) + 1;
    if (name !== undefined) tools[String(name)] = (tools[String(name)] ?? 0) + 1;
    if (header !== undefined) headers[String(header)] = (headers[String(header)] ?? 0) + 1;
  }
}

const text = (t) => ({ content: [{ type: "text", text: t }] });
// Set by the stdio entry: how the one server instance tells its client of a change.
let announce = () => {};

function build() {
  const cacheHints =
    options.toolsTtl === undefined ? undefined : { "tools/list": { ttlMs: options.toolsTtl, cacheScope: "public" } };
  const server = new McpServer({ name: "tool-health-typescript-2-fixture", version: "1.0.0" }, { cacheHints });
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
    { description: "Doubles an integer.", inputSchema: z.object({ n: z.number().int() }) },
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
    text(JSON.stringify({ methods, tools, headers })),
  );
  server.registerTool("grow", { description: "Adds the tool `grown`." }, async () => {
    state.grown = true;
    announce();
    return text("grown");
  });
  if (state.grown) {
    server.registerTool("grown", { description: "Added by `grow`." }, async () => text("here"));
  }
  return server;
}

if (mode === "http") {
  const handler = createMcpHandler(() => build(), { legacy: options.legacy === "reject" ? "reject" : "stateless" });
  announce = () => handler.notify.toolsChanged();
  const http = createServer(async (req, res) => {
    const url = new URL(req.url, `http://${req.headers.host ?? "127.0.0.1"}`);
    if (url.pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    if (req.method === "POST") {
      try {
        count(JSON.parse(body.toString("utf8")), req.headers["mcp-method"]);
      } catch {
        // Not JSON: the handler answers it.
      }
    }
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const request = new Request(url, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) =>
        Array.isArray(v) ? v.map((x) => [k, x]) : v === undefined ? [] : [[k, v]],
      ),
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
      signal: abort.signal,
    });
    let response;
    try {
      response = await handler.fetch(request);
    } catch (e) {
      res.writeHead(500).end(String(e));
      return;
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) {
      res.end();
      return;
    }
    try {
      for await (const chunk of response.body) res.write(chunk);
    } catch {
      // The client went away.
    }
    res.end();
  });
  http.listen(Number(port), "127.0.0.1", () => console.error(`listening on 127.0.0.1:${port}`));
} else {
  // Each message the client sends, counted as it arrives (the entry reads the same stream).
  let pending = "";
  process.stdin.on("data", (chunk) => {
    pending += chunk.toString("utf8");
    let at;
    while ((at = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, at);
      pending = pending.slice(at + 1);
      try {
        count(JSON.parse(line));
      } catch {
        // Not JSON: the entry answers it.
      }
    }
  });
  let instance;
  serveStdio(
    () => {
      instance = build();
      return instance;
    },
    { legacy: options.legacy },
  );
  announce = () => {
    instance?.registerTool("grown", { description: "Added by `grow`." }, async () => text("here"));
  };
}
