// The client against a real `mnemo serve` (MNEMO_BIN): the handshake and autostart, the methods on a
// store imported from a real Claude Code session, appends at an expected revision, remember and
// recall, the server's typed errors, pipelined calls, racing starts and reconnecting.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import {
  Client,
  ConnectionLost,
  MnemoError,
  NoServer,
  PROTOCOL_VERSION,
  StartFailed,
  type JsonObject,
  type WireRecord,
} from "../src/index.js";
import { PACKAGE_DIR, REAL_FIXTURES, TEST_IDLE_EXIT, freshStore, mnemoBin, started } from "./support.js";

const CLAUDE_SESSION = join(
  REAL_FIXTURES,
  "claude-code",
  "small-with-subagents",
  "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
);

const REMEMBER_TRANSCRIPT = [
  '{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}',
  '{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"Our project uses fjall for storage."}]}',
  '{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Remember that I never use unwrap in library code, in any project."}]}',
  "",
].join("\n");

function sessionOpened(session: string): WireRecord {
  return {
    kind: "session_opened",
    record: { session, workspace: "ts/ws", incognito: false, memory: "enabled", subagent: false },
  };
}

async function rejects<T>(promise: Promise<T>): Promise<MnemoError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof MnemoError, `expected a MnemoError, got ${String(error)}`);
    return error;
  }
  assert.fail("the call succeeded");
}

test("the handshake states the version and a second client reaches the same server", async () => {
  const { client, store, done } = await started();
  try {
    const server = client.server;
    assert.equal(server.protocol_version, PROTOCOL_VERSION);
    assert.equal(server.server_name, "mnemo");
    assert.equal(realpathSync(server.store), realpathSync(store));
    for (const method of ["append", "history/search", "history/read", "history/sessions", "memory/recall", "memory/remember"]) {
      assert.ok(server.methods.includes(method), method);
    }
    assert.equal(server.limits.frame_bytes_max, 8 * 1024 * 1024);
    await client.ping();
    const second = await Client.connect(store, { mnemoBin: mnemoBin() });
    try {
      assert.equal(second.server.pid, server.pid);
    } finally {
      second.close();
    }
  } finally {
    await done();
  }
});

test("without a binary a store without a server is reported", async () => {
  const { store, cleanup } = freshStore();
  try {
    await assert.rejects(Client.connect(store), (error: unknown) => error instanceof NoServer && /no server answers/.test(error.message));
  } finally {
    await cleanup();
  }
});

test("a real session is listed, searched and read", async () => {
  assert.ok(existsSync(CLAUDE_SESSION), `the real fixture ${CLAUDE_SESSION} is missing: the repository must sit beside shared/`);
  const { client, done } = await started();
  try {
    const report = await client.importTranscript({ path: CLAUDE_SESSION, format: "claude-code" });
    assert.ok((report.records as number) > 0);
    assert.equal((await client.importTranscript({ path: CLAUDE_SESSION })).status, "already_complete");
    // A relative path is this process's: the client sends it absolute.
    const relativePath = relative(process.cwd(), CLAUDE_SESSION);
    assert.equal((await client.importTranscript({ path: relativePath })).status, "already_complete");

    const sessions = await client.sessions();
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0]!.workspace, "/tmp/private");
    assert.ok(sessions[0]!.turn_count > 0);
    assert.equal(sessions[0]!.source, "claude-code");
    assert.equal(sessions[0]!.parent, undefined);

    const found = await client.search("hello.py", { limit: 3 });
    assert.ok(found.rows.length > 0 && found.rows.length <= 3, "no match for hello.py");
    const hit = found.rows[0]!;
    assert.equal(hit.session_id, sessions[0]!.session);

    const read = await client.read(hit.session_id, { message_id: hit.message_id, before: 1, after: 1 });
    assert.equal(read.anchor_message_id, hit.message_id);
    assert.equal(read.anchor_turn_id, hit.turn_id);
    assert.ok(read.turns.some((turn) => turn.turn_id === hit.turn_id));

    // As of position 1 nothing of the session was searchable yet.
    assert.deepEqual((await client.search("hello.py", { as_of: 1 })).rows, []);

    const refused = await rejects(client.search("hello.py", { context: { incognito: true } }));
    assert.equal(refused.reason, "tool_refused");
    assert.equal(refused.toolReason, "incognito_active");

    const context = await client.context(hit.session_id, { window: 8000 });
    assert.ok(Array.isArray(context.items) && context.items.length > 0, "compaction/context assembles items");
  } finally {
    await done();
  }
});

