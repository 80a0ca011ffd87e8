"""A blocking client of the Mnemo store server: one connection to the store's Unix socket, the
``initialize`` handshake, and one typed method per protocol method it covers (``docs/PROTOCOL.md``).

Start a server when none answers by giving the ``mnemo`` binary: the client runs
``mnemo --store STORE serve`` in its own session (detached, as the Rust client does), polls the
socket, starts it again when one it started exited (another process won the store's lock and then
went away), and gives up after :data:`START_WAIT_SECS` with the server's own error output.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional, Union

from .errors import ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed
from .types import (
    AppendResult,
    ExpectedRevision,
    InitializeResult,
    JsonObject,
    ReadHistoryResult,
    RecalledItem,
    RememberResult,
    SearchHistoryResult,
    SessionInfo,
    ToolContext,
    WireError,
    WireRecord,
    from_wire,
    to_wire,
)

#: The protocol version this client speaks.
PROTOCOL_VERSION = 1
#: The socket's name inside the store directory.
SOCKET_NAME = "server.sock"
#: Longest socket path a Unix socket address holds, in bytes.
SOCKET_PATH_BYTES_MAX = 107
#: How often a starting client looks for the socket.
CONNECT_RETRY_SECS = 0.025
#: How long after a server it started exited a client starts another.
RESTART_SECS = 0.2
#: How long a client waits for a server it started to answer.
START_WAIT_SECS = 20.0
#: How long one call may take before the client reports a timeout (the server's own bound).
CALL_TIMEOUT_SECS = 600.0
#: Most bytes of the started server's error output kept for a failure message.
START_ERROR_BYTES_MAX = 8192

PathLike = Union[str, "os.PathLike[str]"]


class Client:
    """One initialized connection. Use as a context manager, or call :meth:`close`."""

    def __init__(self, sock: socket.socket, server: InitializeResult) -> None:
        self._socket = sock
        self._reader = sock.makefile("rb")
        self._ids = itertools.count(1)
        self.server = server
        """What ``initialize`` answered: the server's version, its store, its pid and limits."""

    # Connecting -----------------------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        store: PathLike,
        *,
        mnemo_bin: Optional[PathLike] = None,
        client_name: str = "mnemo-client-python",
        start_wait_secs: float = START_WAIT_SECS,
        serve_args: tuple[str, ...] = (),
    ) -> "Client":
        """Connects to the server of ``store``; with ``mnemo_bin``, starts one when none answers.

        Raises :class:`NoServer` when none answers and no binary is given, :class:`StartFailed` when
        a started server did not answer in time, :class:`MnemoError` when the handshake is refused.
        """
        store_path = Path(os.path.abspath(store))
        socket_path = store_path / SOCKET_NAME
        if len(os.fsencode(socket_path)) > SOCKET_PATH_BYTES_MAX:
            raise ValueError(
                f"the socket path {socket_path} is {len(os.fsencode(socket_path))} bytes; "
                f"a Unix socket address holds at most {SOCKET_PATH_BYTES_MAX}"
            )
        deadline = time.monotonic() + start_wait_secs
        while True:
            sock = _try_connect(socket_path)
            if sock is None:
                if mnemo_bin is None:
                    raise NoServer(f"no server answers on {socket_path}")
                wait = max(deadline - time.monotonic(), CONNECT_RETRY_SECS)
                sock = _start_and_connect(Path(mnemo_bin), store_path, socket_path, wait, serve_args)
            try:
                return cls._handshake(sock, client_name)
            except (ConnectionError, ConnectionLost) as error:
                # A server that is shutting down closes connections it has not served; nothing ran.
                sock.close()
                lost: BaseException = error
            except MnemoError as error:
                sock.close()
                if error.reason != "shutting_down":
                    raise
                lost = error
            except BaseException:
                sock.close()
                raise
            if time.monotonic() >= deadline:
                raise NoServer(f"the server on {socket_path} went away during the handshake: {lost}")
            time.sleep(CONNECT_RETRY_SECS)

    @classmethod
    def _handshake(cls, sock: socket.socket, client_name: str) -> "Client":
        sock.settimeout(CALL_TIMEOUT_SECS)
        client = cls(sock, _placeholder_server())
        result = client.call(
            "initialize", {"protocol_version": PROTOCOL_VERSION, "client_name": client_name}
        )
        client.server = _typed(InitializeResult, result, "initialize")
        return client

    def close(self) -> None:
        self._reader.close()
        self._socket.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The raw call ---------------------------------------------------------------------------------

    def call(self, method: str, params: Optional[JsonObject] = None) -> Any:
        """Sends one request and returns its ``result`` (decoded JSON), or raises :class:`MnemoError`
        with the server's typed reason."""
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        limit = self.server.limits.frame_bytes_max
        if len(data) > limit:
            raise ValueError(
                f"{method}: the request is {len(data)} bytes; the server takes frames of at most {limit}"
            )
        self._socket.sendall(data)
        while True:
            line = self._reader.readline()
            if not line:
                raise ConnectionLost(f"{method}: the server closed the connection before answering")
            if not line.strip():
                continue
            try:
                answer = json.loads(line)
            except json.JSONDecodeError as error:
                raise ProtocolError(f"{method}: the answer is not JSON: {error}") from None
            if not isinstance(answer, dict):
                raise ProtocolError(f"{method}: the answer is not a JSON object")
            if answer.get("id") != request_id:
                if answer.get("id") is None and "error" in answer:
                    raise MnemoError.from_wire(answer["error"])
                continue
            if "error" in answer:
                raise MnemoError.from_wire(answer["error"])
            if "result" not in answer:
                raise ProtocolError(f"{method}: the answer has neither result nor error")
            return answer["result"]

    # Typed methods --------------------------------------------------------------------------------

    def ping(self) -> None:
        self.call("ping")

    def append(
        self, stream: str, records: list[WireRecord], expected_revision: ExpectedRevision = "any"
    ) -> AppendResult:
        """Appends ``records`` to ``stream`` as one atomic batch if the stream is at
        ``expected_revision``; a revision that does not hold raises :class:`MnemoError` with reason
        ``conflict`` (``expected``/``actual`` set) and appends nothing."""
        expected: Any = expected_revision
        if isinstance(expected_revision, int) and not isinstance(expected_revision, bool):
            expected = {"exact": expected_revision}
        elif expected_revision not in ("any", "no_stream"):
            raise ValueError(f"expected_revision {expected_revision!r} is not 'any', 'no_stream' or an int")
        params = {"stream": stream, "expected_revision": expected, "records": to_wire(records)}
        return _typed(AppendResult, self.call("append", params), "append")

    def import_transcript(
        self,
        *,
        path: Optional[PathLike] = None,
        text: Optional[str] = None,
        source: Optional[str] = None,
        format: Optional[str] = None,
    ) -> JsonObject:
        """Imports a transcript file the server reads (``path``) or its ``text``; returns the import
        report."""
        if (path is None) == (text is None):
            raise ValueError("import_transcript takes exactly one of path and text")
        params = {
            "path": None if path is None else os.fspath(path),
            "text": text,
            "source": source,
            "format": format,
        }
        return _object(self.call("import", _present(params)), "import")

    def sessions(self) -> list[SessionInfo]:
        return _typed(list[SessionInfo], self.call("history/sessions"), "history/sessions")

    def search(
        self,
        query: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        context: Optional[ToolContext] = None,
        as_of: Optional[int] = None,
    ) -> SearchHistoryResult:
        params = {
            "query": query,
            "limit": limit,
            "cursor": cursor,
            "context": to_wire(context) if context else None,
            "as_of": as_of,
        }
        return _typed(SearchHistoryResult, self.call("history/search", _present(params)), "history/search")

    def read(
        self,
        session_id: str,
        *,
        message_id: Optional[str] = None,
        turn_id: Optional[str] = None,
        before: Optional[int] = None,
        after: Optional[int] = None,
        context: Optional[ToolContext] = None,
        as_of: Optional[int] = None,
    ) -> ReadHistoryResult:
        params = {
            "session_id": session_id,
            "message_id": message_id,
            "turn_id": turn_id,
            "before": before,
            "after": after,
            "context": to_wire(context) if context else None,
            "as_of": as_of,
        }
        return _typed(ReadHistoryResult, self.call("history/read", _present(params)), "history/read")

    def recall(self, session: str, query: str, *, limit: Optional[int] = None) -> list[RecalledItem]:
        params = {"session": session, "query": query, "limit": limit}
        return _typed(list[RecalledItem], self.call("memory/recall", _present(params)), "memory/recall")

    def remember(self, session: str, *, tool_call: Optional[str] = None) -> RememberResult:
        params = {"session": session, "tool_call": tool_call}
        return _typed(RememberResult, self.call("memory/remember", _present(params)), "memory/remember")

    def log(self, *, start: Optional[int] = None, limit: Optional[int] = None) -> list[JsonObject]:
        """Envelopes of the log from position ``start`` (default 1)."""
        result = self.call("log", _present({"from": start, "limit": limit}))
        if not isinstance(result, list) or not all(isinstance(e, dict) for e in result):
            raise ProtocolError("log: the result is not an array of objects")
        return result

    def stats(self) -> JsonObject:
        return _object(self.call("stats"), "stats")

    def shutdown(self) -> None:
        """Stops the server gracefully: running calls finish, then the store closes."""
        self.call("shutdown")


