// A promise-based client of the Mnemo store server (`mnemo serve`; the protocol is docs/PROTOCOL.md):
// one connection to the store's Unix socket, the `initialize` handshake, pipelined calls matched by
// id, a new connection (and a new server when the client may start one) when the old one is gone,
// and handlers for requests the server sends to the client over the same connection.

import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { ClientError, ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed, TimedOut } from "./errors.js";
import {
  PROTOCOL_VERSION,
  REPEATABLE,
  RESULT_SCHEMAS,
  type AppendedParams,
  type AppendResult,
  type Durability,
  type ProposeParams,
  type ProposeResult,
  type ProviderCompactParams,
  type ProviderCompactResult,
  type ProviderConnection,
  type RegisterSeamsParams,
  type RegisterSeamsResult,
  type ServerRequests,
  type SummarizeParams,
  type SummarizeResult,
  type ExpectedRevision,
  type InitializeResult,
  type Json,
  type JsonObject,
  type MethodName,
  type Methods,
  type WireRecord,
} from "./protocol.js";
import { ProtocolMethods, present } from "./methods.js";
import { mismatch } from "./wire.js";

/** The socket's name inside the store directory. */
export const SOCKET_NAME = "server.sock";
/** Longest socket path a Unix socket address holds, in bytes. */
export const SOCKET_PATH_BYTES_MAX = 107;
/** How often a starting client looks for the socket, in ms. */
export const CONNECT_RETRY_MS = 25;
/** How long after a server it started exited a client starts another, in ms. */
export const RESTART_MS = 200;
/** How long a client waits for a server it started to answer, in ms. */
export const START_WAIT_MS = 20_000;
/** How long one call may take before the client reports a timeout, in ms (the server's own bound). */
export const CALL_TIMEOUT_MS = 600_000;
/** Most bytes of a started server's error output kept for a failure message. */
export const START_ERROR_BYTES_MAX = 8192;
/** Most notifications kept for a subscription whose answer is not handled yet. */
export const UNCLAIMED_NOTIFICATIONS_MAX = 256;
/** How long `close` waits for a spawned server to close the store and exit, in ms. */
export const STDIO_EXIT_WAIT_MS = 30_000;
/** The frame limit assumed before `initialize` states the server's (only `initialize` is sent). */
const HANDSHAKE_FRAME_BYTES_MAX = 64 * 1024;
/** The JSON-RPC version of every frame. */
const JSONRPC = "2.0";
/** JSON-RPC's code for a method the receiver does not have. */
const METHOD_NOT_FOUND = -32601;
/** JSON-RPC's code for a failure inside the receiver. */
const INTERNAL_ERROR = -32603;

/** How a client connects. */
export interface ConnectOptions {
  /** The `mnemo` binary: start `mnemo --store STORE serve` when no server answers. */
  mnemoBin?: string;
  /** Who the client is (the server logs it). */
  clientName?: string;
  /** How long to wait for a started server to answer, in ms. */
  startWaitMs?: number;
  /** How long one call may take, in ms. */
  callTimeoutMs?: number;
  /** More arguments after `serve` (`["--idle-exit", "60"]`). */
  serveArgs?: string[];
}

/** How a client spawns a server of its own on standard input and output. */
export interface SpawnOptions {
  /** The `mnemo` binary. */
  mnemoBin: string;
  /** Who the client is (the server logs it). */
  clientName?: string;
  /** How long one call may take, in ms. */
  callTimeoutMs?: number;
  /** More arguments after `serve --stdio`. */
  serveArgs?: string[];
}

/**
 * A handler of a request the server sends to the client: it gets the request's params and returns
 * its result; a thrown error (or a rejected promise) is answered as an error.
 */
export type RequestHandler = (params: Json) => Json | Promise<Json>;

/** A handler of a notification the server sends (no answer). */
export type NotificationHandler = (params: Json) => void;

/** `append`'s expected revision: `"any"`, `"no_stream"` or an exact revision. */
export type Expected = "any" | "no_stream" | number;

/**
 * The host's own text summarizer (`seam/summarize`): given the conversation to fold, returns its
 * summary in the format the request's `instructions` give (the server checks the required sections).
 */
export interface Summarizer {
  /** Recorded in each checkpoint's manifest. */
  name: string;
  /** Recorded in each checkpoint's manifest. */
  promptVersion: string;
  /** Whether its input must fit the history budget (default true: a model's context is bounded). */
  limitsInput?: boolean;
  summarize(request: SummarizeParams): string | SummarizeResult | Promise<string | SummarizeResult>;
}