test("append at an expected revision; a conflict appends nothing", async () => {
  const { client, done } = await started();
  try {
    const first = await client.append("session/ts1", [sessionOpened("ts1")], "no_stream");
    assert.equal(first.first_position, first.last_position);
    assert.equal(first.last_revision, 0);
    const entries = (await client.log({ limit: 1000 })).length;
    assert.equal((await client.logHead()).position, first.last_position, "log/head is the last append's position");
    assert.deepEqual(
      (await client.sessions()).map((s) => [s.session, s.workspace]),
      [["ts1", "ts/ws"]],
    );

    const conflict = await rejects(client.append("session/ts1", [sessionOpened("ts1")], "no_stream"));
    assert.equal(conflict.reason, "conflict");
    assert.equal(conflict.code, -32002);
    assert.equal(conflict.expected, "no_stream");
    assert.equal(conflict.actual, "0");
    const stale = await rejects(client.append("session/ts1", [sessionOpened("ts1")], 5));
    assert.deepEqual([stale.reason, stale.expected, stale.actual], ["conflict", "5", "0"]);
    assert.equal((await client.log({ limit: 1000 })).length, entries, "a refused append left envelopes");

    const next = await client.append("session/ts1", [sessionOpened("ts1")], 0);
    assert.equal(next.last_revision, 1);
    const buffered = await client.append("session/ts1", [sessionOpened("ts1")], 1, "buffered");
    assert.equal(buffered.last_revision, 2);
    const wrongDurability = await rejects(client.append("session/ts1", [sessionOpened("ts1")], 2, "eventually" as "buffered"));
    assert.equal(wrongDurability.reason, "invalid_params");
    await assert.rejects(client.append("session/ts1", [], -1), RangeError);
  } finally {
    await done();
  }
});

test("remember, then recall", async () => {
  const { client, done } = await started();
  try {
    await client.importTranscript({ text: REMEMBER_TRANSCRIPT, source: "remember.jsonl" });
    const remembered = await client.remember("s1");
    assert.equal(remembered.status, "remembered");
    assert.deepEqual(
      remembered.items.filter((item) => item.requested).map((item) => item.content),
      ["The user never uses unwrap in library code, in any project."],
    );
    const item = remembered.items[0]!.item;
    const recalled = await client.recall("s1", "unwrap");
    const match = recalled.find((r) => r.item === item);
    assert.ok(match, "the remembered item is recalled");
    assert.equal(match.content, "The user never uses unwrap in library code, in any project.");
    assert.deepEqual(match.sources.map((s) => s.session), ["s1"]);
    assert.equal((await client.remember("s1")).items[0]!.item, item, "remember is repeatable");
    const got = await client.memoryGet(item);
    assert.ok(got !== null);
  } finally {
    await done();
  }
});

test("the recall block as of a position before a fact was remembered lacks it", async () => {
  const { client, done } = await started();
  try {
    await client.importTranscript({ text: REMEMBER_TRANSCRIPT, source: "remember.jsonl" });
    const head = async () => (await client.stats()).head as number;
    const before = await head();
    const item = (await client.remember("s1")).items[0]!.item;
    const after = await head();
    assert.ok(after > before);
    type Block = { items: { item: string }[]; text: string; tokens: number };
    const items = (block: JsonObject) => (block as unknown as Block).items.map((i) => i.item);

    const now = await client.recallBlock("s1", { query: "unwrap" });
    assert.ok(items(now).includes(item));
    assert.match(now.text as string, /never uses unwrap in library code/);
    assert.ok((now.tokens as number) > 0);
    assert.deepEqual(await client.recallBlock("s1", { query: "unwrap", as_of: after }), now);
    const then = await client.recallBlock("s1", { query: "unwrap", as_of: before });
    assert.ok(!items(then).includes(item));
    assert.doesNotMatch(then.text as string, /unwrap/);
    // Without a query the session's own turns up to the position select the items.
    assert.ok(items(await client.recallBlock("s1", { as_of: after })).includes(item));
    assert.ok(!items(await client.recallBlock("s1", { as_of: before })).includes(item));

    const beyond = await rejects(client.recallBlock("s1", { as_of: after + 100 }));
    assert.equal(beyond.reason, "invalid_input");
    assert.match(beyond.message, new RegExp(String(after + 100)));
  } finally {
    await done();
  }
});

