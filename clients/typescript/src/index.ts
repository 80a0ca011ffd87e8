// The TypeScript client of the Mnemo store server (docs/PROTOCOL.md).

export {
  CALL_TIMEOUT_MS,
  CONNECT_RETRY_MS,
  Client,
  RESTART_MS,
  SOCKET_NAME,
  SOCKET_PATH_BYTES_MAX,
  START_ERROR_BYTES_MAX,
  START_WAIT_MS,
  STDIO_EXIT_WAIT_MS,
  UNCLAIMED_NOTIFICATIONS_MAX,
  type ConnectOptions,
  type Expected,
  type MemoryProposer,
  type NotificationHandler,
  type ProviderCompactor,
  type RequestHandler,
  type Seams,
  type SpawnOptions,
  type Subscription,
  type Summarizer,
} from "./client.js";
export { ClientError, ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed, TimedOut } from "./errors.js";
export * from "./protocol.js";
export * as records from "./records.js";
