// The official TypeScript MCP SDK client (npm `@modelcontextprotocol/sdk` 1.32) as a host that
// uses everything a server offers, and says what it saw — for the gateway's pass-through
// comparison (gateway/tests/sdk_clients/passthrough.rs): the same survey of
// `server-everything` and `server-filesystem`, directly and through the gateway.
//
//   node survey.mjs stdio COMMAND ARG...   # launches the server (or the gateway) itself
//   node survey.mjs http URL               # streamable HTTP
//
// The environment says what to do:
//
//   SURVEY_EVERYTHING  the prefix server-everything's tools have here ("" directly, "ev__"
//                      through the gateway); unset: no server-everything steps
//   SURVEY_FILES       the same for server-filesystem's tools; SURVEY_FILE a file it can read
//   SURVEY_URI         the prefix of server-everything's resource URIs here ("" directly,
//                      "tool-health://ev/" through the gateway)
//   SURVEY_ROOT        the directory the host offers as its root (roots/list)
//   SURVEY_HOST        "full" (the default): roots, sampling and elicitation offered and
//                      answered; "bare": none of them offered
//
// It prints one JSON object on stdout: what each list gave, what each read, get and completion
// answered, the progress, resource updates and log messages heard, and the answers of the tools
// that ask the host (sampling, elicitation, roots). Errors are reported in place, never fatal.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const env = process.env;
const full = (env.SURVEY_HOST ?? "full") === "full";
const out = { logs: [], updates: [], asked: [] };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const error = (e) => ({ error: { code: e?.code ?? 0, message: String(e?.message ?? e) } });

// Waits until `check()` is true, at most `ms`.
async function until(check, ms) {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await sleep(50);
  return check();
}

const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, env: { ...env }, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client(
  { name: "tool-health-survey", version: "1.0.0" },
  {
    capabilities: full
      ? { roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } }
      : {},
  },
);

client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  out.logs.push({ level: n.params.level, logger: n.params.logger ?? null, data: n.params.data });
});
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  out.updates.push(n.params.uri);
});
if (full) {
  client.setRequestHandler(ListRootsRequestSchema, () => {
    out.asked.push("roots/list");
    return { roots: [{ uri: `file://${env.SURVEY_ROOT ?? "/tmp"}`, name: "survey root" }] };
  });
  client.setRequestHandler(CreateMessageRequestSchema, (r) => {
    out.asked.push("sampling/createMessage");
    const first = r.params.messages[0]?.content;
    return {
      role: "assistant",
      content: { type: "text", text: `sampled: ${first?.text ?? ""}` },
      model: "survey-model",
      stopReason: "endTurn",
    };
  });
  client.setRequestHandler(ElicitRequestSchema, (r) => {
    out.asked.push(`elicitation/create (${r.params.mode ?? "form"})`);
    if (r.params.mode === "url") return { action: "decline" };
    // A value for every property the form asks, as a user would fill it.
    const content = {};
    for (const [key, p] of Object.entries(r.params.requestedSchema?.properties ?? {})) {
      if (p.default !== undefined) content[key] = p.default;
      else if (p.type === "boolean") content[key] = true;
      else if (p.type === "number" || p.type === "integer") content[key] = p.minimum ?? 1;
      else if (p.enum) content[key] = p.enum[0];
      else if (p.oneOf) content[key] = p.oneOf[0].const;
      else if (p.type === "array") content[key] = [p.items?.enum?.[0] ?? p.items?.anyOf?.[0]?.const].filter(Boolean);
      else if (p.format === "email") content[key] = "survey@example.com";
      else if (p.format === "uri") content[key] = "https://example.com";
      else if (p.format === "date") content[key] = "2000-01-01";
      else if (p.format === "date-time") content[key] = "2000-01-01T00:00:00Z";
      else content[key] = "survey";
    }
    return { action: "accept", content };
  });
}

await client.connect(transport);
out.server = client.getServerVersion()?.name ?? null;
out.capabilities = Object.keys(client.getServerCapabilities() ?? {}).sort();

