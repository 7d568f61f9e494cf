// Another site's page against a running tool-health-gateway, in a real browser (Debian's
// Chromium, headless, through playwright-core): what issue 29 reproduced on main, attempted
// the way a page does it. The gateway's test (gateway/tests/gateway/browser.rs) starts the
// gateway and runs this script, then checks through the API that nothing moved.
//
//   node tests/web/cross-origin.mjs GATEWAY_PORT TOOL [CHROMIUM]
//
// 1. A page on another origin (http://evil.test:PORT, this script's own server; the browser
//    resolves evil.test and rebind.test to 127.0.0.1) sends "simple" requests the browser
//    sends without asking first: `fetch(..., {mode: "no-cors"})` with a text/plain report of
//    a failure (three times), a bare claim, an OTLP body as a Blob without a type; and a
//    plain HTML form post. It also tries to read /v1/servers with a CORS fetch.
// 2. DNS rebinding, after the switch: the browser opens http://rebind.test:GATEWAY_PORT/ —
//    the gateway's own address under the attacker's name, where the page would be same-origin
//    — and reads /v1/servers and /v1/tools from there.
// Every answer the page could see is printed; the last line is "N passed, M failed".
import { createServer } from 'node:http';
import { chromium } from 'playwright-core';

const gwPort = Number(process.argv[2]);
const tool = process.argv[3];
const browserPath = process.argv[4] || '/usr/bin/chromium';
if (!gwPort || !tool) {
  console.error('usage: node tests/web/cross-origin.mjs GATEWAY_PORT TOOL [CHROMIUM]');
  process.exit(2);
}
const WAIT = 30_000;
const results = [];
function check(name, ok, detail = '') {
  results.push(ok);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ': ' + detail : ''}`);
}

// The attacker's page. `gw` is the gateway as the attacker addresses it (127.0.0.1).
const gw = `http://127.0.0.1:${gwPort}`;
// One failing execute_tool span of `victim`, OTLP/protobuf, built in the page (what a page can
// put in a Blob): trace id, span id, name, start and end, two attributes, status ERROR.
const page = `<!doctype html><html><body><form id="f" method="POST" enctype="text/plain"
  action="${gw}/v1/tools/${tool}/report" target="sink"><input name='{"outcome":"failure","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
function varint(out, v) { while (v >= 0x80) { out.push((v & 0x7f) | 0x80); v = Math.floor(v / 128); } out.push(v); }
function field(out, n, bytes) { varint(out, n * 8 + 2); varint(out, bytes.length); out.push(...bytes); }
const text = (s) => Array.from(new TextEncoder().encode(s));
function kv(k, v) { const any = []; field(any, 1, text(v)); const o = []; field(o, 1, text(k)); field(o, 2, any); return o; }
function fixed64(out, n, ms) { varint(out, n * 8 + 1); let ns = BigInt(ms) * 1000000n;
  for (let i = 0; i < 8; i++) { out.push(Number(ns & 0xffn)); ns >>= 8n; } }
function spans() {
  const scope = [];
  for (let i = 0; i < 3; i++) {
    const s = [];
    field(s, 1, Array(16).fill(7)); field(s, 2, Array(8).fill(i + 1)); field(s, 5, text('execute_tool victim'));
    fixed64(s, 7, Date.now() - 20 + i); fixed64(s, 8, Date.now() - 10 + i);
    field(s, 9, kv('gen_ai.operation.name', 'execute_tool')); field(s, 9, kv('gen_ai.tool.name', 'victim'));
    field(s, 15, [0x18, 0x02]);
    field(scope, 2, s);
  }
  const rs = []; field(rs, 2, scope); const req = []; field(req, 1, rs);
  return new Uint8Array(req);
}
async function attack() {
  const seen = {};
  const opaque = (r) => r.type; // no-cors answers are opaque: the page sees nothing of them
  for (let i = 0; i < 3; i++) {
    seen['report ' + i] = await fetch('${gw}/v1/tools/${tool}/report', { method: 'POST', mode: 'no-cors',
      body: '{"outcome":"failure","duration_ms":1}' }).then(opaque, (e) => 'error ' + e);
  }
  seen.claim = await fetch('${gw}/v1/tools/${tool}/claim', { method: 'POST', mode: 'no-cors' }).then(opaque, (e) => 'error ' + e);
  seen.traces = await fetch('${gw}/v1/traces', { method: 'POST', mode: 'no-cors', body: new Blob([spans()]) })
    .then(opaque, (e) => 'error ' + e);
  seen.read = await fetch('${gw}/v1/servers').then((r) => 'read ' + r.status, (e) => 'blocked');
  document.getElementById('f').submit();
  await new Promise((r) => setTimeout(r, 300));
  return seen;
}
</script></body></html>`;

const evil = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end(page);
});
await new Promise((r) => evil.listen(0, '127.0.0.1', r));
const evilPort = evil.address().port;

let browser;
try {
  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
      '--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1'],
  });
  const tab = await browser.newPage();
  tab.setDefaultTimeout(WAIT);
  await tab.goto(`http://evil.test:${evilPort}/`);
  const seen = await tab.evaluate(() => attack());
  console.log('what the page saw:', JSON.stringify(seen));
  check('the page could not read /v1/servers across origins', seen.read === 'blocked', seen.read);

  // DNS rebinding, after the switch: the gateway's port under the attacker's name.
  const rebound = `http://rebind.test:${gwPort}`;
  const nav = await tab.goto(`${rebound}/v1/servers`);
  const body = await tab.textContent('body');
  check('a page at the rebound name is refused', nav.status() === 403, `${nav.status()} ${body.slice(0, 120)}`);
  check('…and sees no server, pid or error', !body.includes('"pid"') && !body.includes('last_error'));
  const read = await tab.evaluate(async () => {
    const r = await fetch('/v1/tools');
    return r.status;
  });
  check('a same-origin fetch of /v1/tools under the rebound name is refused', read === 403, String(read));
  const mcp = await tab.evaluate(async () => {
    const r = await fetch('/mcp', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'evil', version: '1' } } }) });
    return r.status;
  });
  check('…and so is /mcp', mcp === 403, String(mcp));
} catch (e) {
  check('the browser ran the page', false, String(e && e.stack || e));
} finally {
  if (browser) await browser.close();
  evil.close();
}
const failed = results.filter((ok) => !ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