# Helpers ------------------------------------------------------------------------------------------


def _present(params: dict[str, Any]) -> JsonObject:
    return {k: v for k, v in params.items() if v is not None}


def _typed(tp: Any, value: Any, method: str) -> Any:
    try:
        return from_wire(tp, value, method)
    except WireError as error:
        raise ProtocolError(f"the result of {error}") from None


def _object(value: Any, method: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ProtocolError(f"{method}: the result is not a JSON object")
    return value


def _placeholder_server() -> InitializeResult:
    # Before the handshake only `initialize` is sent; its frame is far below any frame limit.
    from .types import Limits

    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        server_name="",
        server_version="",
        store="",
        pid=0,
        methods=[],
        limits=Limits(
            frame_bytes_max=64 * 1024,
            connection_calls_max=1,
            calls_admitted_max=1,
            connections_max=1,
            idle_exit_secs=0,
        ),
    )


def _try_connect(socket_path: Path) -> Optional[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(socket_path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    return sock


def _start_and_connect(
    mnemo_bin: Path,
    store: Path,
    socket_path: Path,
    wait_secs: float,
    serve_args: tuple[str, ...],
) -> socket.socket:
    deadline = time.monotonic() + wait_secs
    errors: list[str] = []
    while True:
        with tempfile.TemporaryFile() as stderr:
            process = subprocess.Popen(
                [os.fspath(mnemo_bin), "--store", os.fspath(store), "serve", *serve_args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
            while True:
                sock = _try_connect(socket_path)
                if sock is not None:
                    # The server lives on; the client does not wait for it.
                    _detach(process)
                    return sock
                code = process.poll()
                if code is not None:
                    stderr.seek(0)
                    output = stderr.read(START_ERROR_BYTES_MAX).decode(errors="replace").strip()
                    errors.append(f"exit {code}: {output}" if output else f"exit {code}")
                    break
                if time.monotonic() >= deadline:
                    process.kill()
                    process.wait()
                    raise StartFailed(
                        f"{mnemo_bin} serve did not answer on {socket_path} within {wait_secs} s"
                    )
            if time.monotonic() + RESTART_SECS >= deadline:
                raise StartFailed(
                    f"{mnemo_bin} serve exited without answering on {socket_path}: {errors[-1]}"
                )
            time.sleep(RESTART_SECS)


def _detach(process: subprocess.Popen[bytes]) -> None:
    # The started server outlives this connection; a thread waits for it so that it is reaped when
    # it exits while this process lives on.
    threading.Thread(target=process.wait, name="mnemo-serve-reaper", daemon=True).start()
