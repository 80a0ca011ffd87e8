// End-to-end test of `mnemo ui` in headless Chromium (playwright-core with the system's chromium).
//
// Builds a store from the real session files in tests/fixtures/real/ (one compacted into a
// checkpoint, one remembered fact), starts `mnemo ui`, and drives the page by keyboard and click:
// find a session by search, move the time-travel slider across the checkpoint and see the context
// change, open a memory item and follow its evidence link, verify the store. Screenshots go to
// target/ui-e2e/. A 10,000-event session is opened and the time printed (never asserted).
//
// Environment: MNEMO_BIN (default target/debug/mnemo), CHROMIUM (default /usr/bin/chromium),
// MNEMO_E2E_OUT (default target/ui-e2e), MNEMO_E2E_LARGE_EVENTS (default 10000; 0 skips it).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { connect } from 'node:net';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const mnemo = resolve(root, process.env.MNEMO_BIN ?? 'target/debug/mnemo');
const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const out = resolve(root, process.env.MNEMO_E2E_OUT ?? 'target/ui-e2e');
const largeEvents = Number(process.env.MNEMO_E2E_LARGE_EVENTS ?? 10000);
const real = resolve(root, 'tests/fixtures/real/claude-code');
const compacted = '4c2ddfdc-b619-4525-8d03-1950fb1b0257';

function run(store, ...args) {
  return execFileSync(mnemo, ['--store', store, ...args], { encoding: 'utf8' });
}

/** The remembered fact: a session in Mnemo's own transcript format, in a real session's workspace. */
const PREFS = [
  { kind: 'session', session: 'prefs', workspace: '/tmp/private', title: 'Project conventions' },
  { session: 'prefs', turn: 't1', role: 'user', ts: 1765395600000, parts: [{ type: 'text', text: 'Remember that this project always uses pnpm, never npm.' }] },
  { session: 'prefs', turn: 't1', role: 'model', ts: 1765395601000, parts: [{ type: 'text', text: 'Noted: pnpm only.' }] },
  { session: 'prefs', turn: 't1', kind: 'turn_end', status: 'completed' },
];

/** A session in the same workspace, recorded after the fact was remembered: its next request
 *  gets the fact pushed, while the sessions recorded before it never could have. */
const LATER = [
  { kind: 'session', session: 'later', workspace: '/tmp/private', title: 'Setting up the build' },
  { session: 'later', turn: 't1', role: 'user', ts: 1765396600000, parts: [{ type: 'text', text: 'Install the build dependencies with pnpm.' }] },
  { session: 'later', turn: 't1', role: 'model', ts: 1765396601000, parts: [{ type: 'text', text: 'Installing them now.' }] },
  { session: 'later', turn: 't1', kind: 'turn_end', status: 'completed' },
];

/** A long session: turns of a request, a tool call, its result (every tenth an error) and a reply. */
function largeSession(events) {
  const lines = [{ kind: 'session', session: 'big', workspace: '/work/big', title: 'A long session' }];
  const result = 'line of a long tool result\n'.repeat(40);
  for (let turn = 0; turn < events / 4; turn++) {
    const ts = 1767225600000 + turn * 1000;
    const t = `t${turn}`;
    lines.push({ session: 'big', turn: t, role: 'user', ts, parts: [{ type: 'text', text: `step ${turn}: run the tests again` }] });
    lines.push({ session: 'big', turn: t, role: 'model', ts: ts + 1, parts: [{ type: 'tool_call', id: `c${turn}`, name: 'shell', args: { cmd: 'cargo test' } }] });
    lines.push({ session: 'big', turn: t, role: 'tool', ts: ts + 2, parts: [{ type: 'tool_result', id: `c${turn}`, name: 'shell', result, is_error: turn % 10 === 0 }] });
    lines.push({ session: 'big', turn: t, role: 'model', ts: ts + 3, parts: [{ type: 'text', text: `step ${turn} done` }] });
  }
  return lines.map((line) => JSON.stringify(line)).join('\n') + '\n';
}

function buildStore(dir) {
  const store = join(dir, 'store');
  run(store, 'import',
    join(real, 'incremental-simple/turn-2.jsonl'),
    join(real, 'incremental-subagents/turn-2.jsonl'),
    join(real, 'incremental-subagents/turn-2/subagents/agent-a485154.jsonl'),
    join(real, `small-with-subagents/${compacted}.jsonl`),
    join(real, 'small-with-subagents/agent-36541525.jsonl'),
    join(real, 'small-with-subagents/agent-50243ee8.jsonl'));
  run(store, 'compact', compacted);
  const prefs = join(dir, 'prefs.jsonl');
  writeFileSync(prefs, PREFS.map((line) => JSON.stringify(line)).join('\n') + '\n');
  run(store, 'import', prefs);
  run(store, 'memory', 'remember', 'prefs');
  const later = join(dir, 'later.jsonl');
  writeFileSync(later, LATER.map((line) => JSON.stringify(line)).join('\n') + '\n');
  run(store, 'import', later);
  if (largeEvents > 0) {
    const big = join(dir, 'big.jsonl');
    writeFileSync(big, largeSession(largeEvents));
    run(store, 'import', big);
  }
  return store;
}

