// The protocol-overhead workload of `mnemo bench --protocol` through this client: CALLS appends of
// one event each to one session, then CALLS searches of 5 rows, one call at a time, on a server it
// starts for the fresh store STORE. Prints every latency, in microseconds, as JSON
// (`{"append_us": [...], "search_us": [...]}`); the bench computes the percentiles.
//
//   node dist/bench/protocol.js STORE MNEMO_BIN CALLS

import { Client, records } from "../src/index.js";

/** The words the texts are made of and the searches look for (as crates/mnemo-cli/src/protocol_bench.rs). */
const WORDS = ["deploy", "release", "ledger", "socket", "replay", "budget", "cursor", "digest"];
const SESSION = "bench";
const START_MS = 1_767_225_600_000;
const SEARCH_LIMIT = 5;

function micros(began: bigint): number {
  return Number((process.hrtime.bigint() - began) / 1000n);
}

async function main(): Promise<void> {
  const [store, mnemoBin, callsText] = process.argv.slice(2);
  const calls = Number(callsText);
  if (!store || !mnemoBin || !Number.isSafeInteger(calls) || calls < 1) throw new Error("usage: protocol.js STORE MNEMO_BIN CALLS");
  const client = await Client.connect(store, { mnemoBin, clientName: "bench-typescript", serveArgs: ["--idle-exit", "60"] });
  try {
    const appendUs: number[] = [];
    for (let i = 0; i < calls; i++) {
      const text = `${WORDS[i % WORDS.length]} ${WORDS[(i * 3) % WORDS.length]} number ${i}`;
      const event = records.textMessage(SESSION, `t${i}`, `bench-${i}`, "user", text, START_MS + i, `bench-run-${i}`);
      const began = process.hrtime.bigint();
      await client.append(`session/${SESSION}`, [event], "any");
      appendUs.push(micros(began));
    }
    const searchUs: number[] = [];
    for (let i = 0; i < calls; i++) {
      const began = process.hrtime.bigint();
      await client.search(WORDS[i % WORDS.length]!, { limit: SEARCH_LIMIT });
      searchUs.push(micros(began));
    }
    process.stdout.write(JSON.stringify({ append_us: appendUs, search_us: searchUs }) + "\n");
    await client.shutdown();
  } finally {
    await client.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`protocol bench (typescript): ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
