// `mnemo mcp` end to end, driven by the official MCP TypeScript SDK's client over stdio.
//
// Run by `crates/mnemo-cli/tests/mcp_client.rs` (which passes the binary as MNEMO_BIN); on its own:
//   MNEMO_BIN=target/debug/mnemo node --test tests/mcp-client/
//
// A store is built from the real Claude Code sessions under tests/fixtures/real/; two MCP servers
// run on it at once (each starts or reaches the one store server); the client lists the tools,
// compiles their input schemas, searches inside its workspace (given as a root), reads around a hit,
// remembers and recalls; an older protocol version is negotiated by hand.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import Ajv2020 from 'ajv/dist/2020.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../..');
const fixtures = resolve(repo, 'tests/fixtures/real/claude-code');
const mnemo = process.env.MNEMO_BIN;
assert.ok(mnemo && existsSync(mnemo), 'MNEMO_BIN must name the built mnemo binary');

// The workspace the codemie-code sessions were recorded in (their `cwd`).
const CODEMIE = '/Users/User/repo/codemie-ai/codemie-code';
const TOOLS = [
  'list_sessions',
  'read_history',
  'recall_memory',
  'remember',
  'search_history',
  'session_context',
  'why_memory',
];

const dir = mkdtempSync(join(tmpdir(), 'mnemo-mcp-'));
const store = join(dir, 'store');
execFileSync(mnemo, [
  '--store', store, 'import',
  join(fixtures, 'incremental-simple/turn-2.jsonl'),
  join(fixtures, 'small-with-subagents/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl'),
], { stdio: ['ignore', 'ignore', 'inherit'] });

async function connect(name, roots) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: roots ? { roots: {} } : {} });
  if (roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: roots.map((uri) => ({ uri })) }));
  }
  const transport = new StdioClientTransport({
    command: mnemo,
    args: ['--store', store, 'mcp'],
    cwd: dir,
    stderr: 'inherit',
  });
  await client.connect(transport);
  return client;
}

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, `${name} failed: ${text(result)}`);
  return result;
}

// Stops the store server the MCP servers started: its socket speaks the host protocol.
function shutdownStoreServer() {
  return new Promise((resolvePromise) => {
    const socket = net.createConnection(join(store, 'server.sock'));
    socket.on('error', () => resolvePromise());
    socket.on('connect', () => {
      socket.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol_version: 1 } }) + '\n');
      socket.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'shutdown' }) + '\n');
    });
    let seen = '';
    socket.on('data', (chunk) => {
      seen += chunk;
      if (seen.split('\n').filter(Boolean).length >= 2) socket.end();
    });
    socket.on('close', () => resolvePromise());
  });
}

const clients = [];
after(async () => {
  for (const client of clients) await client.close();
  await shutdownStoreServer();
  rmSync(dir, { recursive: true, force: true });
});

test('the tools are listed with input schemas that compile', async () => {
  const client = await connect('lister', [`file://${CODEMIE}`]);
  clients.push(client);
  assert.equal(client.getServerVersion().name, 'mnemo');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  const ajv = new Ajv2020({ strict: false });
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    assert.ok(tool.description.length > 80, `${tool.name} has a description for a model`);
    const validate = ajv.compile(tool.inputSchema);
    assert.equal(validate({ no_such_argument: 1 }), false, `${tool.name} refuses unknown arguments`);
  }
  const search = tools.find((t) => t.name === 'search_history');
  assert.deepEqual(search.inputSchema.required, ['query']);
  assert.ok(ajv.compile(search.inputSchema)({ query: 'tools', limit: 3 }));
});