/** Starts `mnemo ui`; resolves to {child, url}. */
async function startUi(store) {
  const child = spawn(mnemo, ['--store', store, '--json', 'ui', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  // `--json` prints one JSON document (over several lines): read lines until it parses.
  const lines = createInterface({ input: child.stdout });
  const printed = await new Promise((resolveDoc, reject) => {
    let text = '';
    lines.on('line', (line) => {
      text += line + '\n';
      try {
        resolveDoc(JSON.parse(text));
      } catch {
        // Not complete yet.
      }
    });
    child.once('exit', (code) => reject(new Error(`mnemo ui exited with ${code}`)));
  });
  return { child, url: printed.url };
}

/** Asks the store server `mnemo ui` started to shut down (it would otherwise wait out its idle period). */
function stopServer(store) {
  return new Promise((done) => {
    const socket = connect(join(store, 'server.sock'));
    let answers = 0;
    socket.on('data', (chunk) => {
      answers += chunk.toString().split('\n').filter(Boolean).length;
      if (answers === 1) socket.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'shutdown', params: {} }) + '\n');
      if (answers >= 2) socket.end();
    });
    socket.on('connect', () => socket.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol_version: 1 } }) + '\n'));
    socket.on('close', done);
    socket.on('error', done);
  });
}

async function shot(page, name) {
  await page.screenshot({ path: join(out, `${name}.png`), fullPage: false });
}

