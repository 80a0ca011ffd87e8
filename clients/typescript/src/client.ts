// A promise-based client of the Mnemo store server (`mnemo serve`; the protocol is docs/PROTOCOL.md):
// one connection to the store's Unix socket, the `initialize` handshake, pipelined calls matched by
// id, a new connection (and a new server when the client may start one) when the old one is gone,
// and handlers for requests the server sends to the client over the same connection.

import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readSync, rmSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { ClientError, ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed, TimedOut } from "./errors.js";
import {
  PROTOCOL_VERSION,
  REPEATABLE,
  RESULT_SCHEMAS,
  type AppendResult,
  type ContextParams,
  type ExpectedRevision,
  type ImportParams,
  type InitializeResult,
  type Json,
  type JsonObject,
  type MethodName,
  type Methods,
  type ReadHistoryParams,
  type ReadHistoryResult,
  type RecalledItem,
  type RememberResult,
  type SearchHistoryParams,
  type SearchHistoryResult,
  type SessionInfo,
  type WireRecord,
} from "./protocol.js";
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

/**
 * A handler of a request the server sends to the client (a model seam across the process boundary):
 * it gets the request's params and returns its result; a thrown error is answered as an error.
 */
export type RequestHandler = (params: Json) => Json | Promise<Json>;

/** A handler of a notification the server sends (no answer). */
export type NotificationHandler = (params: Json) => void;

/** `append`'s expected revision: `"any"`, `"no_stream"` or an exact revision. */
export type Expected = "any" | "no_stream" | number;

/** One initialized connection, with a new one made when it is gone. Call `close` when done. */
export class Client {
  /** What `initialize` answered: the server's version, its store, its pid and limits. */
  server: InitializeResult;
  readonly store: string;
  readonly #options: Options;
  #connection: Connection;
  #reconnecting: Promise<Connection> | undefined;
  #closed = false;
  readonly #requestHandlers = new Map<string, RequestHandler>();
  readonly #notificationHandlers = new Map<string, Set<NotificationHandler>>();

  private constructor(store: string, options: Options, connection: Connection) {
    this.store = store;
    this.#options = options;
    this.#connection = connection;
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
    const resolved = {
      mnemoBin: options.mnemoBin,
      clientName: options.clientName ?? "mnemo-client-typescript",
      startWaitMs: options.startWaitMs ?? START_WAIT_MS,
      callTimeoutMs: options.callTimeoutMs ?? CALL_TIMEOUT_MS,
      serveArgs: options.serveArgs ?? [],
    };
    const storePath = resolve(store);
    const connection = await open(storePath, resolved);
    return new Client(storePath, resolved, connection);
  }

  /** Closes the connection; calls still outstanding fail with `ConnectionLost`. */
  close(): void {
    this.#closed = true;
    this.#connection.close();
  }