test('search inside the workspace, read around a hit, remember and recall', async () => {
  const client = await connect('agent-one', [`file://${CODEMIE}`]);
  clients.push(client);

  const found = await call(client, 'search_history', { query: 'glob patterns', limit: 3 });
  const rows = found.structuredContent.rows;
  assert.ok(rows.length > 0, text(found));
  const hit = rows[0];
  assert.ok(hit.message_id, 'a message match');
  assert.match(text(found), /session_id=3fb74381/);

  // The other workspace's session is not searched from this workspace, and is with all_workspaces.
  const scoped = await call(client, 'search_history', { query: 'hello.py' });
  assert.ok(scoped.structuredContent.rows.every((r) => !r.session_id.startsWith('4c2ddfdc')), text(scoped));
  const everywhere = await call(client, 'search_history', { query: 'hello.py', all_workspaces: true });
  assert.ok(everywhere.structuredContent.rows.some((r) => r.session_id.startsWith('4c2ddfdc')), text(everywhere));
  // Nothing found in the workspace: the answer says where it looked and how to look further.
  const nowhere = await call(client, 'search_history', { query: 'zqxjv' });
  assert.equal(nowhere.structuredContent.rows.length, 0, text(nowhere));
  assert.match(text(nowhere), new RegExp(`in this workspace \\(${CODEMIE}\\) matches`), text(nowhere));
  assert.match(text(nowhere), /all_workspaces=true/, text(nowhere));
  const nowhereAtAll = await call(client, 'search_history', { query: 'zqxjv', all_workspaces: true });
  assert.equal(text(nowhereAtAll), 'No past conversation matches "zqxjv".');

  const read = await call(client, 'read_history', { session_id: hit.session_id, message_id: hit.message_id, before: 1, after: 1 });
  assert.equal(read.structuredContent.anchor_message_id, hit.message_id);
  const messages = read.structuredContent.turns.flatMap((t) => t.messages);
  assert.ok(messages.some((m) => m.message_id === hit.message_id));
  assert.match(text(read), /<</, 'the anchor is marked');

  const sessions = await call(client, 'list_sessions', {});
  assert.ok(sessions.structuredContent.sessions.some((s) => s.session === hit.session_id), text(sessions));
  assert.ok(sessions.structuredContent.sessions.every((s) => s.workspace === CODEMIE), text(sessions));
  // Each session names the format it came from, in the rows and in the text.
  assert.ok(sessions.structuredContent.sessions.every((s) => s.source === 'claude-code'), text(sessions));
  assert.match(text(sessions), /\(claude-code, \d+ turns, \d+ events\)/);

  const context = await call(client, 'session_context', { session_id: hit.session_id });
  assert.match(text(context), /\[user\] show tools/);
  const early = await call(client, 'session_context', { session_id: hit.session_id, as_of_position: 2 });
  assert.ok(early.structuredContent.items < context.structuredContent.items, 'time travel shows fewer items');

  // One client keeps one server for its whole session: ten different facts, ten answers, each
  // naming every item it stored.
  const facts = [
    'our release branch is called trunk-stable',
    'our staging database is called ledger-staging',
    'deploys go out on Tuesdays only',
    'the CI runner image is named forge-ubuntu-24',
    'feature flags live in config/flags.yaml',
    'the billing service listens on port 8443',
    'the design system package is called atlas-ui',
    'production logs are kept for 30 days',
    'the on-call rotation changes every Monday',
    'database migrations are reviewed by the data team',
  ];
  const answered = [];
  for (const fact of facts) {
    const again = await call(client, 'remember', { request: `Please remember that ${fact}.` });
    assert.equal(again.structuredContent.status, 'remembered', text(again));
    const items = again.structuredContent.items;
    assert.ok(items.some((i) => i.requested), text(again));
    for (const item of items) {
      assert.ok(text(again).includes(item.content), `the answer names ${item.content}: ${text(again)}`);
    }
    answered.push(...items);
  }
  assert.ok(answered.some((i) => i.content.includes('trunk-stable')), JSON.stringify(answered));

  // Two instructions in one request: each is its own item, and the answer names both with where
  // they hold.
  const rules = await call(client, 'remember', { request: 'Remember: never force-push to main; always open a PR' });
  assert.deepEqual(
    rules.structuredContent.items.map((i) => [i.content, i.kind, i.scope, i.requested]),
    [
      ['Never force-push to main.', 'preference', `workspace:${CODEMIE}`, true],
      ['Always open a PR.', 'preference', `workspace:${CODEMIE}`, true],
    ],
    text(rules),
  );
  assert.equal(
    text(rules),
    `Remembered 2 items:\n- Never force-push to main. (preference, workspace ${CODEMIE})\n- Always open a PR. (preference, workspace ${CODEMIE})`,
  );

  // The store holds exactly the items the answers named: read by the CLI, which runs through the
  // store server this MCP server started.
  answered.push(...rules.structuredContent.items);
  const named = new Map();
  for (const item of answered) {
    if (item.outcome === 'archived') named.delete(item.item);
    else named.set(item.item, item.content);
  }
  const listed = JSON.parse(execFileSync(mnemo, ['--store', store, '--json', 'memory', 'list'], { encoding: 'utf8' }));
  assert.deepEqual(
    listed.map((i) => [i.item, i.fields.content]).sort(),
    [...named.entries()].sort(),
    'the items in the store are the ones the answers named',
  );

  const recalled = await call(client, 'recall_memory', { query: 'release branch' });
  assert.ok(recalled.structuredContent.items.some((i) => i.content.includes('trunk-stable')), text(recalled));
  const kept = recalled.structuredContent.items.find((i) => i.content.includes('trunk-stable'));
  const why = await call(client, 'why_memory', { item: kept.item });
  assert.ok(why.structuredContent.evidence.some((e) => e.text.includes('trunk-stable')), text(why));
  assert.match(text(why), /log position \d+, hash [0-9a-f]{64}/);
  // The session that holds the remember requests' evidence relays them; it is no conversation.
  const after = await call(client, 'list_sessions', { all_workspaces: true });
  assert.ok(after.structuredContent.sessions.every((s) => !s.session.startsWith('mcp-')), text(after));

  const refused = await client.callTool({ name: 'search_history', arguments: { query: 'x', limit: 99 } });
  assert.equal(refused.isError, true);
  const unknown = await client.callTool({ name: 'search_history', arguments: { query: 'x', colour: 'red' } });
  assert.equal(unknown.isError, true);
  assert.match(text(unknown), /unknown field `colour`/);
});

