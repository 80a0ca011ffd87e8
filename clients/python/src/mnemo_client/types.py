"""The protocol's parameter and result types as dataclasses.

Each dataclass mirrors one definition of the checked-in schema document
(``crates/mnemo-server/schema/protocol.json``, generated from the server's Rust types); the test
``tests/test_schema.py`` fails when a field here and a property there disagree in name or in being
required. Results are read with :func:`from_wire`, which refuses a missing required member or a
member of the wrong JSON type, naming the type and the member, and ignores members it does not know
(a newer server may add some).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

JsonObject = dict[str, Any]

#: The revision an append expects its stream at: ``"any"``, ``"no_stream"`` or an exact revision.
ExpectedRevision = Union[Literal["any", "no_stream"], int]


class WireError(ValueError):
    """A result that does not have the shape the protocol states."""


@dataclass(frozen=True)
class Limits:
    frame_bytes_max: int
    connection_calls_max: int
    calls_admitted_max: int
    connections_max: int
    idle_exit_secs: int


@dataclass(frozen=True)
class InitializeResult:
    protocol_version: int
    server_name: str
    server_version: str
    store: str
    pid: int
    methods: list[str]
    limits: Limits


@dataclass(frozen=True)
class WireRecord:
    """A record as ``append`` takes it: its kind and its payload in the log's JSON form."""

    kind: str
    record: JsonObject


@dataclass(frozen=True)
class AppendResult:
    first_position: int
    last_position: int
    last_revision: int


@dataclass(frozen=True)
class ToolContext:
    """Where a history tool call runs from."""

    current_session: Optional[str] = None
    current_turn: Optional[str] = None
    workspace: Optional[str] = None
    incognito: bool = False


@dataclass(frozen=True)
class SearchRow:
    session_id: str
    is_current_session: bool
    title: str
    summary: str
    snippet: str
    turn_id: Optional[str] = None
    message_id: Optional[str] = None
    match_kind: Optional[str] = None
    message_timestamp: Optional[int] = None
    last_message_at: Optional[int] = None
    truncated: Optional[bool] = None


@dataclass(frozen=True)
class SearchHistoryResult:
    query: str
    truncated: bool
    rows: list[SearchRow]
    next_cursor: Optional[str] = None


@dataclass(frozen=True)
class ReadMessage:
    message_id: str
    match_kind: str
    role: str
    text: str
    timestamp: int


@dataclass(frozen=True)
class ReadTurn:
    turn_id: str
    messages: list[ReadMessage]


@dataclass(frozen=True)
class ReadHistoryResult:
    session_id: str
    is_current_session: bool
    title: str
    turns: list[ReadTurn]
    has_more_before: bool
    has_more_after: bool
    anchor_message_id: Optional[str] = None
    anchor_turn_id: Optional[str] = None
    last_message_at: Optional[int] = None
    truncated: Optional[bool] = None


@dataclass(frozen=True)
class SessionInfo:
    session: str
    event_count: int
    turn_count: int
    incognito: bool
    archived: bool
    subagent: bool
    workspace: Optional[str] = None
    title: Optional[str] = None
    first_activity: Optional[int] = None
    last_activity: Optional[int] = None


@dataclass(frozen=True)
class SourceRef:
    session: str
    run: str
    turn: str
    event: str


@dataclass(frozen=True)
class RecalledItem:
    item: str
    version: int
    content: str
    kind: str
    scope: str
    keys: list[str]
    sources: list[SourceRef]
    score: int


@dataclass(frozen=True)
class RequestedItem:
    item: str
    content: str


@dataclass(frozen=True)
class RememberResult:
    status: str
    requested_items: list[RequestedItem]
    reason: Optional[str] = None


def from_wire(cls: type, value: Any, where: str = "") -> Any:
    """Reads ``value`` (decoded JSON) as ``cls``, checking every member's JSON type."""
    return _read(cls, value, where or cls.__name__)


def _read(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _read(option, value, where)
            except WireError as error:
                errors.append(str(error))
        raise WireError("; ".join(errors))
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise WireError(f"{where}: {value!r} is not one of {typing.get_args(tp)}")
    if origin is list:
        if not isinstance(value, list):
            raise WireError(f"{where}: expected an array, got {_json_type(value)}")
        (item,) = typing.get_args(tp)
        return [_read(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_json_type(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_json_type(value)}")
        hints = typing.get_type_hints(tp)
        members = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                members[f.name] = _read(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise WireError(f"{where}: the required member {f.name!r} is missing")
        return tp(**members)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is Any:
        return value
    else:
        raise WireError(f"{where}: no reader for {tp!r}")
    raise WireError(f"{where}: expected {tp.__name__}, got {_json_type(value)}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def to_wire(value: Any) -> Any:
    """A dataclass (or list of them) as the JSON members the protocol takes; ``None`` members of a
    dataclass are left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_wire(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, list):
        return [to_wire(v) for v in value]
    return value


__all__ = [
    "AppendResult",
    "ExpectedRevision",
    "InitializeResult",
    "JsonObject",
    "Limits",
    "ReadHistoryResult",
    "ReadMessage",
    "ReadTurn",
    "RecalledItem",
    "RememberResult",
    "RequestedItem",
    "SearchHistoryResult",
    "SearchRow",
    "SessionInfo",
    "SourceRef",
    "ToolContext",
    "WireError",
    "WireRecord",
    "from_wire",
    "to_wire",
]