// Every page of a list.
async function all(list, key) {
  const items = [];
  let cursor;
  do {
    const page = await list(cursor ? { cursor } : undefined);
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

// What a call answered, in short: its text blocks and the URIs of its resource blocks.
function answer(r) {
  return {
    isError: Boolean(r.isError),
    text: (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
    links: (r.content ?? []).filter((c) => c.type === "resource_link").map((c) => c.uri),
    embedded: (r.content ?? []).filter((c) => c.type === "resource").map((c) => c.resource.uri),
  };
}

async function call(name, args, options) {
  try {
    return answer(await client.callTool({ name, arguments: args ?? {} }, undefined, options));
  } catch (e) {
    return error(e);
  }
}

const caps = client.getServerCapabilities() ?? {};
const tools = await all((p) => client.listTools(p), "tools");
out.tools = tools.map((t) => t.name).sort();
out.resources = [];
out.templates = [];
out.prompts = [];
if (caps.resources) {
  const resources = await all((p) => client.listResources(p), "resources");
  out.resources = resources.map((r) => ({ uri: r.uri, name: r.name, mimeType: r.mimeType ?? null }));
  out.templates = (await all((p) => client.listResourceTemplates(p), "resourceTemplates")).map(
    (t) => ({ uriTemplate: t.uriTemplate, name: t.name }),
  );
  out.reads = {};
  for (const r of resources) {
    try {
      const read = await client.readResource({ uri: r.uri });
      out.reads[r.uri] = read.contents.map((c) => ({
        uri: c.uri,
        mimeType: c.mimeType ?? null,
        text: c.text ?? null,
        blob: c.blob ? c.blob.length : null,
      }));
    } catch (e) {
      out.reads[r.uri] = error(e);
    }
  }
}

// Completions: every prompt argument and every template variable, from an empty value.
const completions = [];
async function complete(ref, name, value, context) {
  try {
    const r = await client.complete({ ref, argument: { name, value }, ...(context ? { context } : {}) });
    const c = { ref, argument: name, values: r.completion.values };
    completions.push(c);
    return c.values;
  } catch (e) {
    completions.push({ ref, argument: name, ...error(e) });
    return [];
  }
}

// A value for each prompt argument: the first completion, else a fixed one.
const fixed = { city: "Paris", state: "CA", resourceType: "Text", resourceId: "1" };
if (caps.prompts) {
  const prompts = await all((p) => client.listPrompts(p), "prompts");
  out.prompts = prompts.map((p) => ({ name: p.name, arguments: (p.arguments ?? []).map((a) => a.name) }));
  out.gets = {};
  for (const p of prompts) {
    const args = {};
    for (const a of p.arguments ?? []) {
      const values = caps.completions
        ? await complete({ type: "ref/prompt", name: p.name }, a.name, "", { arguments: { ...args } })
        : [];
      args[a.name] = values[0] ?? fixed[a.name] ?? "1";
    }
    try {
      const got = await client.getPrompt({ name: p.name, arguments: args });
      out.gets[p.name] = got.messages.map((m) => ({
        role: m.role,
        type: m.content.type,
        text: m.content.text ?? null,
        uri: m.content.resource?.uri ?? null,
      }));
    } catch (e) {
      out.gets[p.name] = error(e);
    }
  }
}
if (caps.completions) {
  for (const t of out.templates) {
    for (const [, name] of t.uriTemplate.matchAll(/\{[+#./;?&]?([^}]+)\}/g)) {
      await complete({ type: "ref/resource", uri: t.uriTemplate }, name, "");
    }
  }
}
out.completions = completions;

const ev = env.SURVEY_EVERYTHING;
if (ev !== undefined) {
  const uri = env.SURVEY_URI ?? "";
  // Progress: 4 steps.
  const progress = [];
  out.longRunning = await call(
    `${ev}trigger-long-running-operation`,
    { duration: 0.4, steps: 4 },
    { onprogress: (p) => progress.push([p.progress, p.total ?? null]) },
  );
  out.progress = progress;
  // Log messages: the server's own, at every level from now on.
  await client.setLoggingLevel("debug");
  // A subscription: one update, then unsubscribed.
  const watched = `${uri}demo://resource/static/document/architecture.md`;
  try {
    await client.subscribeResource({ uri: watched });
    await call(`${ev}toggle-subscriber-updates`);
    await until(() => out.updates.length > 0, 20000);
    await call(`${ev}toggle-subscriber-updates`);
    await client.unsubscribeResource({ uri: watched });
  } catch (e) {
    out.subscribe = error(e);
  }
  out.simulatedLogging = await call(`${ev}toggle-simulated-logging`);
  await until(() => out.logs.some((l) => /level.?message/i.test(String(l.data))), 10000);
  await call(`${ev}toggle-simulated-logging`);
  // What the server asks the host.
  out.sampling = await call(`${ev}trigger-sampling-request`, { prompt: "hello", maxTokens: 10 });
  out.elicitation = await call(`${ev}trigger-elicitation-request`);
  out.roots = await call(`${ev}get-roots-list`);
  // A URI found in a tool's result, read as it is.
  out.links = await call(`${ev}get-resource-links`, { count: 2 });
  out.linkReads = {};
  for (const link of out.links.links ?? []) {
    try {
      const read = await client.readResource({ uri: link });
      out.linkReads[link] = read.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType ?? null }));
    } catch (e) {
      out.linkReads[link] = error(e);
    }
  }
}

const files = env.SURVEY_FILES;
if (files !== undefined) {
  out.allowed = await call(`${files}list_allowed_directories`);
  out.file = await call(`${files}read_text_file`, { path: env.SURVEY_FILE });
}

// The last log messages (an unsubscribe's) may come just after its answer.
await sleep(300);
out.logs.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
