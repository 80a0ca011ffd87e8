// Against a real `mnemo serve`: a server spawned on standard input and output, the model seams
// answered by this client while the server compacts, and the tail subscription, which resumes
// without gap or repeat on a new connection.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, MnemoError, StartFailed, records, type JsonObject, type SummarizeParams } from "../src/index.js";
import { freshStore, mnemoBin, started } from "./support.js";

const SESSION = "seams";
const START_MS = 1_767_225_600_000;

/** Appends `turns` long turns to SESSION (opened first): enough history to fold at a small window. */
async function conversation(client: Client, turns: number): Promise<void> {
  let revision = (await client.append(`session/${SESSION}`, [records.sessionOpened(SESSION, { workspace: "ts/seams" })], "no_stream"))
    .last_revision;
  for (let n = 1; n <= turns; n++) {
    const turn = `t${n}`;
    const ts = START_MS + n * 10_000;
    const ask = `Question ${n}: how should the ledger handle case ${n}? `.repeat(20);
    const answer = `Answer ${n}: the ledger appends, then folds, then verifies case ${n}. `.repeat(30);
    revision = (
      await client.append(
        `session/${SESSION}`,
        [
          records.textMessage(SESSION, turn, `${turn}-u`, "user", ask, ts),
          records.textMessage(SESSION, turn, `${turn}-a`, "assistant", answer, ts + 1),
          records.turnEnded(SESSION, turn),
        ],
        revision,
      )
    ).last_revision;
  }
}

