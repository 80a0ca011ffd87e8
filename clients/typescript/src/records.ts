// Records in `append`'s wire form (docs/FORMAT.md), for the messages a host appends most: a
// session's opening, a text message of a turn, a tool call and its result, and a turn's end. Any
// other record is a `WireRecord` built from its kind and payload.

import type { Json, JsonObject, WireRecord } from "./protocol.js";

/** Who says a text message. */
export type Speaker = "user" | "assistant";

/** A `session_opened` record: the session's workspace and its memory setting. */
export function sessionOpened(
  session: string,
  options: { workspace?: string; incognito?: boolean; memory?: "enabled" | "disabled"; subagent?: boolean; title?: string } = {},
): WireRecord {
  const record: JsonObject = {
    session,
    incognito: options.incognito ?? false,
    memory: options.memory ?? "enabled",
    subagent: options.subagent ?? false,
  };
  if (options.workspace !== undefined) record.workspace = options.workspace;
  if (options.title !== undefined) record.title = options.title;
  return { kind: "session_opened", record };
}

/**
 * A `runtime_event` carrying one text message of `turn`, said by the user or the model. `eventId`
 * is the event's identity (a retry with the same id is recognised, not repeated).
 */
export function textMessage(
  session: string,
  turn: string,
  eventId: string,
  speaker: Speaker,
  text: string,
  timestampMs: number,
  run?: string,
): WireRecord {
  const [role, author] = speaker === "user" ? ["user", "user"] : ["model", "agent"];
  return event(session, turn, eventId, role, author, { kind: "text", text }, timestampMs, run);
}

/** A `runtime_event` of the model calling tool `name` with `args` (its call id pairs it with the result). */
export function toolCall(
  session: string,
  turn: string,
  eventId: string,
  callId: string,
  name: string,
  args: Json,
  timestampMs: number,
  run?: string,
): WireRecord {
  return event(session, turn, eventId, "model", "agent", { kind: "function_call", id: callId, name, args }, timestampMs, run);
}

/** A `runtime_event` of tool `name`'s result for the call `callId`. */
export function toolResult(
  session: string,
  turn: string,
  eventId: string,
  callId: string,
  name: string,
  result: Json,
  timestampMs: number,
  options: { run?: string; isError?: boolean } = {},
): WireRecord {
  const content: JsonObject = { kind: "function_response", id: callId, name, result };
  if (options.isError) content.isError = true;
  return event(session, turn, eventId, "tool", "tool", content, timestampMs, options.run);
}

/** A `turn_ended` record: `completed`, `failed`, `aborted` or `cancelled`. */
export function turnEnded(session: string, turn: string, status = "completed"): WireRecord {
  return { kind: "turn_ended", record: { session, turn, status } };
}

function event(
  session: string,
  turn: string,
  eventId: string,
  role: string,
  author: string,
  content: JsonObject,
  timestampMs: number,
  run: string | undefined,
): WireRecord {
  const runId = run ?? `run-${turn}`;
  return {
    kind: "runtime_event",
    record: {
      id: eventId,
      invocationId: runId,
      runId,
      sessionId: session,
      turnId: turn,
      ts: timestampMs,
      role,
      author,
      partial: false,
      content,
    },
  };
}