/** A provider-native compactor bound to one provider connection (`seam/provider_compact`). */
export interface ProviderCompactor {
  name: string;
  promptVersion: string;
  connection: ProviderConnection;
  /** The provider's output parts. */
  compact(request: ProviderCompactParams): Json[] | ProviderCompactResult | Promise<Json[] | ProviderCompactResult>;
}

/** A memory proposer (`seam/propose`): strict JSON of the proposal schema, as text. */
export interface MemoryProposer {
  name: string;
  propose(request: ProposeParams): string | ProposeResult | Promise<string | ProposeResult>;
}

/** The seams a connection answers, and how long the server waits for each answer. */
export interface Seams {
  summarizer?: Summarizer;
  providerCompactor?: ProviderCompactor;
  memoryProposer?: MemoryProposer;
  /** Per seam call, in ms (the server's maximum when absent). */
  timeoutMs?: number;
}

/** A tail subscription: `log/appended` entries, in order, without gap, across reconnects. */
export interface Subscription {
  /** The subscription's id on the current connection. */
  readonly id: number;
  /** The next position it will deliver. */
  readonly next: number;
  /** Ends the subscription. */
  close(): Promise<void>;
}

type Entries = (entries: JsonObject[]) => void;

interface Following {
  id: number;
  next: number;
  listener: Entries;
  closed: boolean;
}

/**
 * One initialized connection: to the store's socket (`connect`, with a new connection — and a new
 * server when the client may start one — when the old one is gone), or to a server this process
 * spawned on standard input and output (`spawn`). Call `close` when done.
 */
export class Client extends ProtocolMethods {
  /** What `initialize` answered: the server's version, its store, its pid and limits. */
  server: InitializeResult;
  readonly store: string;
  /** How to make a new connection; `undefined` for a spawned server, which is this client's alone. */
  readonly #reopen: (() => Promise<Connection>) | undefined;
  #connection: Connection;
  #reconnecting: Promise<Connection> | undefined;
  #closed = false;
  readonly #requestHandlers = new Map<string, RequestHandler>();
  readonly #notificationHandlers = new Map<string, Set<NotificationHandler>>();
  #seams: RegisterSeamsParams | undefined;
  readonly #following = new Set<Following>();
  /**
   * Notifications of a subscription whose `log/subscribe` answer is not handled yet (they may come
   * in the same read as the answer), kept until it is; at most `UNCLAIMED_NOTIFICATIONS_MAX`.
   */
  #unclaimed: AppendedParams[] = [];

  private constructor(store: string, connection: Connection, reopen: (() => Promise<Connection>) | undefined) {
    super();
    this.store = store;
    this.#connection = connection;
    this.#reopen = reopen;
    this.server = connection.server;
    this.#attach(connection);
  }

  /**
   * Connects to the server of `store`; with `mnemoBin`, starts one when none answers (several
   * clients racing start exactly one server: the store's lock admits one).
   *
   * Throws `NoServer` when none answers and no binary is given, `StartFailed` when a started server
   * did not answer in time, `MnemoError` when the handshake is refused.
   */
  static async connect(store: string, options: ConnectOptions = {}): Promise<Client> {
    const resolved: Options = {
      mnemoBin: options.mnemoBin,
      clientName: options.clientName ?? "mnemo-client-typescript",
      startWaitMs: options.startWaitMs ?? START_WAIT_MS,
      callTimeoutMs: options.callTimeoutMs ?? CALL_TIMEOUT_MS,
      serveArgs: options.serveArgs ?? [],
    };
    const storePath = resolve(store);
    const reopen = () => open(storePath, resolved);
    return new Client(storePath, await reopen(), reopen);
  }

