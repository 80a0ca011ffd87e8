// An agent loop on Mnemo, in TypeScript: a host that owns its store through `mnemo serve --stdio`.
//
// It plays a scripted conversation turn by turn, as a runtime would:
//
// 1. before each turn, it asks for the history the next provider request carries at an 8k-token
//    window (`compaction/prepare`); when the history outgrows the window the server folds the older
//    turns into a checkpoint — summarized by this host's own toy summarizer, which the server calls
//    back over the same connection (`seam/summarize`);
// 2. it appends each turn's messages as they happen (`append`, at the stream's expected revision);
// 3. when the scripted model calls the SearchHistory tool, the host runs it (`history/search`) and
//    reads around the best hit (`history/read`), and appends the call and its result;
// 4. when the user asks it to remember something, the host runs the remember tool
//    (`memory/remember`), and a later turn recalls it (`memory/recall`).
//
// Run: `node dist/examples/agent_loop.js --mnemo target/debug/mnemo [--store DIR]`. It prints what
// happened and exits non-zero when any step did not do what it should.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { Client, records, type SummarizeParams, type Summarizer, type WireRecord } from "../src/index.js";

const SESSION = "agent-loop";
const WINDOW = 8000;
const START_MS = 1_767_225_600_000;

/** The scripted conversation: the user asks about one CI job at a time; the assistant answers at length. */
const TOPICS = [
  "the cargo cache", "the lockfile check", "the test matrix", "the release job", "the docs build",
  "the lint step", "the bench smoke run", "the fuzz job", "the NATS cluster", "the coverage report",
  "the nightly run", "the artifact upload", "the container image", "the dependency audit",
  "the flaky test quarantine", "the merge queue",
];
const REMEMBER = "Please remember that the release job must never restore the cargo cache.";
const SEARCH_QUERY = "lockfile check";
const RECALL_QUERY = "release cargo cache";

function exchange(n: number, topic: string): [string, string] {
  const ask =
    `Step ${n}: how does ${topic} work in our CI, and what should change? ` +
    `I keep seeing ${topic} take longer than it should on every pull request. `.repeat(8);
  const reply =
    `${topic[0]!.toUpperCase()}${topic.slice(1)} runs in its own job. ` +
    `For ${topic}, the job restores its inputs, runs, and saves what the next run can reuse. `.repeat(12);
  return [ask, reply];
}

/** The host's own summarizer: no model, just the first line of every user request, in the summary format the server checks. */
class ToySummarizer implements Summarizer {
  name = "agent-loop-toy-ts";
  promptVersion = "toy.v1";
  // Not a model with a bounded context: it takes any input.
  limitsInput = false;
  calls = 0;

  summarize(request: SummarizeParams): string {
    this.calls += 1;
    const asks: string[] = [];
    for (const message of request.messages as Array<{ role?: string; content?: Array<{ type?: string; text?: string }> }>) {
      if (message.role !== "user") continue;
      for (const part of message.content ?? []) {
        if (part.type === "text" && part.text) asks.push(`${part.text.split("?")[0]!.trim()}?`);
      }
    }
    const done = asks.map((ask) => `- ${ask}`).join("\n") || "- (no requests)";
    const previous = request.previous_summary ? `\nEarlier: ${request.previous_summary.split("\n")[1] ?? ""}` : "";
    return (
      "## Goal\nMake every CI job of the project faster and reliable.\n\n" +
      `## Progress\n### Done\nThe user asked, and the assistant explained:\n${done}${previous}\n\n` +
      "### In Progress\nThe next CI job in the list.\n\n" +
      "## Next Steps\n1. Continue with the next job the user asks about.\n\n" +
      `## Critical Context\nSummarized ${request.messages.length} messages (~${request.span_tokens} tokens) ` +
      "by the agent loop's toy summarizer.\n"
    );
  }
}

