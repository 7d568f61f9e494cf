// The status page in a real browser: Debian's Chromium, headless, driven through the DevTools
// protocol by playwright-core (which downloads no browser), against the page the demo serves.
//
//   node tests/web/status-page.mjs DEMO_BINARY [CHROMIUM]   (scripts/status_e2e.sh runs it)
//
// It starts the demo itself (`--status 127.0.0.1:PORT --markup-tool`, a control token in the
// environment) so that it can restart it, and checks, with bounded and generous waits:
//   1. the sick tool (sql_query) shows open soon after its breaker trips — the delay from the
//      trip (seen on the server's own event stream, read here) to the page's row changing is
//      measured and printed (the page's goal: within 1 s) — and closed after its probe;
//   2. a tool whose name is markup is shown as text (no element, no script ran);
//   3. the controls appear (a token is configured) and force a tool open, sent with the token;
//   4. the filter narrows the table;
//   5. after the server restarts, the page reconnects by itself and shows the new run.
// Screenshots go to target/status-e2e/. The last line is "N passed, M failed".
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const shots = join(root, 'target', 'status-e2e');
mkdirSync(shots, { recursive: true });
const demo = process.argv[2];
const browserPath = process.argv[3] || '/usr/bin/chromium';
if (!demo) {
  console.error('usage: node tests/web/status-page.mjs DEMO_BINARY [CHROMIUM]');
  process.exit(2);
}
const MARKUP = '<img src=x onerror="window.pwned=1"><b>markup</b>&amp;';
const TOKEN = 'e2e-control-token-' + process.pid + '-0123456789';
const WAIT = 30_000; // every bounded wait (generous: a loaded CI machine)
const TRIP_BOUND = 3_000; // the test's bound on trip → page (the goal, 1 s, is reported)