  /**
   * Starts `mnemo --store STORE serve --stdio` as a child that serves this client alone on its
   * standard input and output: this process owns the store until `close` (which closes the child's
   * input; the child answers what it admitted, closes the store and exits). There is no reconnecting:
   * when the child is gone, calls reject with `ConnectionLost`.
   *
   * Throws `StartFailed` with the child's error output when it exits without answering (another
   * process owns the store, for example).
   */
  static async spawn(store: string, options: SpawnOptions): Promise<Client> {
    const storePath = resolve(store);
    const child = spawn(options.mnemoBin, ["--store", storePath, "serve", "--stdio", ...(options.serveArgs ?? [])], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      if (stderr.length < START_ERROR_BYTES_MAX) stderr += chunk.slice(0, START_ERROR_BYTES_MAX - stderr.length);
    });
    const exited = new Promise<string>((done) => {
      child.on("error", (error) => done(`not started: ${error.message}`));
      child.on("exit", (code, signal) => done(signal ? `killed by ${signal}` : `exit ${code}`));
    });
    const connection = new Connection(stdioTransport(child, exited), options.callTimeoutMs ?? CALL_TIMEOUT_MS);
    try {
      await initialize(connection, options.clientName ?? "mnemo-client-typescript");
    } catch (error) {
      connection.close();
      if (error instanceof Lost || error instanceof Unsent) {
        const status = await exited;
        throw new StartFailed(`${options.mnemoBin} serve --stdio exited (${status}) without answering: ${stderr.trim() || error.message}`);
      }
      throw error;
    }
    return new Client(storePath, connection, undefined);
  }

  /**
   * Closes the connection; calls still outstanding reject with `ConnectionLost`. For a spawned
   * server, resolves once it has closed the store and exited.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#connection.close();
  }

  /**
   * Handles requests named `method` that the server sends over this connection while it runs a
   * call of this client. Replaces an earlier handler. `registerSeams` installs the seams' handlers.
   */
  handle(method: string, handler: RequestHandler): void {
    this.#requestHandlers.set(method, handler);
  }

  /** Listens to notifications named `method`; returns a function that stops listening. */
  onNotification(method: string, handler: NotificationHandler): () => void {
    const handlers = this.#notificationHandlers.get(method) ?? new Set();
    handlers.add(handler);
    this.#notificationHandlers.set(method, handlers);
    this.#connection.keepAlive(this.#listening());
    return () => {
      handlers.delete(handler);
      this.#connection.keepAlive(this.#listening());
    };
  }

  // The raw call ---------------------------------------------------------------------------------

  /**
   * Calls a method of the protocol with its typed params; resolves to its result, read strictly
   * against the schema, or rejects with `MnemoError` carrying the server's typed reason.
   *
   * When the connection turns out to be gone (the server idled out or restarted), the call is sent
   * once more on a new connection — starting a server if the client may — if nothing of it can
   * have run: it was never written, the server refused it as `shutting_down`, or the method is
   * repeatable. Otherwise it rejects with `ConnectionLost`: the call may have run.
   */
  override async call<M extends MethodName>(method: M, params: Methods[M]["params"]): Promise<Methods[M]["result"]> {
    const sent = withAbsolutePath(method, params as unknown as JsonObject);
    const value = await this.#callWithRetry(method, sent, REPEATABLE[method]);
    const failure = mismatch(value, RESULT_SCHEMAS[method]);
    if (failure) throw new ProtocolError(`${method}: ${failure}`);
    return value as Methods[M]["result"];
  }

  /** Calls any method by name (one this client has no type for); resolves to the decoded result. */
  async callRaw(method: string, params: JsonObject = {}, repeatable = false): Promise<Json> {
    return this.#callWithRetry(method, params, repeatable);
  }

  async #callWithRetry(method: string, params: JsonObject, repeatable: boolean): Promise<Json> {
    if (this.#closed) throw new ConnectionLost(`${method}: the client is closed`);
    const connection = this.#reconnecting ? await this.#reconnecting : this.#connection;
    try {
      return await connection.request(method, params);
    } catch (error) {
      const again =
        error instanceof Unsent ||
        (error instanceof MnemoError && error.reason === "shutting_down") ||
        (error instanceof Lost && repeatable);
      if (!again || !this.#reopen) throw error instanceof Lost || error instanceof Unsent ? lost(method) : error;
    }
    const fresh = await this.#reconnect(connection);
    try {
      return await fresh.request(method, params);
    } catch (error) {
      throw error instanceof Lost || error instanceof Unsent ? lost(method) : error;
    }
  }

  /**
   * A new connection in place of `broken`, made once however many calls found it broken; the
   * connection's seams are registered again and its subscriptions resumed where they were.
   */
  async #reconnect(broken: Connection): Promise<Connection> {
    if (this.#connection !== broken && !this.#connection.dead) return this.#connection;
    const reopen = this.#reopen;
    if (!reopen) throw new ConnectionLost("the spawned server is gone");
    if (!this.#reconnecting) {
      void broken.close();
      this.#reconnecting = (async () => {
        const connection = await reopen();
        if (this.#closed) {
          void connection.close();
          throw new ConnectionLost("the client was closed while it reconnected");
        }
        this.#unclaimed = [];
        this.#attach(connection);
        if (this.#seams) await connection.request("seams/register", this.#seams as JsonObject);
        for (const following of this.#following) {
          if (following.closed) continue;
          const resumed = await connection.request("log/subscribe", { from: following.next });
          following.id = (resumed as { subscription: number }).subscription;
          this.#claim(following);
        }
        this.#connection = connection;
        this.server = connection.server;
        return connection;
      })().finally(() => {
        this.#reconnecting = undefined;
      });
    }
    return this.#reconnecting;
  }

  #attach(connection: Connection): void {
    connection.onRequest = (method, params) => {
      const handler = this.#requestHandlers.get(method);
      return handler ? handler(params) : undefined;
    };
    connection.onNotification = (method, params) => {
      if (method === "log/appended") this.#appended(params as unknown as AppendedParams);
      for (const handler of this.#notificationHandlers.get(method) ?? []) handler(params);
    };
    connection.keepAlive(this.#listening());
  }

  #listening(): boolean {
    return this.#following.size > 0 || [...this.#notificationHandlers.values()].some((handlers) => handlers.size > 0);
  }

  #appended(params: AppendedParams): void {
    const following = [...this.#following].find((f) => !f.closed && f.id === params.subscription);
    if (following) {
      this.#deliver(following, params);
      return;
    }
    this.#unclaimed.push(params);
    if (this.#unclaimed.length > UNCLAIMED_NOTIFICATIONS_MAX) this.#unclaimed.shift();
  }

  /** Delivers what arrived for `following`'s id before its answer was handled. */
  #claim(following: Following): void {
    const mine = this.#unclaimed.filter((params) => params.subscription === following.id);
    this.#unclaimed = this.#unclaimed.filter((params) => params.subscription !== following.id);
    for (const params of mine) this.#deliver(following, params);
  }

  #deliver(following: Following, params: AppendedParams): void {
    // Entries before `next` were delivered on an earlier connection.
    const fresh = params.entries.filter((entry) => typeof entry.position === "number" && entry.position >= following.next);
    if (fresh.length === 0) return;
    following.next = (fresh[fresh.length - 1]!.position as number) + 1;
    following.listener(fresh);
  }

  // The seams and the tail -----------------------------------------------------------------------

  /**
   * Registers this connection's model seams (replacing earlier ones): the server calls them back
   * over this connection while it compacts or extracts (`seam/summarize`, `seam/provider_compact`,
   * `seam/propose`). A new connection registers them again.
   */
  async registerSeams(seams: Seams): Promise<RegisterSeamsResult> {
    const { summarizer, providerCompactor, memoryProposer } = seams;
    const handlers: { [M in keyof ServerRequests]?: (params: ServerRequests[M]["params"]) => Promise<ServerRequests[M]["result"]> } = {};
    if (summarizer) {
      handlers["seam/summarize"] = async (request) => {
        const answer = await summarizer.summarize(request);
        return typeof answer === "string" ? { text: answer } : answer;
      };
    }
    if (providerCompactor) {
      handlers["seam/provider_compact"] = async (request) => {
        const answer = await providerCompactor.compact(request);
        return Array.isArray(answer) ? { output: answer } : answer;
      };
    }
    if (memoryProposer) {
      handlers["seam/propose"] = async (request) => {
        const answer = await memoryProposer.propose(request);
        return typeof answer === "string" ? { text: answer } : answer;
      };
    }
    for (const method of ["seam/summarize", "seam/provider_compact", "seam/propose"] as const) {
      const handler = handlers[method] as RequestHandler | undefined;
      if (handler) this.#requestHandlers.set(method, handler);
      else this.#requestHandlers.delete(method);
    }
    const params: RegisterSeamsParams = present({
      summarizer: summarizer && {
        name: summarizer.name,
        prompt_version: summarizer.promptVersion,
        limits_input: summarizer.limitsInput ?? true,
      },
      provider_compactor: providerCompactor && {
        name: providerCompactor.name,
        prompt_version: providerCompactor.promptVersion,
        connection: providerCompactor.connection,
      },
      memory_proposer: memoryProposer && { name: memoryProposer.name },
      timeout_ms: seams.timeoutMs,
    });
    const result = await this.call("seams/register", params);
    this.#seams = params;
    return result;
  }

  /**
   * Follows the log from position `from` (default: the next one appended): `listener` gets the
   * envelopes of every `log/appended` notification, in order, with no gap and no repeat — also
   * across a reconnect, where the subscription resumes at the next position it has not delivered.
   */
  async subscribe(listener: (entries: JsonObject[]) => void, from?: number): Promise<Subscription> {
    const result = await this.call("log/subscribe", present({ from }));
    const following: Following = { id: result.subscription, next: result.from, listener, closed: false };
    this.#following.add(following);
    this.#claim(following);
    this.#connection.keepAlive(this.#listening());
    return {
      get id() {
        return following.id;
      },
      get next() {
        return following.next;
      },
      close: async () => {
        following.closed = true;
        this.#following.delete(following);
        this.#connection.keepAlive(this.#listening());
        if (!this.#closed && !this.#connection.dead) await this.call("log/unsubscribe", { subscription: following.id });
      },
    };
  }

  // Typed methods: every other one is generated into src/methods.ts from the schema ------------

  /**
   * Appends `records` to `stream` as one atomic batch if the stream is at `expectedRevision`; a
   * revision that does not hold rejects with `MnemoError` reason `conflict` (`expected`/`actual`
   * set) and appends nothing. `durability` (`buffered`, `sync_data`, `sync_all`) says how far the
   * batch must have reached before it is acknowledged; the store's own when absent.
   */
  async append(
    stream: string,
    records: WireRecord[],
    expectedRevision: Expected = "any",
    durability?: Durability,
  ): Promise<AppendResult> {
    let expected: ExpectedRevision;
    if (typeof expectedRevision === "number") {
      if (!Number.isSafeInteger(expectedRevision) || expectedRevision < 0) {
        throw new RangeError(`expectedRevision ${expectedRevision} is not a revision (a non-negative integer)`);
      }
      expected = { exact: expectedRevision };
    } else if (expectedRevision === "any" || expectedRevision === "no_stream") {
      expected = expectedRevision;
    } else {
      throw new RangeError(`expectedRevision ${JSON.stringify(expectedRevision)} is not "any", "no_stream" or a number`);
    }
    return this.call("append", present({ stream, expected_revision: expected, records, durability }));
  }
}