async function main() {
  mkdirSync(out, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'mnemo-ui-e2e-'));
  const store = buildStore(dir);
  const { child, url } = await startUi(store);
  const browser = await chromium.launch({
    executablePath: browserPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const failures = [];
  const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
  page.on('pageerror', (error) => failures.push(`page error: ${error.message}`));
  page.on('console', (message) => { if (message.type() === 'error') failures.push(`console: ${message.text()}`); });
  try {
    await steps(page, url);
    if (largeEvents > 0) await large(page, url);
    assert.deepEqual(failures, [], 'the page logged errors');
    console.log(`ok: all steps passed; screenshots in ${out}`);
  } catch (error) {
    await shot(page, 'failure').catch(() => {});
    throw error;
  } finally {
    await browser.close();
    child.kill();
    await stopServer(store);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function steps(page, url) {
  // Sessions, then a search by keyboard.
  await page.goto(url);
  await page.getByRole('heading', { name: 'Sessions', level: 1 }).waitFor();
  // Each imported session says which format it came from.
  await page.getByRole('cell', { name: 'claude-code', exact: true }).first().waitFor();
  assert.equal(await page.getByRole('heading', { name: 'Sessions', exact: true }).count(), 1, 'one Sessions heading');
  await shot(page, '01-sessions');
  await page.getByLabel('Search all sessions').fill('hello.py');
  await page.keyboard.press('Enter');
  const hits = page.locator('.hit');
  await hits.first().waitFor();
  assert.ok(await hits.count() > 0, 'search found something');
  const hit = hits.filter({ has: page.locator(`a[href*="${compacted}"]`) }).first();
  await hit.waitFor();
  assert.match(await hit.locator('.snippet').innerText(), /hello/i, 'the snippet shows the match');
  await shot(page, '02-search');
  await hit.locator('a.hit-title').click();

  // The session: its timeline with the checkpoint band, and the time-travel slider.
  await page.locator('.band-start').first().waitFor();
  const slider = page.getByLabel('Log position');
  await page.locator('#context-out[data-position]').waitFor();
  await shot(page, '03-timeline');
  await slider.focus();
  await page.keyboard.press('End');
  const checkpointPosition = Number(
    (await page.locator('.checkpoint-marker').first().getAttribute('id')).replace('pos-', ''));
  await page.locator(`#context-out[data-position="${checkpointPosition}"]`).waitFor();
  const atCheckpoint = await page.locator('#context-summary').innerText();
  assert.match(atCheckpoint, /stands on checkpoint/, 'at the checkpoint the context stands on it');
  assert.match(await page.locator('#context-checkpoint').innerText(), /hello\.py/, 'the summary is shown');
  await page.locator(`#recall-out[data-position="${checkpointPosition}"]`).waitFor();
  await shot(page, '04-context-after-checkpoint');

  await page.keyboard.press('ArrowLeft');
  await page.locator(`#context-out:not([data-position="${checkpointPosition}"])`).waitFor();
  await page.locator('#context-out[data-position]').waitFor();
  const before = await page.locator('#context-summary').innerText();
  assert.match(before, /no checkpoint/, 'one position earlier there was no checkpoint');
  assert.notEqual(before, atCheckpoint, 'the context changed across the checkpoint');
  assert.equal(await page.locator('#context-checkpoint').count(), 0);
  await shot(page, '05-context-before-checkpoint');

  await page.keyboard.press('ArrowRight');
  await page.locator(`#context-out[data-position="${checkpointPosition}"]`).waitFor();
  const diff = await page.locator('#context-diff').innerText();
  assert.match(diff, /\+ checkpoint:/, 'the diff shows the checkpoint arriving');
  assert.match(diff, /− event:/, 'and the folded events leaving');

  // The checkpoint panel: each claim linked to the events that support it.
  await page.locator('.band-start button').first().click();
  await page.locator('#checkpoint-h').waitFor();
  assert.match(await page.locator('.checkpoint').innerText(), /claims checked/);
  await page.locator('#claims-out:not([aria-busy])').waitFor();
  const claims = page.locator('.claims > li.claim');
  assert.ok(await claims.count() > 0, 'the claims are listed');
  const linked = page.locator('.claims > li.claim.supported a.claim-event').first();
  const claimText = await linked.locator('xpath=ancestor::li[1]/code').innerText();
  const claimPosition = await linked.getAttribute('data-position');
  await linked.click();
  const supporting = page.locator('.event.target');
  await supporting.waitFor();
  assert.equal(await supporting.getAttribute('data-position'), claimPosition, 'the claim link lands on its event');
  assert.match(await supporting.getAttribute('class'), /folded/, 'the supporting event is one the checkpoint folds');
  const envelope = await page.evaluate(async (position) => {
    const token = new URLSearchParams(window.location.search).get('token');
    return (await fetch(`/api/event?position=${position}`, { headers: { 'X-Mnemo-Token': token } })).json();
  }, claimPosition);
  assert.ok(JSON.stringify(envelope.record).includes(JSON.stringify(claimText).slice(1, -1)), `event ${claimPosition} states ${claimText}`);
  await shot(page, '06-checkpoint');

  // The session the fact was remembered from speaks of pnpm, but at its positions the fact did not
  // exist yet: nothing was pushed then (the memory as it stood, not as it stands).
  await page.goto(`${url.split('#')[0]}#/session/prefs`);
  await page.locator('#recall-out[data-position]').waitFor();
  assert.match(await page.locator('#recall-summary').innerText(), /No memory item/, 'no recall before the fact existed');
  // A session recorded after it was remembered: its time travel shows the fact pushed.
  await page.goto(`${url.split('#')[0]}#/session/later`);
  await page.locator('#recall-out[data-position]').waitFor();
  assert.match(await page.locator('#recall-summary').innerText(), /1 item/, 'the remembered fact is pushed');
  assert.match(await page.locator('.recall-item').first().innerText(), /pnpm/);
  await shot(page, '06b-pushed-recall');

  // Memory: open the item, follow its evidence link to the source turn.
  await page.getByRole('link', { name: 'Memory', exact: true }).click();
  const item = page.getByRole('link', { name: /pnpm/ });
  await item.click();
  await page.getByRole('heading', { name: 'Memory item' }).waitFor();
  await shot(page, '07-memory-item');
  const evidence = page.locator('a.evidence-link').first();
  const href = await evidence.getAttribute('href');
  const eventId = new URLSearchParams(href.split('?')[1]).get('event');
  await evidence.click();
  const target = page.locator('.event.target');
  await target.waitFor();
  assert.equal(await target.getAttribute('data-event'), eventId, 'the evidence link lands on its event');
  assert.match(await target.innerText(), /pnpm/);
  await shot(page, '08-evidence');

  // Store health, verify.
  await page.getByRole('link', { name: 'Store health' }).click();
  await page.getByRole('button', { name: 'Verify the store' }).click();
  await page.getByText(/^Passed:/).waitFor({ timeout: 120_000 });
  await shot(page, '09-health-verified');
}

async function large(page, url) {
  const base = url.split('#')[0];
  const began = Date.now();
  await page.goto(`${base}#/session/big`);
  await page.locator('.view[data-render-ms]').waitFor({ timeout: 600_000 });
  const opened = Date.now() - began;
  await page.locator('#context-out[data-position]').waitFor({ timeout: 600_000 });
  const withContext = Date.now() - began;
  await page.locator('.view[data-complete-ms]').waitFor({ timeout: 600_000 });
  const complete = Date.now() - began;
  const events = await page.locator('.timeline > li.event[data-event]').count();
  assert.equal(events, largeEvents, 'every event is on the timeline');
  assert.equal(await page.locator('.event.is-error').count(), largeEvents / 40, 'errors highlighted');
  await shot(page, '10-large-session');
  console.log(`large session: ${largeEvents} events opened in ${opened} ms (first screen of the timeline shown), ` +
    `${withContext} ms with the context at the head, ${complete} ms with every row`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
