// The host side of the gateway's peers bench (gateway/benches/peers.rs): the official
// TypeScript SDK client (npm `@modelcontextprotocol/sdk` 1.32.2, installed in
// integrations/servers/typescript by scripts/mcp_sdks.sh) with one `Client` over streamable
// HTTP per server measured, driven line by line by the bench, which decides the order (rounds
// interleaved across servers) and reads the servers' memory between steps:
//
//   node driver.mjs SDK_DIR
//
// stdin, one JSON object a line, each answered by one line on stdout:
//
//   {"op": "connect", "name": "gateway", "url": "http://127.0.0.1:PORT/mcp"}
//       -> {"ok": true, "server": "tool-health-gateway", "protocol": "..."}
//   {"op": "seq", "name": "gateway", "request": {...}, "n": 500}
//       -> {"ns": [ ... ]}        n sequential requests, each one's nanoseconds
//   {"op": "load", "name": "gateway", "request": {...}, "inflight": 16, "ms": 1500}
//       -> {"done": 41234, "seconds": 1.5003}   requests answered with `inflight` always in flight
//
// A request is {"kind": "call", "name": TOOL, "arguments": {...}, "expect": TEXT}, and each kind
// is one line of REQUESTS below: `read` (resources/read {uri}) and `prompt` (prompts/get {name,
// arguments}) are there for servers that serve them. An answer that is an error, or whose text
// is not `expect`, fails the step: {"error": "..."}.

import { createInterface } from "node:readline";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const sdkDir = process.argv[2];
const sdk = createRequire(`${sdkDir}/package.json`);
const load = async (path) => import(pathToFileURL(sdk.resolve(path)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = await load(
  "@modelcontextprotocol/sdk/client/streamableHttp.js",
);

/// Each kind of request: how it is sent, and the text of its answer.
const REQUESTS = {
  call: async (client, r) => {
    const result = await client.callTool({ name: r.name, arguments: r.arguments ?? {} });
    if (result.isError) throw new Error(`isError: ${JSON.stringify(result.content)}`);
    return result.content?.find((c) => c.type === "text")?.text;
  },
  read: async (client, r) => {
    const result = await client.readResource({ uri: r.uri });
    return result.contents?.[0]?.text;
  },
  prompt: async (client, r) => {
    const result = await client.getPrompt({ name: r.name, arguments: r.arguments ?? {} });
    return result.messages?.[0]?.content?.text;
  },
};

async function send(client, r) {
  const text = await REQUESTS[r.kind](client, r);
  if (r.expect !== undefined && text !== r.expect) {
    throw new Error(`answered ${JSON.stringify(text)}, not ${JSON.stringify(r.expect)}`);
  }
}

const clients = new Map();

async function handle(cmd) {
  if (cmd.op === "connect") {
    const transport = new StreamableHTTPClientTransport(new URL(cmd.url));
    const client = new Client({ name: "tool-health-gateway-bench", version: "1.0.0" });
    await client.connect(transport);
    clients.set(cmd.name, client);
    return {
      ok: true,
      server: client.getServerVersion()?.name ?? null,
      protocol: transport.protocolVersion ?? null,
    };
  }
  const client = clients.get(cmd.name);
  if (!client) throw new Error(`not connected: ${cmd.name}`);
  if (cmd.op === "seq") {
    const ns = [];
    for (let i = 0; i < cmd.n; i++) {
      const start = process.hrtime.bigint();
      await send(client, cmd.request);
      ns.push(Number(process.hrtime.bigint() - start));
    }
    return { ns };
  }
  if (cmd.op === "load") {
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(cmd.ms) * 1_000_000n;
    let done = 0;
    const worker = async () => {
      while (process.hrtime.bigint() < deadline) {
        await send(client, cmd.request);
        done++;
      }
    };
    await Promise.all(Array.from({ length: cmd.inflight }, worker));
    return { done, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
  }
  throw new Error(`unknown op ${cmd.op}`);
}

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  try {
    emit(await handle(JSON.parse(line)));
  } catch (e) {
    emit({ error: String(e?.stack ?? e) });
  }
}
for (const client of clients.values()) await client.close();
