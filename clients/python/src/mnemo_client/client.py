"""Clients of the Mnemo store server — :class:`Client` (blocking) and :class:`AsyncClient` (asyncio)
— on the store's Unix socket or on a ``mnemo serve --stdio`` child: the ``initialize`` handshake,
one typed method per protocol method (``docs/PROTOCOL.md``), the model seams the server calls back
(:mod:`mnemo_client.seams`), and the tail subscription's notifications.

Start a server when none answers by giving the ``mnemo`` binary: the client runs
``mnemo --store STORE serve`` in its own session (detached, as the Rust client does), polls the
socket, starts it again when one it started exited (another process won the store's lock and then
went away), and gives up after :data:`START_WAIT_SECS` with the server's own error output.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional, Union

from . import seams
from .decode import Decode, typed
from .errors import ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed
from .methods import ProtocolMethods
from .types import (
    AppendedParams,
    AppendResult,
    ExpectedRevision,
    InitializeResult,
    JsonObject,
    RegisterSeamsResult,
    WireRecord,
    from_wire,
)
from .decode import present

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



class _Methods(ProtocolMethods):
    """The typed methods, shared by :class:`Client` (each returns its result) and
    :class:`AsyncClient` (each returns an awaitable of it). Every method but those below is
    generated from the schema into :mod:`mnemo_client.methods`."""

    def _set_handlers(self, handlers: dict[str, seams.Handler]) -> None:
        raise NotImplementedError

    def append(
        self,
        stream: str,
        records: list[WireRecord],
        expected_revision: ExpectedRevision = "any",
        *,
        durability: Optional[str] = None,
    ) -> Any:
        """Appends ``records`` to ``stream`` as one atomic batch if the stream is at
        ``expected_revision``; returns :class:`AppendResult` (positions and the new revision). A
        revision that does not hold raises :class:`MnemoError` with reason ``conflict``
        (``expected``/``actual`` set) and appends nothing. ``durability`` (``buffered``,
        ``sync_data``, ``sync_all``) overrides the store's for this batch."""
        expected: Any = expected_revision
        if isinstance(expected_revision, int) and not isinstance(expected_revision, bool):
            expected = {"exact": expected_revision}
        elif expected_revision not in ("any", "no_stream"):
            raise ValueError(f"expected_revision {expected_revision!r} is not 'any', 'no_stream' or an int")
        params = {"stream": stream, "expected_revision": expected, "records": records, "durability": durability}
        return self._invoke("append", present(params), typed(AppendResult, "append"))

    def register_seams(
        self,
        *,
        summarizer: Optional[seams.Summarizer] = None,
        provider_compactor: Optional[seams.ProviderCompactor] = None,
        memory_proposer: Optional[seams.MemoryProposer] = None,
        timeout_ms: Optional[int] = None,
    ) -> Any:
        """Registers this connection's model seams (replacing earlier ones): the server calls them
        back over this connection while it compacts or extracts. Returns
        :class:`RegisterSeamsResult`."""
        self._set_handlers(seams.handlers(summarizer, provider_compactor, memory_proposer))
        params = seams.registration(summarizer, provider_compactor, memory_proposer, timeout_ms)
        return self._invoke("seams/register", params, typed(RegisterSeamsResult, "seams/register"))


