// What the client throws: the server's typed errors (`MnemoError`, match on `reason`) and its own
// failures to reach or understand a server.

import { REASONS, type ErrorData, type Reason } from "./protocol.js";

/** Anything this client throws about the server or the connection. */
export class ClientError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** No server answers on the store's socket, and no binary was given to start one. */
export class NoServer extends ClientError {}

/** A started server did not answer in time; the message holds its own error output. */
export class StartFailed extends ClientError {}

/**
 * The connection broke after a call that is not repeatable was sent (or the client was closed with
 * it outstanding): it may or may not have run. Read the store before sending it again.
 */
export class ConnectionLost extends ClientError {}

/** No answer came within the call timeout; the call may still run. */
export class TimedOut extends ClientError {}

/** The server answered something that is not what the protocol states. */
export class ProtocolError extends ClientError {}

/** The server's typed error: match on `reason`, never on the message. */
export class MnemoError extends ClientError {
  /** The JSON-RPC error class. */
  readonly code: number;
  /** What a program matches on; a reason this client does not know reads as `internal`. */
  readonly reason: Reason;
  /** The reason as the server sent it. */
  readonly wireReason: string;
  /** The error's `data` as sent. */
  readonly data: ErrorData;
  /** For `tool_refused`: the history tool's own reason. */
  readonly toolReason: string | undefined;
  /** For `conflict`: what the request expected. */
  readonly expected: string | undefined;
  /** For `conflict`: what the store holds. */
  readonly actual: string | undefined;
  /** For `frame_too_large` and `overloaded`: the limit reached. */
  readonly limit: number | undefined;
  /** For `unsupported_protocol_version`: the versions the server speaks. */
  readonly supported: number[] | undefined;
  /** The message for people, without the reason appended. */
  readonly serverMessage: string;

  constructor(code: number, message: string, data: ErrorData) {
    super(`${message} (${data.reason}, code ${code})`);
    this.code = code;
    this.serverMessage = message;
    this.wireReason = data.reason;
    this.reason = (REASONS as readonly string[]).includes(data.reason) ? data.reason : "internal";
    this.data = data;
    this.toolReason = data.tool_reason ?? undefined;
    this.expected = data.expected ?? undefined;
    this.actual = data.actual ?? undefined;
    this.limit = data.limit ?? undefined;
    this.supported = data.supported ?? undefined;
  }

  /** The error object of an answer, checked for the members the protocol states. */
  static fromWire(error: unknown): MnemoError {
    if (typeof error !== "object" || error === null || Array.isArray(error)) {
      throw new ProtocolError("the answer's error is not an object");
    }
    const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
    if (typeof data !== "object" || data === null || typeof (data as { reason?: unknown }).reason !== "string") {
      throw new ProtocolError(`the error ${JSON.stringify(error)} has no data.reason`);
    }
    if (!Number.isInteger(code) || typeof message !== "string") {
      throw new ProtocolError(`the error ${JSON.stringify(error)} lacks an integer code or a message`);
    }
    return new MnemoError(code as number, message, data as ErrorData);
  }
}