async function run(mnemo: string, store: string): Promise<string[]> {
  const failures: string[] = [];
  const summarizer = new ToySummarizer();
  const client = await Client.spawn(store, { mnemoBin: mnemo, clientName: "agent-loop-ts" });
  try {
    console.log(`mnemo ${client.server.server_version} on stdio, store ${client.server.store}`);
    await client.registerSeams({ summarizer, timeoutMs: 30_000 });
    const stream = `session/${SESSION}`;
    const opened = await client.append(stream, [records.sessionOpened(SESSION, { workspace: "acme/ci" })], "no_stream");
    let revision = opened.last_revision;
    let clock = START_MS;
    let checkpoints = 0;
    let largest = 0;
    const say = (turn: string, n: number, speaker: "user" | "assistant", text: string): WireRecord => {
      clock += 1000;
      return records.textMessage(SESSION, turn, `${turn}-${speaker}-${n}`, speaker, text, clock);
    };

    const script = TOPICS.map((topic, i) => exchange(i + 1, topic));
    script.splice(3, 0, [REMEMBER, "Noted: the release job will never restore the cargo cache."]);
    for (const [index, [ask, reply]] of script.entries()) {
      const n = index + 1;
      const turn = `t${n}`;
      // Before the turn: the history its request carries, at an 8k window.
      const prepared = await client.prepare(SESSION, { window: WINDOW, current_turn: turn });
      if (prepared.seam_failures.length > 0) failures.push(`${turn}: seam failures ${JSON.stringify(prepared.seam_failures)}`);
      const diagnostics = prepared.history.diagnostics as { tokens_before: number; tokens_after: number };
      largest = Math.max(largest, diagnostics.tokens_after);
      if (prepared.recorded) {
        // The checkpoint was appended to the session's stream: the stream moved on.
        const [entry] = await client.log({ from: prepared.recorded.position as number, limit: 1 });
        revision = entry!.revision as number;
        checkpoints += 1;
        const items = (prepared.history.items as unknown[]).length;
        console.log(`${turn}: compacted ~${diagnostics.tokens_before} -> ~${diagnostics.tokens_after} tokens with ${summarizer.name} (${items} items)`);
      }
      // The turn: the user's request, then the model's answer, each appended as it happens.
      revision = (await client.append(stream, [say(turn, n, "user", ask)], revision)).last_revision;
      if (ask === REMEMBER) {
        const remembered = await client.remember(SESSION);
        console.log(`${turn}: remember -> ${remembered.status} ${JSON.stringify(remembered.items.map((i) => i.content))}`);
        if (remembered.status !== "remembered") failures.push(`${turn}: remember answered ${remembered.status}: ${remembered.reason}`);
      }
      if (n === script.length - 1) {
        // The scripted model calls SearchHistory; the host runs it and answers the call.
        const callId = `call-${turn}`;
        const found = await client.search(SEARCH_QUERY, { limit: 3, context: { current_session: SESSION, current_turn: turn } });
        const top = found.rows[0];
        console.log(`${turn}: SearchHistory(${JSON.stringify(SEARCH_QUERY)}) -> ${found.rows.length} rows ${top ? JSON.stringify(top.snippet.slice(0, 60)) : ""}`);
        if (!top) {
          failures.push(`${turn}: SearchHistory found nothing for ${JSON.stringify(SEARCH_QUERY)}`);
        } else {
          const window = await client.read(top.session_id, { message_id: top.message_id, before: 0, after: 0 });
          const messages = window.turns.reduce((sum, t) => sum + t.messages.length, 0);
          console.log(`${turn}: ReadHistory around the hit -> ${messages} messages`);
        }
        const result = { rows: found.rows.map((r) => ({ session_id: r.session_id, snippet: r.snippet })) };
        const toolRecords = [
          records.toolCall(SESSION, turn, `${turn}-call`, callId, "search_history", { query: SEARCH_QUERY, limit: 3 }, clock + 1),
          records.toolResult(SESSION, turn, `${turn}-result`, callId, "search_history", result, clock + 2),
        ];
        clock += 2;
        revision = (await client.append(stream, toolRecords, revision)).last_revision;
      }
      const ended = await client.append(stream, [say(turn, n, "assistant", reply), records.turnEnded(SESSION, turn)], revision);
      revision = ended.last_revision;
    }

    // A later turn recalls what the user asked to remember.
    const recalled = await client.recall(SESSION, RECALL_QUERY);
    console.log(`recall(${JSON.stringify(RECALL_QUERY)}) -> ${JSON.stringify(recalled.map((item) => item.content))}`);
    if (!recalled.some((item) => item.content.includes("cargo cache"))) failures.push("recall did not return the remembered rule");
    const stats = await client.stats();
    console.log(
      `${script.length} turns, head ${String(stats.head)}, ${checkpoints} checkpoint(s), ` +
        `${summarizer.calls} summarizer call(s) through the seam, largest request ~${largest} tokens`,
    );
    if (checkpoints === 0 || summarizer.calls === 0) failures.push("no checkpoint was summarized through the seam");
    if (largest > WINDOW) failures.push(`a prepared request of ~${largest} tokens does not fit the ${WINDOW}-token window`);
  } finally {
    await client.close();
  }
  return failures;
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { mnemo: { type: "string" }, store: { type: "string" } } });
  if (!values.mnemo) {
    console.error("usage: agent_loop.js --mnemo MNEMO_BIN [--store DIR]");
    return 2;
  }
  const scratch = mkdtempSync(join(tmpdir(), "mnemo-loop-ts-"));
  try {
    const failures = await run(resolve(values.mnemo), values.store ? resolve(values.store) : join(scratch, "store"));
    for (const failure of failures) console.error(`FAILED: ${failure}`);
    return failures.length > 0 ? 1 : 0;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

process.exitCode = await main();