// One connection ----------------------------------------------------------------------------------

/** The request was never written: nothing of it ran. */
class Unsent extends ClientError {}
/** The connection broke after the request was written. */
class Lost extends ClientError {}

function lost(method: string): ConnectionLost {
  return new ConnectionLost(`the connection broke during ${method}; it may or may not have run`);
}

interface Pending {
  method: string;
  resolve: (value: Json) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/** Where frames go and come from: the store's socket, or a spawned server's pipes. */
interface Transport {
  readable: Readable;
  writable: Writable;
  /** Keeps the process alive (or not) for this transport. */
  ref(on: boolean): void;
  /** Ends the transport; resolves once it is gone (a spawned server: once it exited). */
  end(): Promise<void>;
}

function socketTransport(socket: Socket): Transport {
  return {
    readable: socket,
    writable: socket,
    ref: (on) => (on ? socket.ref() : socket.unref()),
    end: async () => {
      socket.destroy();
    },
  };
}

function stdioTransport(child: ChildProcessWithoutNullStreams, exited: Promise<string>): Transport {
  const pipes = [child.stdin, child.stdout, child.stderr] as unknown as Socket[];
  return {
    readable: child.stdout,
    writable: child.stdin,
    ref: (on) => {
      for (const pipe of pipes) if (typeof pipe.ref === "function") on ? pipe.ref() : pipe.unref();
      on ? child.ref() : child.unref();
    },
    end: async () => {
      // End of input: the server answers what it admitted, closes the store and exits.
      child.stdin.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), STDIO_EXIT_WAIT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A transport speaking the protocol: frames out, answers matched to their calls by id. */
class Connection {
  server: InitializeResult;
  dead = false;
  onRequest: (method: string, params: Json) => Json | Promise<Json> | undefined = () => undefined;
  onNotification: (method: string, params: Json) => void = () => {};
  readonly #transport: Transport;
  readonly #callTimeoutMs: number;
  readonly #pending = new Map<number, Pending>();
  /** Calls waiting for room under the server's per-connection limit. */
  readonly #waiting: Array<() => void> = [];
  #chunks: Buffer[] = [];
  #buffered = 0;
  #nextId = 1;
  #keepAlive = false;
  #ended: Promise<void> | undefined;

  constructor(transport: Transport, callTimeoutMs: number) {
    this.#transport = transport;
    this.#callTimeoutMs = callTimeoutMs;
    this.server = placeholderServer();
    transport.readable.on("data", (chunk: Buffer) => this.#receive(chunk));
    transport.readable.on("error", () => this.#fail(new Lost("the connection failed")));
    transport.readable.on("close", () => this.#fail(new Lost("the server closed the connection")));
    transport.readable.on("end", () => this.#fail(new Lost("the server closed the connection")));
    transport.writable.on("error", () => this.#fail(new Lost("the connection failed")));
    this.#updateRef();
  }

  /** Keeps the process alive while nothing is pending (a client following notifications). */
  keepAlive(on: boolean): void {
    this.#keepAlive = on;
    this.#updateRef();
  }

  close(): Promise<void> {
    this.#fail(new ConnectionLost("the client closed the connection"));
    this.#ended ??= this.#transport.end();
    return this.#ended;
  }

  async request(method: string, params: JsonObject): Promise<Json> {
    if (this.dead) throw new Unsent(`${method}: the connection is closed`);
    const limit = Math.max(1, this.server.limits.connection_calls_max);
    while (this.#pending.size >= limit) {
      await new Promise<void>((resume) => this.#waiting.push(resume));
      if (this.dead) throw new Unsent(`${method}: the connection is closed`);
    }
    const id = this.#nextId++;
    const frame = JSON.stringify({ jsonrpc: JSONRPC, id, method, params });
    const bytes = Buffer.byteLength(frame) + 1;
    const frameMax = this.server.limits.frame_bytes_max;
    if (bytes > frameMax) {
      throw new MnemoError(-32600, `${method}: the request is ${bytes} bytes; the server takes frames of at most ${frameMax}`, {
        reason: "frame_too_large",
        limit: frameMax,
      });
    }
    return new Promise<Json>((resolveCall, rejectCall) => {
      const timer = setTimeout(() => {
        this.#settle(id);
        rejectCall(new TimedOut(`no answer to ${method} within ${this.#callTimeoutMs} ms; it may still run`));
      }, this.#callTimeoutMs);
      timer.unref();
      this.#pending.set(id, { method, resolve: resolveCall, reject: rejectCall, timer });
      this.#updateRef();
      this.#transport.writable.write(frame + "\n", (error) => {
        if (error && this.#pending.has(id)) {
          this.#settle(id);
          rejectCall(new Unsent(`${method}: the request could not be written: ${error.message}`));
        }
      });
    });
  }

  #settle(id: number): Pending | undefined {
    const pending = this.#pending.get(id);
    if (!pending) return undefined;
    clearTimeout(pending.timer);
    this.#pending.delete(id);
    this.#waiting.shift()?.();
    this.#updateRef();
    return pending;
  }

  #updateRef(): void {
    if (this.dead) return;
    this.#transport.ref(this.#pending.size > 0 || this.#keepAlive);
  }

  #fail(error: Error): void {
    if (this.dead) return;
    this.dead = true;
    for (const id of [...this.#pending.keys()]) this.#settle(id)?.reject(error);
    for (const resume of this.#waiting.splice(0)) resume();
    this.#ended ??= this.#transport.end();
  }

  #receive(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
      this.#chunks.push(chunk.subarray(start, newline));
      const line = Buffer.concat(this.#chunks).toString("utf8");
      this.#chunks = [];
      this.#buffered = 0;
      start = newline + 1;
      if (line.trim() !== "") this.#frame(line);
      if (this.dead) return;
    }
    const rest = chunk.subarray(start);
    this.#buffered += rest.length;
    if (this.#buffered > this.server.limits.frame_bytes_max) {
      this.#fail(new ProtocolError(`an answer longer than ${this.server.limits.frame_bytes_max} bytes`));
      return;
    }
    if (rest.length > 0) this.#chunks.push(rest);
  }

  #frame(line: string): void {
    let frame: unknown;
    try {
      frame = JSON.parse(line);
    } catch (error) {
      this.#fail(new ProtocolError(`the server sent a frame that is not JSON: ${(error as Error).message}`));
      return;
    }
    if (typeof frame !== "object" || frame === null || Array.isArray(frame)) {
      this.#fail(new ProtocolError("the server sent a frame that is not a JSON object"));
      return;
    }
    const message = frame as { id?: unknown; method?: unknown; params?: Json; result?: Json; error?: unknown };
    if (typeof message.method === "string") {
      this.#serverRequest(message.method, message.id, message.params ?? {});
      return;
    }
    if (typeof message.id !== "number") {
      // An answer without an id: the server could not read a request far enough to know it. This
      // client writes only frames it checked, so the connection is not in the state it believes.
      const detail = "error" in message ? JSON.stringify(message.error) : line.slice(0, 200);
      this.#fail(new ProtocolError(`the server answered a request it could not read: ${detail}`));
      return;
    }
    const pending = this.#settle(message.id);
    if (!pending) return; // an answer to a call that timed out
    if ("error" in message && message.error != null) {
      try {
        pending.reject(MnemoError.fromWire(message.error));
      } catch (error) {
        pending.reject(error as Error);
      }
    } else if ("result" in message) {
      pending.resolve(message.result as Json);
    } else {
      pending.reject(new ProtocolError(`${pending.method}: the answer has neither result nor error`));
    }
  }

  /** A request or notification from the server: run its handler, answer a request by its id. */
  #serverRequest(method: string, id: unknown, params: Json): void {
    if (id === undefined || id === null) {
      this.onNotification(method, params);
      return;
    }
    const answer = (body: { result: Json } | { error: Json }) => {
      if (!this.dead) this.#transport.writable.write(JSON.stringify({ jsonrpc: JSONRPC, id, ...body }) + "\n");
    };
    let outcome: Json | Promise<Json> | undefined;
    try {
      outcome = this.onRequest(method, params);
    } catch (error) {
      answer({ error: handlerError(method, error) });
      return;
    }
    if (outcome === undefined) {
      answer({
        error: { code: METHOD_NOT_FOUND, message: `this client handles no ${JSON.stringify(method)}`, data: { reason: "method_not_found" } },
      });
      return;
    }
    Promise.resolve(outcome).then(
      (result) => answer({ result }),
      (error: unknown) => answer({ error: handlerError(method, error) }),
    );
  }
}

function handlerError(method: string, error: unknown): Json {
  const detail = error instanceof Error ? error.message : String(error);
  return { code: INTERNAL_ERROR, message: `${method} failed in the client: ${detail}`, data: { reason: "internal" } };
}

function placeholderServer(): InitializeResult {
  return {
    protocol_version: PROTOCOL_VERSION,
    server_name: "",
    server_version: "",
    store: "",
    pid: 0,
    methods: [],
    limits: {
      frame_bytes_max: HANDSHAKE_FRAME_BYTES_MAX,
      connection_calls_max: 1,
      calls_admitted_max: 1,
      connections_max: 1,
      idle_exit_secs: 0,
    },
  };
}

// Connecting --------------------------------------------------------------------------------------

type Options = { mnemoBin: string | undefined; clientName: string; startWaitMs: number; callTimeoutMs: number; serveArgs: string[] };

/** Connects (starting a server when the options say how) and initializes. */
async function open(store: string, options: Options): Promise<Connection> {
  const socketPath = join(store, SOCKET_NAME);
  const pathBytes = Buffer.byteLength(socketPath);
  if (pathBytes > SOCKET_PATH_BYTES_MAX) {
    throw new RangeError(
      `the socket path ${socketPath} is ${pathBytes} bytes; a Unix socket address holds at most ${SOCKET_PATH_BYTES_MAX}`,
    );
  }
  const deadline = Date.now() + options.startWaitMs;
  for (;;) {
    let socket = await tryConnect(socketPath);
    if (!socket) {
      if (options.mnemoBin === undefined) throw new NoServer(`no server answers on ${socketPath}`);
      const wait = Math.max(deadline - Date.now(), CONNECT_RETRY_MS);
      socket = await startAndConnect(options.mnemoBin, store, socketPath, wait, options.serveArgs);
    }
    const connection = new Connection(socketTransport(socket), options.callTimeoutMs);
    let failure: unknown;
    try {
      await initialize(connection, options.clientName);
      return connection;
    } catch (error) {
      void connection.close();
      // A server that is shutting down closes connections it has not served, or refuses them as
      // `shutting_down`; nothing ran, so connect again (a new server starts when it may).
      const again = error instanceof Lost || error instanceof Unsent || (error instanceof MnemoError && error.reason === "shutting_down");
      if (!again) throw error;
      failure = error;
    }
    if (Date.now() >= deadline) {
      throw new NoServer(`the server on ${socketPath} went away during the handshake: ${(failure as Error).message}`);
    }
    await sleep(CONNECT_RETRY_MS);
  }
}

/** The handshake: `initialize`, whose result gives the connection its server and limits. */
async function initialize(connection: Connection, clientName: string): Promise<void> {
  const result = await connection.request("initialize", { protocol_version: PROTOCOL_VERSION, client_name: clientName });
  const wrong = mismatch(result, RESULT_SCHEMAS.initialize);
  if (wrong) throw new ProtocolError(`initialize: ${wrong}`);
  connection.server = result as unknown as InitializeResult;
}

/**
 * The params of a method that reads a file by `path` (`import`, `capture`) with the path made
 * absolute in this process's working directory: the server reads it in its own, which is not ours.
 */
function withAbsolutePath(method: string, params: JsonObject): JsonObject {
  const path = params["path"];
  if ((method === "import" || method === "capture") && typeof path === "string") {
    return { ...params, path: resolve(path) };
  }
  return params;
}

function tryConnect(path: string): Promise<Socket | undefined> {
  return new Promise((resolveConnect, rejectConnect) => {
    const socket = createConnection({ path });
    const onError = (error: NodeJS.ErrnoException) => {
      socket.destroy();
      if (error.code === "ENOENT" || error.code === "ECONNREFUSED") resolveConnect(undefined);
      else rejectConnect(error);
    };
    socket.once("error", onError);
    socket.once("connect", () => {
      socket.off("error", onError);
      resolveConnect(socket);
    });
  });
}

/** A server this client started, its error output kept in a private temporary file. */
class Started {
  readonly child: ChildProcess;
  readonly #dir: string;
  readonly #stderr: number;
  #released = false;
  exit: string | undefined;

  constructor(mnemoBin: string, store: string, serveArgs: string[]) {
    this.#dir = mkdtempSync(join(tmpdir(), "mnemo-serve-"));
    this.#stderr = openSync(join(this.#dir, "stderr"), "w+", 0o600);
    // Its own session and process group: the server outlives this client and its terminal.
    this.child = spawn(mnemoBin, ["--store", store, "serve", ...serveArgs], {
      detached: true,
      stdio: ["ignore", "ignore", this.#stderr],
    });
    this.child.on("error", (error) => this.#exited(`not started: ${error.message}`));
    this.child.on("exit", (code, signal) => this.#exited(signal ? `killed by ${signal}` : `exit ${code}`));
  }

  #exited(status: string): void {
    if (this.exit !== undefined || this.#released) return;
    const buffer = Buffer.alloc(START_ERROR_BYTES_MAX);
    const read = readSync(this.#stderr, buffer, 0, START_ERROR_BYTES_MAX, 0);
    const output = buffer.subarray(0, read).toString("utf8").trim();
    this.exit = output ? `${status}: ${output}` : status;
    this.release();
  }

  /** Lets the server live on without this client waiting for it. */
  detach(): void {
    this.child.unref();
    this.release();
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    try {
      closeSync(this.#stderr);
    } catch {
      // already closed
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

async function startAndConnect(
  mnemoBin: string,
  store: string,
  socketPath: string,
  waitMs: number,
  serveArgs: string[],
): Promise<Socket> {
  const deadline = Date.now() + waitMs;
  let lastExit = "";
  for (;;) {
    const started = new Started(mnemoBin, store, serveArgs);
    while (started.exit === undefined) {
      const socket = await tryConnect(socketPath);
      if (socket) {
        started.detach();
        return socket;
      }
      if (Date.now() >= deadline) {
        started.child.kill("SIGKILL");
        started.release();
        const earlier = lastExit ? `; an earlier start ended: ${lastExit}` : "";
        throw new StartFailed(`${mnemoBin} serve did not answer on ${socketPath} within ${waitMs} ms${earlier}`);
      }
      await sleep(CONNECT_RETRY_MS);
    }
    lastExit = started.exit;
    // Another client's server may have won the store's lock: its socket appears shortly.
    const socket = await tryConnect(socketPath);
    if (socket) return socket;
    if (Date.now() + RESTART_MS >= deadline) {
      throw new StartFailed(`${mnemoBin} serve exited without answering on ${socketPath}: ${lastExit}`);
    }
    await sleep(RESTART_MS);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
