// A Vercel AI SDK agent (npm `ai` 6, MockLanguageModelV3 from `ai/test`: no network) with
// experimental_telemetry, exporting its spans over OTLP/HTTP protobuf with the OpenTelemetry
// Node SDK (BatchSpanProcessor, its schedule from OTEL_BSP_SCHEDULE_DELAY as any agent's).
// Driven by tests/agents/main.rs, run with the working directory holding node_modules
// (target/agents/ts: scripts/agents.sh installs tests/agents/ts/package-lock.json there).
//
// Scenarios (one ToolLoopAgent run each, in the order given, repeats allowed):
//   ok        weather({city:'Paris', days:2})        succeeds
//   raises    flaky({x:1}) throws an Error           the tool's failure (FLAKY_HEALED=1: succeeds)
//   bad_args  weather({city:'Paris', days:'many'})   zod rejects the input: the SDK makes no tool span
//
// Usage: node vercel_agent.mjs --endpoint URL --scenarios a,b [--linger-ms N] [--mark 1]
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const req = createRequire(join(process.cwd(), 'package.json'));
const imp = (name) => import(pathToFileURL(req.resolve(name)).href);
const { NodeTracerProvider } = await imp('@opentelemetry/sdk-trace-node');
const { BatchSpanProcessor } = await imp('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = await imp('@opentelemetry/resources');
const { OTLPTraceExporter } = await imp('@opentelemetry/exporter-trace-otlp-proto');
const { ToolLoopAgent, tool, stepCountIs } = await imp('ai');
const { MockLanguageModelV3 } = await imp('ai/test');
const { z } = await imp('zod');

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const healed = process.env.FLAKY_HEALED === '1';
const mark = (tool, ok) => {
  if (args.mark) console.log(`tool-event ${JSON.stringify({ tool, ok, t: Date.now() / 1000 })}`);
};

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'vercel-agent' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: args.endpoint }))],
});
provider.register(); // `ai` 6 uses the global tracer provider

const usage = (i, o) => ({
  inputTokens: { total: i, noCache: i, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: o, text: o, reasoning: undefined },
});
const SCRIPTS = {
  ok: ['weather', { city: 'Paris', days: 2 }],
  raises: ['flaky', { x: 1 }],
  bad_args: ['weather', { city: 'Paris', days: 'many' }],
};

function model(scenario) {
  return new MockLanguageModelV3({
    provider: 'mock-provider',
    modelId: `scripted-${scenario}`,
    doGenerate: async ({ prompt }) => {
      if (!prompt.some((m) => m.role === 'tool')) {
        const [name, input] = SCRIPTS[scenario];
        return {
          content: [{ type: 'tool-call', toolCallId: `call_${scenario}`, toolName: name, input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage: usage(10, 5),
          warnings: [],
        };
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(10, 5), warnings: [] };
    },
  });
}

const tools = {
  weather: tool({
    description: 'Forecast for a city.',
    inputSchema: z.object({ city: z.string(), days: z.number().int() }),
    execute: async ({ city, days }) => {
      mark('weather', true);
      return { city, days, forecast: 'sunny' };
    },
  }),
  flaky: tool({
    description: 'Throws unless healed.',
    inputSchema: z.object({ x: z.number() }),
    execute: async ({ x }) => {
      mark('flaky', healed);
      if (healed) return 'fine';
      throw new Error(`flaky backend down (x=${x})`);
    },
  }),
};

for (const scenario of (args.scenarios ?? '').split(',')) {
  if (!SCRIPTS[scenario]) throw new Error(`unknown scenario ${scenario}; known: ${Object.keys(SCRIPTS)}`);
  const agent = new ToolLoopAgent({
    model: model(scenario),
    tools,
    stopWhen: stepCountIs(3),
    experimental_telemetry: { isEnabled: true, functionId: 'test-agent' },
  });
  try {
    await agent.generate({ prompt: `scenario ${scenario}` });
    console.log(`run ${scenario}: ok`);
  } catch (e) {
    console.log(`run ${scenario}: ${e.name}`);
  }
}
if (args['linger-ms']) await new Promise((r) => setTimeout(r, Number(args['linger-ms'])));
await provider.shutdown(); // flushes what is left
