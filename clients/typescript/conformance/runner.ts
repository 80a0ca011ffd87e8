// The conformance scenario (tests/conformance/scenario.json) through this client: every step through
// the client's typed method, then the log's chain head and the assembled history. Prints one JSON
// document; the driver (crates/mnemo-cli/tests/conformance.rs) compares it with the other clients'.
//
//   node dist/conformance/runner.js SCENARIO STORE MNEMO_BIN

import { readFileSync } from "node:fs";

import { Client, MnemoError, type Expected, type ExpectedRevision, type Json, type JsonObject } from "../src/index.js";

/** Envelopes read per `log` call while looking for the chain head. */
const LOG_PAGE = 1000;

interface Step {
  method: string;
  params: JsonObject;
  expect_error?: string;
}

interface Scenario {
  fixed_clock_ms: number;
  history: { session: string; window: number };
  steps: Step[];
}

function expected(wire: ExpectedRevision): Expected {
  return typeof wire === "string" ? wire : wire.exact;
}

async function run(client: Client, step: Step): Promise<unknown> {
  const p = step.params as Record<string, any>;
  switch (step.method) {
    case "append":
      return client.append(p.stream, p.records, expected(p.expected_revision));
    case "import":
      return client.importTranscript(p);
    case "history/sessions":
      return client.sessions();
    case "history/search": {
      const { query, ...options } = p;
      return client.search(query, options);
    }
    case "history/read": {
      const { session_id, ...options } = p;
      return client.read(session_id, options);
    }
    case "history/transcript": {
      const { session, ...options } = p;
      return client.transcript(session, options);
    }
    case "memory/remember": {
      const { session, ...options } = p;
      return client.remember(session, options);
    }
    case "memory/recall": {
      const { session, query, ...options } = p;
      return client.recall(session, query, options);
    }
    case "memory/recall_block": {
      const { session, ...options } = p;
      return client.recallBlock(session, options);
    }
    case "compaction/context": {
      const { session, ...options } = p;
      return client.context(session, options);
    }
    case "compaction/prepare": {
      const { session, ...options } = p;
      return client.prepare(session, options);
    }
    default:
      throw new Error(`the scenario's method ${step.method} has no typed method here`);
  }
}

async function main(): Promise<void> {
  const [scenarioPath, store, mnemoBin] = process.argv.slice(2);
  if (!scenarioPath || !store || !mnemoBin) throw new Error("usage: runner.js SCENARIO STORE MNEMO_BIN");
  const scenario = JSON.parse(readFileSync(scenarioPath, "utf8")) as Scenario;
  const client = await Client.connect(store, {
    mnemoBin,
    clientName: "conformance-typescript",
    serveArgs: ["--fixed-clock", String(scenario.fixed_clock_ms), "--idle-exit", "60"],
  });
  try {
    const steps: Json[] = [];
    for (const step of scenario.steps) {
      try {
        steps.push({ method: step.method, result: (await run(client, step)) as Json });
      } catch (error) {
        if (!(error instanceof MnemoError)) throw error;
        steps.push({
          method: step.method,
          error: { reason: error.reason, code: error.code, tool_reason: error.toolReason ?? null, expected: error.expected ?? null, actual: error.actual ?? null },
        });
      }
    }
    let head: JsonObject | undefined;
    for (let from = 1; ; from += LOG_PAGE) {
      const page = await client.log({ from, limit: LOG_PAGE });
      if (page.length === 0) break;
      head = page[page.length - 1];
    }
    const history = await client.context(scenario.history.session, { window: scenario.history.window });
    const boundary = history.boundary as { checkpoint: string };
    const claims = await client.claims(scenario.history.session, boundary.checkpoint);
    process.stdout.write(
      JSON.stringify({
        client: "typescript",
        steps,
        log_head: head?.position ?? 0,
        log_digest: head?.hash ?? null,
        history,
        claims: claims as unknown as Json,
      }) + "\n",
    );
    await client.shutdown();
  } finally {
    client.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`conformance runner (typescript): ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
  process.exit(1);
});