class Client(_Methods):
    """One initialized, blocking connection: to the store's socket (:meth:`connect`) or to a server
    this process spawned on standard input and output (:meth:`spawn`). Use as a context manager, or
    call :meth:`close`. Not for use by several threads at once."""

    def __init__(
        self,
        reader: BinaryIO,
        write: Callable[[bytes], None],
        close: Callable[[], None],
        server: InitializeResult,
        sock: Optional[socket.socket] = None,
    ) -> None:
        self._reader = reader
        self._write = write
        self._closer = close
        self._socket = sock
        self._ids = itertools.count(1)
        self._handlers: dict[str, seams.Handler] = {}
        self._notifications: collections.deque[AppendedParams] = collections.deque()
        self._answers: dict[int, JsonObject] = {}
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
        store_path, socket_path = _socket_path(store)
        deadline = time.monotonic() + start_wait_secs
        while True:
            sock = _connect_or_start(store_path, socket_path, mnemo_bin, deadline, serve_args)
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
        reader = sock.makefile("rb")

        def close() -> None:
            reader.close()
            sock.close()

        client = cls(reader, sock.sendall, close, _placeholder_server(), sock)
        client._initialize(client_name)
        return client

    @classmethod
    def spawn(
        cls,
        store: PathLike,
        *,
        mnemo_bin: PathLike,
        client_name: str = "mnemo-client-python",
        serve_args: tuple[str, ...] = (),
    ) -> "Client":
        """Starts ``mnemo --store STORE serve --stdio`` as a child that serves this client alone on
        its standard input and output: this process owns the store until :meth:`close` (which
        closes the child's input; the child answers what it admitted, closes the store and exits).

        Raises :class:`StartFailed` with the child's error output when it exits without answering
        (another process owns the store, for example)."""
        stderr = tempfile.TemporaryFile()
        process = subprocess.Popen(
            [os.fspath(mnemo_bin), "--store", os.fspath(store), "serve", "--stdio", *serve_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        def close() -> None:
            try:
                stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout=STDIO_EXIT_WAIT_SECS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            stdout.close()
            stderr.close()

        client = cls(stdout, write, close, _placeholder_server())
        try:
            client._initialize(client_name)
        except (ConnectionLost, BrokenPipeError) as error:
            process.wait()
            stderr.seek(0)
            output = stderr.read(START_ERROR_BYTES_MAX).decode(errors="replace").strip()
            client.close()
            raise StartFailed(f"{mnemo_bin} serve --stdio exited ({process.returncode}): {output or error}") from None
        return client

    def _initialize(self, client_name: str) -> None:
        result = self.call("initialize", {"protocol_version": PROTOCOL_VERSION, "client_name": client_name})
        self.server = typed(InitializeResult, "initialize")(result)

    def close(self) -> None:
        self._closer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The raw call ---------------------------------------------------------------------------------

    def call(self, method: str, params: Optional[JsonObject] = None) -> Any:
        """Sends one request and returns its ``result`` (decoded JSON), or raises :class:`MnemoError`
        with the server's typed reason. Requests the server sends meanwhile (the registered seams)
        are answered, and notifications kept for :meth:`appended`."""
        request_id = next(self._ids)
        params = _with_absolute_path(method, params or {})
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._send(frame, method)
        while True:
            answer = self._answers.pop(request_id, None) or self._next_frame(method)
            if answer is None:
                continue
            if answer.get("id") != request_id:
                if answer.get("id") is None and "error" in answer:
                    raise MnemoError.from_wire(answer["error"])
                # The answer to an outer call, read by a call a seam handler made: kept for it.
                if isinstance(answer.get("id"), int):
                    self._answers[answer["id"]] = answer
                continue
            if "error" in answer:
                raise MnemoError.from_wire(answer["error"])
            if "result" not in answer:
                raise ProtocolError(f"{method}: the answer has neither result nor error")
            return answer["result"]

    def appended(self, timeout: Optional[float] = None) -> AppendedParams:
        """The next ``log/appended`` notification of this connection's subscriptions, waiting for it
        (at most ``timeout`` seconds on a socket connection: then :class:`TimeoutError`). Seam
        requests that arrive meanwhile are answered."""
        if timeout is not None and self._socket is None:
            raise ValueError("appended(timeout=...) needs a socket connection; a spawned server's pipe has none")
        if timeout is not None and self._socket is not None:
            self._socket.settimeout(timeout)
        try:
            while not self._notifications:
                frame = self._next_frame("log/appended")
                if frame is not None:
                    raise ProtocolError(f"an answer to no call of this client: {frame!r}")
        except socket.timeout:
            raise TimeoutError(f"no log/appended notification within {timeout} s") from None
        finally:
            if timeout is not None and self._socket is not None:
                self._socket.settimeout(CALL_TIMEOUT_SECS)
        return self._notifications.popleft()

    def _invoke(self, method: str, params: Optional[JsonObject], decode: Decode) -> Any:
        return decode(self.call(method, params))

    def _set_handlers(self, handlers: dict[str, seams.Handler]) -> None:
        self._handlers = handlers

    def _send(self, frame: JsonObject, method: str) -> None:
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        limit = self.server.limits.frame_bytes_max
        if len(data) > limit:
            raise ValueError(
                f"{method}: the request is {len(data)} bytes; the server takes frames of at most {limit}"
            )
        self._write(data)

    def _next_frame(self, method: str) -> Optional[JsonObject]:
        """Reads one frame: an answer is returned; a server request is answered and a notification
        kept (both give ``None``)."""
        line = self._reader.readline()
        if not line:
            raise ConnectionLost(f"{method}: the server closed the connection before answering")
        if not line.strip():
            return None
        try:
            frame = json.loads(line)
        except json.JSONDecodeError as error:
            raise ProtocolError(f"{method}: the answer is not JSON: {error}") from None
        if not isinstance(frame, dict):
            raise ProtocolError(f"{method}: the answer is not a JSON object")
        if "method" not in frame:
            return frame
        if "id" in frame:
            self._send(_serve_request(self._handlers, frame, run_awaitable=_run_coroutine), frame["method"])
        else:
            _keep_notification(self._notifications, frame)
        return None


class AsyncClient(_Methods):
    """One initialized asyncio connection: the same methods as :class:`Client`, each a coroutine;
    calls may run concurrently (pipelined, matched by id). Seam handlers may be coroutines. Use as
    an async context manager, or await :meth:`aclose`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: Any,
        process: Optional[asyncio.subprocess.Process] = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._process = process
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._handlers: dict[str, seams.Handler] = {}
        self._notifications: asyncio.Queue[AppendedParams] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lost: Optional[BaseException] = None
        self._write_lock = asyncio.Lock()
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        self.server = _placeholder_server()

    @classmethod
    async def connect(
        cls,
        store: PathLike,
        *,
        mnemo_bin: Optional[PathLike] = None,
        client_name: str = "mnemo-client-python",
        start_wait_secs: float = START_WAIT_SECS,
        serve_args: tuple[str, ...] = (),
    ) -> "AsyncClient":
        """As :meth:`Client.connect` (finding or starting the server runs in a worker thread)."""
        store_path, socket_path = _socket_path(store)
        deadline = time.monotonic() + start_wait_secs
        while True:
            sock = await asyncio.to_thread(_connect_or_start, store_path, socket_path, mnemo_bin, deadline, serve_args)
            sock.setblocking(False)
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=_STREAM_LIMIT)
            client = cls(reader, writer)
            try:
                await client._initialize(client_name)
                return client
            except (ConnectionError, ConnectionLost) as error:
                lost: BaseException = error
            except MnemoError as error:
                if error.reason != "shutting_down":
                    await client.aclose()
                    raise
                lost = error
            await client.aclose()
            if time.monotonic() >= deadline:
                raise NoServer(f"the server on {socket_path} went away during the handshake: {lost}")
            await asyncio.sleep(CONNECT_RETRY_SECS)

    @classmethod
    async def spawn(
        cls,
        store: PathLike,
        *,
        mnemo_bin: PathLike,
        client_name: str = "mnemo-client-python",
        serve_args: tuple[str, ...] = (),
    ) -> "AsyncClient":
        """As :meth:`Client.spawn`: a child ``mnemo serve --stdio`` that serves this client alone."""
        stderr = tempfile.TemporaryFile()
        process = await asyncio.create_subprocess_exec(
            os.fspath(mnemo_bin), "--store", os.fspath(store), "serve", "--stdio", *serve_args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            limit=_STREAM_LIMIT,
        )
        assert process.stdout is not None and process.stdin is not None
        client = cls(process.stdout, process.stdin, process)
        try:
            await client._initialize(client_name)
        except (ConnectionLost, ConnectionError) as error:
            await process.wait()
            stderr.seek(0)
            output = stderr.read(START_ERROR_BYTES_MAX).decode(errors="replace").strip()
            stderr.close()
            await client.aclose()
            raise StartFailed(f"{mnemo_bin} serve --stdio exited ({process.returncode}): {output or error}") from None
        stderr.close()
        return client

    async def _initialize(self, client_name: str) -> None:
        result = await self.call("initialize", {"protocol_version": PROTOCOL_VERSION, "client_name": client_name})
        self.server = typed(InitializeResult, "initialize")(result)

    async def aclose(self) -> None:
        """Closes the connection (a spawned server then answers what it admitted and exits)."""
        try:
            self._writer.close()
            if hasattr(self._writer, "wait_closed"):
                await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        if self._process is not None:
            try:
                await asyncio.wait_for(self._process.wait(), STDIO_EXIT_WAIT_SECS)
            except asyncio.TimeoutError:
                self._process.kill()
                await self._process.wait()
        self._read_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(self._read_task, *self._tasks, return_exceptions=True)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def call(self, method: str, params: Optional[JsonObject] = None) -> Any:
        """Sends one request and awaits its ``result``, or raises :class:`MnemoError`."""
        if self._lost is not None:
            raise ConnectionLost(f"{method}: the connection is closed: {self._lost}")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            params = _with_absolute_path(method, params or {})
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, method)
            return await asyncio.wait_for(future, CALL_TIMEOUT_SECS)
        finally:
            self._pending.pop(request_id, None)

    async def appended(self) -> AppendedParams:
        """The next ``log/appended`` notification of this connection's subscriptions."""
        return await self._notifications.get()

    def _invoke(self, method: str, params: Optional[JsonObject], decode: Decode) -> Any:
        async def run() -> Any:
            return decode(await self.call(method, params))

        return run()

    def _set_handlers(self, handlers: dict[str, seams.Handler]) -> None:
        self._handlers = handlers

    async def _send(self, frame: JsonObject, method: str) -> None:
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        limit = self.server.limits.frame_bytes_max
        if len(data) > limit:
            raise ValueError(
                f"{method}: the request is {len(data)} bytes; the server takes frames of at most {limit}"
            )
        async with self._write_lock:
            self._writer.write(data)
            await self._writer.drain()

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    raise ConnectionLost("the server closed the connection")
                if not line.strip():
                    continue
                frame = json.loads(line)
                if not isinstance(frame, dict):
                    raise ProtocolError("a frame is not a JSON object")
                if "method" in frame and "id" in frame:
                    task = asyncio.get_running_loop().create_task(self._answer(frame))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                elif "method" in frame:
                    _keep_notification(self._notifications, frame)
                else:
                    self._route(frame)
        except asyncio.CancelledError:
            self._fail(ConnectionLost("the client closed the connection"))
            raise
        except (ConnectionLost, ProtocolError, ValueError, OSError) as error:
            self._fail(error if isinstance(error, (ConnectionLost, ProtocolError)) else ConnectionLost(str(error)))

    def _route(self, frame: JsonObject) -> None:
        request_id = frame.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, int) else None
        if future is None:
            if request_id is None and "error" in frame:
                # A frame the server could not read far enough to know its id: fail every call.
                error = MnemoError.from_wire(frame["error"])
                for waiting in list(self._pending.values()):
                    if not waiting.done():
                        waiting.set_exception(error)
            return
        if future.done():
            return
        if "error" in frame:
            future.set_exception(MnemoError.from_wire(frame["error"]))
        elif "result" in frame:
            future.set_result(frame["result"])
        else:
            future.set_exception(ProtocolError("an answer has neither result nor error"))

    def _fail(self, error: BaseException) -> None:
        self._lost = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionLost(str(error)))

    async def _answer(self, frame: JsonObject) -> None:
        answer = _serve_request(self._handlers, frame, run_awaitable=None)
        if inspect.isawaitable(answer):
            answer = await answer
        try:
            await self._send(answer, str(frame.get("method")))
        except (ConnectionError, OSError):
            pass