test("capture a session file, and the start block of a session the store does not hold", async () => {
  const { client, done } = await started();
  try {
    type Report = { report: { format: string; records: number; status: string } };
    const first = (await client.capture(CLAUDE_SESSION)) as unknown as Report;
    assert.equal(first.report.format, "claude-code");
    assert.ok(first.report.records > 0);
    const again = (await client.capture(CLAUDE_SESSION, { format: "claude-code" })) as unknown as Report;
    assert.deepEqual([again.report.status, again.report.records], ["already_complete", 0]);
    const missing = await rejects(client.capture(join(REAL_FIXTURES, "none.jsonl")));
    assert.equal(missing.reason, "invalid_input");
    assert.match(missing.message, /none\.jsonl/);

    await client.importTranscript({ text: REMEMBER_TRANSCRIPT, source: "remember.jsonl" });
    assert.equal((await client.memoryCursor("s1")).cursor, 0, "nothing of s1 evaluated yet");
    const item = (await client.remember("s1")).items[0]!.item;
    // Remembering evaluated the session's two messages.
    assert.equal((await client.memoryCursor("s1")).cursor, 2);
    // A new session of the workspace: the standing fact the user asked to remember is pushed.
    const fresh = await client.startBlock({ session: "s-new", workspace: "acme/api" });
    assert.equal(fresh.items[0]!.item, item);
    assert.ok(fresh.standing >= 1 && fresh.tokens > 0);
    assert.match(fresh.text, /never uses unwrap in library code/);
    // Another workspace's session never gets acme/api's items, whatever it asks.
    const other = await client.startBlock({ workspace: "other/ws", query: "fjall storage" });
    assert.ok(other.items.length > 0);
    assert.ok(other.items.every((i) => i.scope !== "workspace:acme/api"), JSON.stringify(other.items));
    const budget = await rejects(client.startBlock({ workspace: "acme/api", budget_tokens: 0 }));
    assert.equal(budget.reason, "invalid_input");
    assert.match(budget.message, /budget_tokens/);
  } finally {
    await done();
  }
});

test("bad calls get typed errors and the connection keeps serving", async () => {
  const { client, done } = await started();
  try {
    const unknown = await rejects(client.callRaw("history/nothing"));
    assert.deepEqual([unknown.reason, unknown.code], ["method_not_found", -32601]);

    const misspelt = await rejects(client.callRaw("history/search", { query: "x", limmit: 2 }));
    assert.equal(misspelt.reason, "invalid_params");
    assert.match(misspelt.serverMessage, /limmit/);

    const wrongType = await rejects(client.callRaw("history/search", { query: 5 }));
    assert.equal(wrongType.reason, "invalid_params");

    const tooMany = await rejects(client.search("x", { limit: 99 }));
    assert.equal(tooMany.reason, "tool_refused");
    assert.equal(tooMany.toolReason, "invalid_arguments");

    // A frame over the server's limit is refused before it is sent, with the protocol's reason.
    const big = await rejects(client.importTranscript({ text: "x".repeat(client.server.limits.frame_bytes_max + 1) }));
    assert.equal(big.reason, "frame_too_large");
    assert.equal(big.limit, client.server.limits.frame_bytes_max);

    await client.ping();
    assert.deepEqual(await client.sessions(), []);
  } finally {
    await done();
  }
});

