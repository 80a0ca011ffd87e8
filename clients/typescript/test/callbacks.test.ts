// The connection's own behaviour against a scripted server on the store's socket: requests the
// server sends back during a call (the model seams) are answered by the registered handler, an
// unhandled one is answered `method_not_found`, a failing handler is answered `internal`, and an
// answer that does not have the protocol's shape is refused.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { Client, ProtocolError, type Json } from "../src/index.js";

type Frame = { id?: number | string | null; method?: string; params?: Json; result?: Json; error?: Json };

/** A server that answers `initialize`, then runs `script` for every other request. */
async function scripted(
  script: (request: Frame, send: (frame: object) => void, next: () => Promise<Frame>) => Promise<void>,
): Promise<{ store: string; close: () => void }> {
  const base = mkdtempSync(join(tmpdir(), "mnemo-ts-fake-"));
  const store = join(base, "store");
  mkdirSync(store);
  const server: Server = createServer((socket: Socket) => {
    let buffer = "";
    const queue: Frame[] = [];
    const waiters: Array<(frame: Frame) => void> = [];
    const send = (frame: object) => socket.write(JSON.stringify({ jsonrpc: "2.0", ...frame }) + "\n");
    const next = () =>
      new Promise<Frame>((resolveFrame) => {
        const frame = queue.shift();
        if (frame) resolveFrame(frame);
        else waiters.push(resolveFrame);
      });
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      let newline: number;
      while ((newline = buffer.indexOf("\n")) !== -1) {
        const frame = JSON.parse(buffer.slice(0, newline)) as Frame;
        buffer = buffer.slice(newline + 1);
        const waiter = waiters.shift();
        if (waiter) waiter(frame);
        else queue.push(frame);
      }
    });
    void (async () => {
      const hello = await next();
      assert.equal(hello.method, "initialize");
      send({
        id: hello.id,
        result: {
          protocol_version: 1,
          server_name: "mnemo",
          server_version: "0",
          store,
          pid: 1,
          methods: [],
          limits: { frame_bytes_max: 1 << 20, connection_calls_max: 8, calls_admitted_max: 8, connections_max: 1, idle_exit_secs: 0 },
        },
      });
      for (;;) await script(await next(), send, next);
    })().catch(() => socket.destroy());
  });
  await new Promise<void>((listening) => server.listen(join(store, "server.sock"), listening));
  return {
    store,
    close: () => {
      server.close();
      rmSync(base, { recursive: true, force: true });
    },
  };
}

test("a request the server sends during a call is answered by the client's handler", async () => {
  const fake = await scripted(async (request, send, next) => {
    // The server calls back twice (a handled seam and an unhandled one) before answering the call.
    send({ id: "cb-1", method: "summarizer/summarize", params: { turns: ["a", "b"] } });
    const summary = await next();
    send({ id: "cb-2", method: "nobody/handles", params: {} });
    const unhandled = await next();
    send({ id: "cb-3", method: "summarizer/fails", params: {} });
    const failed = await next();
    send({ id: request.id, result: { summary, unhandled, failed } });
  });
  const client = await Client.connect(fake.store);
  try {
    client.handle("summarizer/summarize", async (params) => {
      const turns = (params as { turns: string[] }).turns;
      return { text: `summary of ${turns.join("+")}` };
    });
    client.handle("summarizer/fails", () => {
      throw new Error("the model is away");
    });
    const answer = (await client.callRaw("compaction/compact", { session: "s" })) as Record<string, Frame>;
    assert.deepEqual(answer.summary, { jsonrpc: "2.0", id: "cb-1", result: { text: "summary of a+b" } });
    assert.equal(answer.unhandled!.id, "cb-2");
    assert.equal((answer.unhandled!.error as { data: { reason: string } }).data.reason, "method_not_found");
    assert.equal((answer.failed!.error as { code: number }).code, -32603);
    assert.match((answer.failed!.error as { message: string }).message, /the model is away/);
  } finally {
    client.close();
    fake.close();
  }
});

test("notifications reach their listeners and are not answered", async () => {
  const fake = await scripted(async (request, send) => {
    send({ method: "log/appended", params: { position: 7 } });
    send({ id: request.id, result: {} });
  });
  const client = await Client.connect(fake.store);
  try {
    const seen: Json[] = [];
    const stop = client.onNotification("log/appended", (params) => seen.push(params));
    await client.ping();
    assert.deepEqual(seen, [{ position: 7 }]);
    stop();
  } finally {
    client.close();
    fake.close();
  }
});

test("an answer without a required member, or with a wrong type, is refused as a protocol error naming it", async () => {
  const answers = [
    { first_position: 1, last_position: 2 },
    { first_position: 1, last_position: "2", last_revision: 0 },
  ];
  const fake = await scripted(async (request, send) => {
    send({ id: request.id, result: answers.shift() ?? {} });
  });
  const client = await Client.connect(fake.store);
  try {
    await assert.rejects(
      client.append("session/s", [], "any"),
      (error: unknown) => error instanceof ProtocolError && /^append: result: the member last_revision is missing$/.test(error.message),
    );
    await assert.rejects(
      client.append("session/s", [], "any"),
      (error: unknown) => error instanceof ProtocolError && /^append: result\.last_position: expected integer, got a string$/.test(error.message),
    );
  } finally {
    client.close();
    fake.close();
  }
});