#: Line limit of the asyncio streams: a frame and its newline.
_STREAM_LIMIT = 8 * 1024 * 1024 + 2
#: How long closing a spawned server waits for it to exit before killing it.
STDIO_EXIT_WAIT_SECS = 60.0


def _serve_request(handlers: dict[str, seams.Handler], frame: JsonObject, run_awaitable: Any) -> Any:
    """The answer frame to a server request (an awaitable of it when the handler is async and
    ``run_awaitable`` is ``None``)."""
    request_id = frame.get("id")
    method = frame.get("method")
    handler = handlers.get(method) if isinstance(method, str) else None

    def failure(message: str, code: int = -32000, reason: str = "internal") -> JsonObject:
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": {"reason": reason}}}

    if handler is None:
        return failure(f"this client answers no {method!r}", -32601, "method_not_found")
    try:
        result = handler(frame.get("params") or {})
    except Exception as error:  # the host's seam failed: the server fails open on it
        return failure(f"{method}: {type(error).__name__}: {error}")
    if inspect.isawaitable(result):
        if run_awaitable is not None:
            try:
                result = run_awaitable(result)
            except Exception as error:
                return failure(f"{method}: {type(error).__name__}: {error}")
        else:

            async def finish() -> JsonObject:
                try:
                    return {"jsonrpc": "2.0", "id": request_id, "result": await result}
                except Exception as error:
                    return failure(f"{method}: {type(error).__name__}: {error}")

            return finish()
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _run_coroutine(awaitable: Any) -> Any:
    """A coroutine seam handler under the blocking client: run to completion on a fresh loop."""

    async def wrap() -> Any:
        return await awaitable

    return asyncio.run(wrap())