test('two MCP servers on one store answer at once', async () => {
  const [one, two] = await Promise.all([
    connect('agent-a', [`file://${CODEMIE}`]),
    connect('agent-b', [`file://${CODEMIE}`]),
  ]);
  clients.push(one, two);
  const [a, b] = await Promise.all([
    call(one, 'search_history', { query: 'tools' }),
    call(two, 'search_history', { query: 'tools' }),
  ]);
  assert.ok(a.structuredContent.rows.length > 0);
  assert.deepEqual(a.structuredContent.rows, b.structuredContent.rows);
  // What one remembered (in the test above, through a third process) the others recall.
  const recalled = await call(two, 'recall_memory', { query: 'release branch' });
  assert.ok(recalled.structuredContent.items.some((i) => i.content.includes('trunk-stable')), text(recalled));
});

test('the newest protocol version with a handshake and the one before it are both negotiated', async () => {
  assert.equal(LATEST_PROTOCOL_VERSION, '2025-11-25');
  const latest = await connect('latest', null);
  clients.push(latest);
  assert.ok((await latest.listTools()).tools.length === TOOLS.length);

  // The SDK always offers its newest version, so the previous one is spoken by hand.
  const child = spawn(mnemo, ['--store', store, 'mcp'], { cwd: dir, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  let buffer = '';
  const waiting = [];
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffer.slice(0, newline)));
      buffer = buffer.slice(newline + 1);
      while (waiting.length && lines.length) waiting.shift()(lines.shift());
    }
  });
  const next = () => new Promise((r) => (lines.length ? r(lines.shift()) : waiting.push(r)));
  const send = (message) => child.stdin.write(JSON.stringify(message) + '\n');
  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '0' } } });
  const init = await next();
  assert.equal(init.result.protocolVersion, '2025-06-18', JSON.stringify(init));
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'search_history', arguments: { query: 'tools', all_workspaces: true } } });
  const searched = await next();
  assert.equal(searched.result.isError, false, JSON.stringify(searched));
  assert.ok(searched.result.structuredContent.rows.length > 0);
  child.stdin.end();
  await new Promise((r) => child.on('exit', r));
});
