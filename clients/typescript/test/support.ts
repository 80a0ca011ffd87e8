// Shared pieces of the tests: the `mnemo` binary named by MNEMO_BIN, a fresh store on a short path,
// and stopping a store's server.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "../src/index.js";

/** The package directory (tests run from dist/test). */
export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The repository root. */
export const REPO = resolve(PACKAGE_DIR, "..", "..");
/** The real session files the repository carries (read-only; their provenance is beside them). */
export const REAL_FIXTURES = resolve(REPO, "tests", "fixtures", "real");
/** How long a test waits for a shut-down server's socket to go away, in ms. */
const SHUTDOWN_WAIT_MS = 30_000;
/** The idle exit the tests' servers run with, in seconds: a test that fails leaves no server for long. */
export const TEST_IDLE_EXIT = ["--idle-exit", "120"];

/** The `mnemo` binary under test: MNEMO_BIN, absolute or relative to the repository root. */
export function mnemoBin(): string {
  const value = process.env.MNEMO_BIN;
  if (!value) {
    throw new Error(
      "MNEMO_BIN is not set: build the CLI (cargo build -p mnemo-cli) and set MNEMO_BIN=target/debug/mnemo " +
        "(relative to the repository root, or absolute)",
    );
  }
  const path = isAbsolute(value) ? value : join(REPO, value);
  if (!existsSync(path)) throw new Error(`MNEMO_BIN=${value}: no file at ${path}`);
  return path;
}

/** A fresh store directory (not yet created) on a short path: the socket path must fit. */
export function freshStore(): { store: string; cleanup: () => Promise<void> } {
  const base = mkdtempSync(join(tmpdir(), "mnemo-ts-"));
  const store = join(base, "store");
  return {
    store,
    cleanup: async () => {
      await stopServer(store);
      // Servers that lost a start race may still be exiting and removing their own files.
      try {
        rmSync(base, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
      } catch {
        // a temporary directory; the system cleans it
      }
    },
  };
}

/** Shuts down the server of `store` if one runs, and waits until its socket is gone. */
export async function stopServer(store: string): Promise<void> {
  const socket = join(store, "server.sock");
  if (!existsSync(socket)) return;
  try {
    const client = await Client.connect(store);
    try {
      await client.shutdown();
    } finally {
      client.close();
    }
  } catch {
    return;
  }
  const deadline = Date.now() + SHUTDOWN_WAIT_MS;
  while (existsSync(socket) && Date.now() < deadline) await new Promise((done) => setTimeout(done, 50));
}

/** A connected client of a server started on a fresh store, closed and stopped by `done`. */
export async function started(): Promise<{ client: Client; store: string; done: () => Promise<void> }> {
  const { store, cleanup } = freshStore();
  const client = await Client.connect(store, { mnemoBin: mnemoBin(), serveArgs: TEST_IDLE_EXIT });
  return {
    client,
    store,
    done: async () => {
      client.close();
      await cleanup();
    },
  };
}