test("pipelined calls on one connection are each answered with their own result", async () => {
  const { client, done } = await started();
  try {
    const appends = await Promise.all(
      Array.from({ length: 40 }, (_, i) => client.append(`session/p${i}`, [sessionOpened(`p${i}`)], "no_stream")),
    );
    assert.deepEqual(
      appends.map((a) => a.last_revision),
      Array.from({ length: 40 }, () => 0),
    );
    assert.equal(new Set(appends.map((a) => a.first_position)).size, 40);
    const reads = await Promise.all(Array.from({ length: 40 }, (_, i) => client.transcript(`p${i}`)));
    assert.equal(reads.filter((t) => t !== null).length, 40);
    assert.equal((await client.sessions()).length, 40);
  } finally {
    await done();
  }
});

test("clients racing to start a server share the one that won", async () => {
  const { store, cleanup } = freshStore();
  try {
    const clients = await Promise.all(
      Array.from({ length: 8 }, () => Client.connect(store, { mnemoBin: mnemoBin(), serveArgs: TEST_IDLE_EXIT })),
    );
    const pids = new Set(clients.map((c) => c.server.pid));
    for (const c of clients) c.close();
    assert.equal(pids.size, 1, `more than one server answered: ${[...pids].join(", ")}`);
  } finally {
    await cleanup();
  }
});

test("after the server shuts down, the next call reconnects to a new server on the same store", async () => {
  const { client, store, done } = await started();
  try {
    await client.importTranscript({ text: REMEMBER_TRANSCRIPT, source: "remember.jsonl" });
    const firstPid = client.server.pid;
    await client.shutdown();
    // The same client: its connection is gone, so the repeatable call starts a server and is sent again.
    assert.deepEqual((await client.sessions()).map((s) => s.session), ["s1"]);
    assert.notEqual(client.server.pid, firstPid);
    // A non-repeatable call goes through on the live connection.
    await client.append("session/after", [sessionOpened("after")], "no_stream");
    const other = await Client.connect(store);
    try {
      assert.equal(other.server.pid, client.server.pid);
    } finally {
      other.close();
    }
  } finally {
    await done();
  }
});

test("a closed client refuses further calls", async () => {
  const { client, done } = await started();
  try {
    client.close();
    await assert.rejects(client.ping(), ConnectionLost);
  } finally {
    await done();
  }
});

test("a binary that cannot start is reported as StartFailed saying why", async () => {
  const { store, cleanup } = freshStore();
  try {
    await assert.rejects(
      Client.connect(store, { mnemoBin: "/nonexistent/mnemo", startWaitMs: 1000 }),
      (error: unknown) => error instanceof StartFailed && /ENOENT/.test(error.message),
    );
    await assert.rejects(
      Client.spawn(store, { mnemoBin: "/nonexistent/mnemo" }),
      (error: unknown) => error instanceof StartFailed && /ENOENT/.test(error.message),
    );
  } finally {
    await cleanup();
  }
});

test("the README's example runs as written against a real server and shows the conflict it catches", async () => {
  const readme = readFileSync(join(PACKAGE_DIR, "README.md"), "utf8");
  const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(example, "the README has no ts example");
  // The example has no type annotation: it runs as JavaScript once its placeholders are filled.
  const { store, cleanup } = freshStore();
  const filled = [
    ['from "mnemo-client"', `from ${JSON.stringify(join(PACKAGE_DIR, "dist", "src", "index.js"))}`],
    ['"/path/to/store"', JSON.stringify(store)],
    ['mnemoBin: "mnemo"', `mnemoBin: ${JSON.stringify(mnemoBin())}`],
    ['"session.jsonl"', JSON.stringify(CLAUDE_SESSION)],
  ].reduce((code, [placeholder, value]) => {
    assert.ok(code.includes(placeholder!), `the example has no ${placeholder}`);
    return code.replace(placeholder!, value!);
  }, example);
  const script = join(dirname(store), "readme.mjs");
  writeFileSync(script, filled);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [script]);
    const [version, conflict, ...rest] = stdout.trim().split("\n");
    assert.match(version!, /^\d+\.\d+\.\d+\S* \d+$/, stdout);
    assert.equal(conflict, "no_stream 0", `the second append is the conflict the example catches: ${stdout}`);
    assert.deepEqual(rest, []);
  } finally {
    await cleanup();
  }
});