  /**
   * Handles requests named `method` that the server sends over this connection (the model seams:
   * the server calls back while it runs a call of this client). Replaces an earlier handler.
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
  async call<M extends MethodName>(method: M, params: Methods[M]["params"]): Promise<Methods[M]["result"]> {
    const value = await this.#callWithRetry(method, params as unknown as JsonObject, REPEATABLE[method]);
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
      if (!again) throw error instanceof Lost ? lost(method) : error;
    }
    const fresh = await this.#reconnect(connection);
    try {
      return await fresh.request(method, params);
    } catch (error) {
      if (error instanceof Unsent) throw new ConnectionLost(`${method}: the new connection broke too: ${error.message}`);
      throw error instanceof Lost ? lost(method) : error;
    }
  }

  /** A new connection in place of `broken`, made once however many calls found it broken. */
  async #reconnect(broken: Connection): Promise<Connection> {
    if (this.#connection !== broken && !this.#connection.dead) return this.#connection;
    if (!this.#reconnecting) {
      broken.close();
      this.#reconnecting = open(this.store, this.#options).then(
        (connection) => {
          this.#reconnecting = undefined;
          if (this.#closed) {
            connection.close();
            throw new ConnectionLost("the client was closed while it reconnected");
          }
          this.#connection = connection;
          this.server = connection.server;
          this.#attach(connection);
          return connection;
        },
        (error: unknown) => {
          this.#reconnecting = undefined;
          throw error;
        },
      );
    }
    return this.#reconnecting;
  }

  #attach(connection: Connection): void {
    connection.onRequest = (method, params) => {
      const handler = this.#requestHandlers.get(method);
      return handler ? handler(params) : undefined;
    };
    connection.onNotification = (method, params) => {
      for (const handler of this.#notificationHandlers.get(method) ?? []) handler(params);
    };
    connection.keepAlive(this.#listening());
  }

  #listening(): boolean {
    return [...this.#notificationHandlers.values()].some((handlers) => handlers.size > 0);
  }

  // Typed methods --------------------------------------------------------------------------------

  async ping(): Promise<void> {
    await this.call("ping", {});
  }

  /**
   * Appends `records` to `stream` as one atomic batch if the stream is at `expectedRevision`; a
   * revision that does not hold rejects with `MnemoError` reason `conflict` (`expected`/`actual`
   * set) and appends nothing.
   */
  async append(stream: string, records: WireRecord[], expectedRevision: Expected = "any"): Promise<AppendResult> {
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
    return this.call("append", { stream, expected_revision: expected, records });
  }

  /** Imports a transcript file the server reads (`path`) or its `text`; resolves to the import report. */
  async importTranscript(params: ImportParams): Promise<JsonObject> {
    if ((params.path == null) === (params.text == null)) {
      throw new TypeError("importTranscript takes exactly one of path and text");
    }
    return this.call("import", present(params));
  }

  async sessions(): Promise<SessionInfo[]> {
    return this.call("history/sessions", {});
  }

  /** A session's visible messages (as of a position); `null` for an unknown session. */
  async transcript(session: string, asOf?: number): Promise<JsonObject | null> {
    return this.call("history/transcript", present({ session, as_of: asOf }));
  }

  /** The SearchHistory tool. */
  async search(query: string, options: Omit<SearchHistoryParams, "query"> = {}): Promise<SearchHistoryResult> {
    return this.call("history/search", present({ query, ...options }));
  }

  /** The ReadHistory tool. */
  async read(sessionId: string, options: Omit<ReadHistoryParams, "session_id"> = {}): Promise<ReadHistoryResult> {
    return this.call("history/read", present({ session_id: sessionId, ...options }));
  }

  /** The RecallMemory tool for the session's workspace. */
  async recall(session: string, query: string, limit?: number): Promise<RecalledItem[]> {
    return this.call("memory/recall", present({ session, query, limit }));
  }

  /** Stores what the user of `session` explicitly asked to remember. */
  async remember(session: string, toolCall?: string): Promise<RememberResult> {
    return this.call("memory/remember", present({ session, tool_call: toolCall }));
  }

  /** One memory item, or `null`. */
  async memoryGet(item: string): Promise<JsonObject | null> {
    return this.call("memory/get", { item });
  }

  /** The history the session's next provider request would receive, with its checkpoint and diagnostics. */
  async context(session: string, options: Omit<ContextParams, "session"> = {}): Promise<JsonObject> {
    return this.call("compaction/context", present({ session, ...options }));
  }

  /** Envelopes of the log from position `from` (default 1). */
  async log(options: { from?: number; limit?: number } = {}): Promise<JsonObject[]> {
    return this.call("log", present(options));
  }

  async stats(): Promise<JsonObject> {
    return this.call("stats", {});
  }

  async verify(): Promise<JsonObject> {
    return this.call("verify", {});
  }

  /** Stops the server gracefully: running calls finish, then the store closes. */
  async shutdown(): Promise<void> {
    await this.call("shutdown", {});
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

/** A socket speaking the protocol: frames out, answers matched to their calls by id. */
class Connection {
  server: InitializeResult;
  dead = false;
  onRequest: (method: string, params: Json) => Json | Promise<Json> | undefined = () => undefined;
  onNotification: (method: string, params: Json) => void = () => {};
  readonly #socket: Socket;
  readonly #callTimeoutMs: number;
  readonly #pending = new Map<number, Pending>();
  /** Calls waiting for room under the server's per-connection limit. */
  readonly #waiting: Array<() => void> = [];
  #chunks: Buffer[] = [];
  #buffered = 0;
  #nextId = 1;
  #keepAlive = false;

  constructor(socket: Socket, callTimeoutMs: number) {
    this.#socket = socket;
    this.#callTimeoutMs = callTimeoutMs;
    this.server = placeholderServer();
    socket.on("data", (chunk: Buffer) => this.#receive(chunk));
    socket.on("error", () => this.#fail(new Lost("the connection failed")));
    socket.on("close", () => this.#fail(new Lost("the server closed the connection")));
    this.#updateRef();
  }

  /** Keeps the process alive while nothing is pending (a client following notifications). */
  keepAlive(on: boolean): void {
    this.#keepAlive = on;
    this.#updateRef();
  }

  close(): void {
    this.#fail(new ConnectionLost("the client closed the connection"));
    this.#socket.destroy();
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
      this.#socket.write(frame + "\n", (error) => {
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
    if (this.#pending.size > 0 || this.#keepAlive) this.#socket.ref();
    else this.#socket.unref();
  }

  #fail(error: Error): void {
    if (this.dead) return;
    this.dead = true;
    for (const id of [...this.#pending.keys()]) this.#settle(id)?.reject(error);
    for (const resume of this.#waiting.splice(0)) resume();
    this.#socket.destroy();
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
      if (!this.dead) this.#socket.write(JSON.stringify({ jsonrpc: JSONRPC, id, ...body }) + "\n");
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
    const connection = new Connection(socket, options.callTimeoutMs);
    let failure: unknown;
    try {
      const result = await connection.request("initialize", {
        protocol_version: PROTOCOL_VERSION,
        client_name: options.clientName,
      });
      const wrong = mismatch(result, RESULT_SCHEMAS.initialize);
      if (wrong) throw new ProtocolError(`initialize: ${wrong}`);
      connection.server = result as unknown as InitializeResult;
      return connection;
    } catch (error) {
      connection.close();
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
        throw new StartFailed(`${mnemoBin} serve did not answer on ${socketPath} within ${waitMs} ms`);
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

/** The params without members that are `undefined` or `null` (absent is the protocol's default). */
function present<T extends object>(params: T): T {
  return Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined && value !== null)) as T;
}