def _keep_notification(queue: Any, frame: JsonObject) -> None:
    if frame.get("method") != "log/appended":
        return
    notification = from_wire(AppendedParams, frame.get("params"), "log/appended")
    if isinstance(queue, asyncio.Queue):
        queue.put_nowait(notification)
    else:
        queue.append(notification)


# Helpers ------------------------------------------------------------------------------------------


def _with_absolute_path(method: str, params: JsonObject) -> JsonObject:
    """The params of a method that reads a file by ``path`` (``import``, ``capture``) with the path
    made absolute in this process's working directory: the server reads it in its own."""
    path = params.get("path")
    if method in ("import", "capture") and isinstance(path, str):
        return {**params, "path": os.path.abspath(path)}
    return params


def _socket_path(store: PathLike) -> tuple[Path, Path]:
    store_path = Path(os.path.abspath(store))
    socket_path = store_path / SOCKET_NAME
    if len(os.fsencode(socket_path)) > SOCKET_PATH_BYTES_MAX:
        raise ValueError(
            f"the socket path {socket_path} is {len(os.fsencode(socket_path))} bytes; "
            f"a Unix socket address holds at most {SOCKET_PATH_BYTES_MAX}"
        )
    return store_path, socket_path


def _connect_or_start(
    store_path: Path,
    socket_path: Path,
    mnemo_bin: Optional[PathLike],
    deadline: float,
    serve_args: tuple[str, ...],
) -> socket.socket:
    sock = _try_connect(socket_path)
    if sock is not None:
        return sock
    if mnemo_bin is None:
        raise NoServer(f"no server answers on {socket_path}")
    wait = max(deadline - time.monotonic(), CONNECT_RETRY_SECS)
    return _start_and_connect(Path(mnemo_bin), store_path, socket_path, wait, serve_args)


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