const results = [];
function check(name, ok, detail = '') {
  results.push(ok);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ': ' + detail : ''}`);
}

async function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
    s.on('error', rej);
  });
}

function startDemo(port, seconds) {
  const child = spawn(demo, ['--status', `127.0.0.1:${port}`, '--markup-tool', '--seconds', String(seconds), '--linger', '120'],
    { env: { ...process.env, TOOL_HEALTH_STATUS_TOKEN: TOKEN, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  child.output = () => out;
  return child;
}

async function waitFor(what, fn, ms = WAIT) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch { /* not yet */ }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads the server's event stream; resolves with Date.now() of the first matching transition. */
function watchTransition(base, matches) {
  const controller = new AbortController();
  const seen = (async () => {
    const res = await fetch(base + 'events?limit=0', { signal: controller.signal });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the event stream ended');
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const name = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (name === 'transition' && matches(JSON.parse(data))) return Date.now();
      }
    }
  })();
  return { seen, stop: () => controller.abort() };
}

const port = await freePort();
const base = `http://127.0.0.1:${port}/`;
let server = startDemo(port, 24);
let browser;
try {
  await waitFor('the demo to serve', async () => (await fetch(base + 'tools')).ok);
  // The trip, as the server announces it (sql_query's database dies 12 % into the run).
  const trip = watchTransition(base, (t) => t.tool === 'sql_query' && t.from === 'closed' && t.to === 'open');

  browser = await chromium.launch({
    executablePath: browserPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  await page.goto(base);
  await waitFor('the page to go live', async () => (await page.textContent('#conn')) === 'live');
  // The page side of the measurement: when sql_query's row first reads open.
  await page.evaluate(() => {
    window.__openedAt = null;
    const seen = () => {
      const row = [...document.querySelectorAll('#rows tr')].find((r) => r.dataset.tool === 'sql_query');
      if (row && row.dataset.state === 'open' && window.__openedAt === null) window.__openedAt = Date.now();
    };
    new MutationObserver(seen).observe(document.getElementById('rows'), { subtree: true, attributes: true, childList: true });
    seen();
  });

  // 1. The trip reaches the page.
  const trippedAt = await Promise.race([trip.seen, new Promise((_, rej) => setTimeout(() => rej(new Error('no trip within the bound')), WAIT))]);
  trip.stop();
  const openedAt = await waitFor('sql_query to read open on the page', () => page.evaluate(() => window.__openedAt), TRIP_BOUND + 2_000).catch(() => null);
  const delay = openedAt === null ? null : openedAt - trippedAt;
  check('the sick tool shows open after its trip', delay !== null && delay <= TRIP_BOUND,
        delay === null ? 'never' : `${delay} ms after the server's transition event (goal 1000 ms)`);
  await page.screenshot({ path: join(shots, 'open.png'), fullPage: true });
  // The countdown comes with the snapshot that follows the transition (within 100 ms).
  const openRow = page.locator('#rows tr[data-tool="sql_query"]');
  // (The tool stays open for most of its outage: probes fail within milliseconds.)
  const retryText = await waitFor('the countdown', async () => {
    const text = await openRow.locator('td').nth(7).textContent();
    return /\d+\.\d s|not foreseeable/.test(text) ? text : null;
  }, 5_000).catch(() => '');
  check('an open breaker shows its retry-after countdown', retryText !== '', JSON.stringify(retryText));

  // 2. Markup in a name is text.
  await waitFor('the markup tool to be listed', () => page.evaluate((name) =>
    [...document.querySelectorAll('#rows tr')].some((r) => r.dataset.tool === name), MARKUP));
  const markup = await page.evaluate((name) => {
    const row = [...document.querySelectorAll('#rows tr')].find((r) => r.dataset.tool === name);
    return {
      text: row.querySelector('td.tool').textContent,
      elementsInName: row.querySelector('td.tool').children.length,
      injected: document.querySelectorAll('#rows img, #rows b, #log img, #log b, script:not(:first-of-type)').length,
      pwned: window.pwned === 1,
    };
  }, MARKUP);
  check('a tool name full of markup renders as text', markup.text === MARKUP && markup.elementsInName === 0 && markup.injected === 0 && !markup.pwned,
        JSON.stringify(markup));

  // 3. Controls: shown because a token is configured, sent with it.
  check('the controls appear when a token is configured', await page.isVisible('#token'));
  await page.fill('#token', TOKEN);
  await page.locator('#rows tr[data-tool="code_interpreter"] button', { hasText: 'force open' }).click();
  const forced = await waitFor('code_interpreter to be forced open', async () => {
    const t = await (await fetch(base + 'tools/code_interpreter')).json();
    return t.control === 'forced_open' ? t : null;
  }).catch(() => null);
  check('force open from the page reaches the registry (with the token)', forced !== null);
  await waitFor('the page to show it forced', async () => (await page.getAttribute('#rows tr[data-tool="code_interpreter"]', 'data-state')) === 'forced_open')
    .then(() => check('the page shows the tool forced open', true), (e) => check('the page shows the tool forced open', false, String(e)));
  await page.screenshot({ path: join(shots, 'forced.png'), fullPage: true });
  await page.locator('#rows tr[data-tool="code_interpreter"] button', { hasText: 'release' }).click();
  await waitFor('the release', async () => (await (await fetch(base + 'tools/code_interpreter')).json()).control === 'normal')
    .then(() => check('release from the page', true), (e) => check('release from the page', false, String(e)));
  const unauthorized = await fetch(base + 'tools/code_interpreter/force-open', { method: 'POST' });
  check('a control without the token is refused', unauthorized.status === 401, String(unauthorized.status));

  // 1 (cont.). Closed after its probe (the database comes back 55 % into the run).
  await waitFor('sql_query to close after its probe', async () => {
    const row = page.locator('#rows tr[data-tool="sql_query"]');
    return (await row.getAttribute('data-state')) === 'closed' && /probe succeeded/.test(await row.locator('td').nth(8).textContent());
  }).then(() => check('the sick tool shows closed after its probe', true), (e) => check('the sick tool shows closed after its probe', false, String(e)));
  await page.screenshot({ path: join(shots, 'recovered.png'), fullPage: true });

  // 4. The filter.
  await page.fill('#filter', 'sql');
  await waitFor('the filter to apply', async () => {
    const tools = await page.$$eval('#rows tr', (rows) => rows.map((r) => r.dataset.tool));
    return tools.length === 1 && tools[0] === 'sql_query';
  }).then(() => check('the filter narrows the table', true), (e) => check('the filter narrows the table', false, String(e)));
  await page.fill('#filter', '');

  // 5. A restarted server: the page reconnects by itself and shows the new run.
  const before = await page.evaluate(() => document.getElementById('counts').textContent);
  server.kill('SIGKILL');
  await waitFor('the page to notice', async () => (await page.textContent('#conn')) !== 'live')
    .then(() => check('the page notices the server is gone', true), (e) => check('the page notices the server is gone', false, String(e)));
  server = startDemo(port, 30);
  await waitFor('the page to reconnect', async () => (await page.textContent('#conn')) === 'live')
    .then(() => check('the page reconnects after a server restart', true), (e) => check('the page reconnects after a server restart', false, String(e)));
  await page.screenshot({ path: join(shots, 'reconnected.png'), fullPage: true });
  check('no script errors on the page', consoleErrors.filter((e) => !/ERR_CONNECTION_REFUSED|net::ERR|Failed to load resource/.test(e)).length === 0,
        consoleErrors.join(' | '));
  console.log(`page state before the restart: ${before}`);
} catch (e) {
  check('the browser run', false, String(e && e.stack || e));
  console.log(server.output().split('\n').slice(-30).join('\n'));
} finally {
  if (browser) await browser.close().catch(() => {});
  server.kill('SIGKILL');
}
const passed = results.filter(Boolean).length;
console.log(`${passed} passed, ${results.length - passed} failed`);
process.exit(results.every(Boolean) ? 0 : 1);
