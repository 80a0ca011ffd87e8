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
  type ConnectOptions,
  type Expected,
  type NotificationHandler,
  type RequestHandler,
} from "./client.js";
export { ClientError, ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed, TimedOut } from "./errors.js";
export * from "./protocol.js";