function summary(request: SummarizeParams): string {
  return (
    "## Goal\nKeep the ledger correct.\n\n## Progress\n### Done\n" +
    `Folded ${request.messages.length} messages.\n\n### In Progress\nThe next case.\n\n` +
    "## Next Steps\n1. Continue.\n\n## Critical Context\nFrom the seams test's summarizer.\n"
  );
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

test("a spawned server serves this client on stdio, and closing it releases the store", async () => {
  const { store, cleanup } = freshStore();
  try {
    const client = await Client.spawn(store, { mnemoBin: mnemoBin() });
    assert.equal(client.server.server_name, "mnemo");
    await client.append("session/stdio", [records.sessionOpened("stdio")], "no_stream");
    await client.close();
    await assert.rejects(client.ping(), /closed/);
    // The first server closed the store before close resolved: a second one opens it at once.
    const again = await Client.spawn(store, { mnemoBin: mnemoBin() });
    try {
      assert.deepEqual((await again.sessions()).map((s) => s.session), ["stdio"]);
    } finally {
      await again.close();
    }
  } finally {
    await cleanup();
  }
});

test("spawning on a store another server owns fails with the server's own message", async () => {
  const { client, store, done } = await started();
  try {
    await assert.rejects(
      Client.spawn(store, { mnemoBin: mnemoBin() }),
      (error: unknown) => error instanceof StartFailed && /lock/i.test(error.message),
    );
    await client.ping();
  } finally {
    await done();
  }
});

test("the server summarizes through this client's summarizer, and a failing one is reported, not fatal", async () => {
  const { client, done } = await started();
  try {
    await conversation(client, 8);
    // A summarizer that fails: the compaction fails open and says why.
    await client.registerSeams({
      summarizer: { name: "ts-broken", promptVersion: "t.1", limitsInput: false, summarize: () => Promise.reject(new Error("model away")) },
    });
    const failed = await client.compact(SESSION, { window: 2000 });
    assert.equal(failed.seam_failures.length, 1, JSON.stringify(failed.seam_failures));
    assert.equal(failed.seam_failures[0]!.seam, "seam/summarize");
    assert.equal(failed.seam_failures[0]!.reason, "client_error");
    assert.match(failed.seam_failures[0]!.message, /model away/);

    const seen: SummarizeParams[] = [];
    const registered = await client.registerSeams({
      summarizer: { name: "ts-test-summarizer", promptVersion: "t.1", limitsInput: false, summarize: (r) => (seen.push(r), summary(r)) },
      timeoutMs: 10_000,
    });
    assert.deepEqual(registered.registered, ["seam/summarize"]);
    const compacted = await client.compact(SESSION, { window: 2000 });
    assert.deepEqual(compacted.seam_failures, []);
    assert.ok(seen.length >= 1, "the summarizer was not called");
    assert.ok(seen[0]!.messages.length > 0 && seen[0]!.span_tokens > 0);
    assert.ok(compacted.recorded, "no checkpoint recorded");
    assert.match(JSON.stringify(compacted.recorded), /ts-test-summarizer/);
  } finally {
    await done();
  }
});

test("a subscription delivers every appended envelope once, in order, across a new connection", async () => {
  const { client, done } = await started();
  try {
    const positions: number[] = [];
    const subscription = await client.subscribe((entries: JsonObject[]) => {
      for (const entry of entries) positions.push(entry.position as number);
    }, 1);
    await client.append("session/tail", [records.sessionOpened("tail")], "no_stream");
    await client.append("session/tail", [records.textMessage("tail", "t1", "tail-1", "user", "one", START_MS)], 0);
    await until(() => positions.length >= 2, "the first two envelopes");

    // The server goes away; the next call makes a new connection (and server), where the
    // subscription resumes at the next position it has not delivered.
    await client.shutdown();
    await client.ping();
    await client.append("session/tail", [records.textMessage("tail", "t1", "tail-2", "user", "two", START_MS + 1)], 1);
    await until(() => positions.length >= 3, "the envelope appended on the new connection");
    assert.deepEqual(positions, [1, 2, 3]);
    assert.equal(subscription.next, 4);
    await subscription.close();
    await client.append("session/tail", [records.textMessage("tail", "t1", "tail-3", "user", "three", START_MS + 2)], 2);
    await new Promise((wait) => setTimeout(wait, 200));
    assert.deepEqual(positions, [1, 2, 3], "a closed subscription delivered more");
  } finally {
    await done();
  }
});

/** Most supporting events a claim links (the server's bound; docs/PROTOCOL.md). */
const CLAIM_EVENTS_MAX = 20;

test("a checkpoint's claims link to covered events that state them, and an unstated one is unsupported", async () => {
  const { client, done } = await started();
  try {
    const turns = CLAIM_EVENTS_MAX + 4;
    for (let n = 1; n <= turns; n++) {
      const turn = `t${n}`;
      await client.append("session/cl", [
        records.textMessage("cl", turn, `cl-${turn}-u`, "user", `Where does module ${n} keep its build?`, START_MS + n),
        records.textMessage("cl", turn, `cl-${turn}-a`, "assistant", `Module ${n} caches target/ by lockfile hash.`, START_MS + n),
        records.turnEnded("cl", turn),
      ]);
    }
    // One claim every model reply states, one no covered event states.
    const claimed =
      "## Goal\nSpeed up the build.\n\n## Progress\n### Done\n" +
      "Modules cache `target/` keyed by the lockfile hash; the old cache lived in `src/legacy_cache.rs`.\n\n" +
      "### In Progress\nNothing.\n\n## Next Steps\n1. Measure.\n\n## Critical Context\nThe key covers the lockfile.\n";
    await client.registerSeams({
      summarizer: { name: "ts-claiming", promptVersion: "c.1", limitsInput: false, summarize: () => claimed },
    });
    const compacted = await client.compact("cl", { window: 8000 });
    assert.deepEqual(compacted.seam_failures, []);
    const recorded = compacted.recorded as { position: number; checkpoint: JsonObject } | null | undefined;
    assert.ok(recorded, `no checkpoint recorded: ${JSON.stringify(compacted.history.diagnostics)}`);
    const checkpoint = recorded.checkpoint as {
      checkpoint: string;
      coverage: { event_count: number; turn_count: number };
      faithfulness: { checked: number; unsupported: string[] };
    };

    const report = await client.claims("cl", checkpoint.checkpoint);
    assert.equal(report.checkpoint, checkpoint.checkpoint);
    assert.equal(report.position, recorded.position);
    assert.equal(report.covered_events, checkpoint.coverage.event_count);
    // Checked again, the claims agree with the faithfulness report stored with the checkpoint.
    assert.deepEqual(report.recorded, checkpoint.faithfulness);
    assert.equal(report.matches_recorded, true);
    const claims = report.claims;
    assert.equal(claims.length, checkpoint.faithfulness.checked);

    const unsupported = claims.find((c) => c.claim === "src/legacy_cache.rs");
    assert.ok(unsupported, JSON.stringify(claims));
    assert.deepEqual([unsupported.supported, unsupported.events, unsupported.event_count], [false, [], 0]);
    assert.ok(checkpoint.faithfulness.unsupported.includes("src/legacy_cache.rs"));

    const cached = claims.find((c) => c.claim === "target/");
    assert.ok(cached, JSON.stringify(claims));
    assert.equal(cached.supported, true);
    // Every covered model reply states it; the answer links the first CLAIM_EVENTS_MAX of them.
    assert.equal(cached.event_count, checkpoint.coverage.turn_count);
    assert.ok(cached.event_count > CLAIM_EVENTS_MAX);
    assert.equal(cached.events.length, CLAIM_EVENTS_MAX);
    const positions = cached.events.map((e) => e.position);
    assert.deepEqual(positions, [...positions].sort((a, b) => a - b));
    assert.ok(positions.at(-1)! < recorded.position);
    for (const linked of cached.events) {
      const [envelope] = await client.log({ from: linked.position, limit: 1 });
      const record = envelope!.record as { id: string; content: { text: string } };
      assert.equal(envelope!.position, linked.position);
      assert.equal(record.id, linked.event);
      assert.match(record.content.text, /target\//, JSON.stringify(envelope));
    }

    // A checkpoint whose stored report lists no unsupported claim (as one recorded by another rule
    // would): checking again finds one, and the answer says they differ.
    const [entry] = await client.log({ from: report.position, limit: 1 });
    const other = {
      ...(entry!.record as JsonObject),
      checkpoint: `hcheckpoint-${"0".repeat(32)}`,
      faithfulness: { checked: report.recorded!.checked, unsupported: [] },
    };
    const appended = await client.append(entry!.stream as string, [{ kind: entry!.kind as string, record: other }]);
    const differing = await client.claims("cl", other.checkpoint);
    assert.equal(differing.position, appended.last_position);
    assert.deepEqual(differing.recorded, { checked: report.recorded!.checked, unsupported: [] });
    assert.equal(differing.matches_recorded, false);
    assert.deepEqual(differing.claims.filter((c) => !c.supported).map((c) => c.claim), ["src/legacy_cache.rs"]);

    await assert.rejects(
      client.claims("cl", "hcheckpoint-unknown"),
      (error: unknown) =>
        error instanceof MnemoError && error.reason === "invalid_input" && /hcheckpoint-unknown/.test(error.message),
    );
  } finally {
    await done();
  }
});
