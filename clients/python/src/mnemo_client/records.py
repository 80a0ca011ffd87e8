"""Records in ``append``'s wire form (``docs/FORMAT.md``), for the messages a host appends most:
a session's opening, a text message of a turn, a tool call and its result, and a turn's end. Any other record is a
:class:`WireRecord` built from its kind and payload."""

from __future__ import annotations

from typing import Literal, Optional

from .types import WireRecord

Speaker = Literal["user", "assistant"]


def session_opened(
    session: str,
    *,
    workspace: Optional[str] = None,
    incognito: bool = False,
    memory: str = "enabled",
    subagent: bool = False,
) -> WireRecord:
    """A ``session_opened`` record: the session's workspace and its memory setting."""
    record: dict[str, object] = {"session": session, "incognito": incognito, "memory": memory, "subagent": subagent}
    if workspace is not None:
        record["workspace"] = workspace
    return WireRecord(kind="session_opened", record=record)


def text_message(
    session: str,
    turn: str,
    event_id: str,
    speaker: Speaker,
    text: str,
    *,
    timestamp_ms: int,
    run: Optional[str] = None,
) -> WireRecord:
    """A ``runtime_event`` carrying one text message of ``turn``, said by the user or the model.
    ``event_id`` is the event's identity (a retry with the same id is recognised, not repeated)."""
    role, author = ("user", "user") if speaker == "user" else ("model", "agent")
    return _event(session, turn, event_id, role, author, {"kind": "text", "text": text}, timestamp_ms, run)


def tool_call(
    session: str, turn: str, event_id: str, call_id: str, name: str, args: object, *, timestamp_ms: int,
    run: Optional[str] = None,
) -> WireRecord:
    """A ``runtime_event`` of the model calling tool ``name`` with ``args`` (its call id pairs it
    with the result)."""
    content = {"kind": "function_call", "id": call_id, "name": name, "args": args}
    return _event(session, turn, event_id, "model", "agent", content, timestamp_ms, run)


def tool_result(
    session: str, turn: str, event_id: str, call_id: str, name: str, result: object, *, timestamp_ms: int,
    run: Optional[str] = None, is_error: bool = False,
) -> WireRecord:
    """A ``runtime_event`` of tool ``name``'s result for the call ``call_id``."""
    content: dict[str, object] = {"kind": "function_response", "id": call_id, "name": name, "result": result}
    if is_error:
        content["isError"] = True
    return _event(session, turn, event_id, "tool", "tool", content, timestamp_ms, run)


def _event(
    session: str, turn: str, event_id: str, role: str, author: str, content: dict[str, object], timestamp_ms: int,
    run: Optional[str],
) -> WireRecord:
    run = run or f"run-{turn}"
    return WireRecord(
        kind="runtime_event",
        record={
            "id": event_id,
            "invocationId": run,
            "runId": run,
            "sessionId": session,
            "turnId": turn,
            "ts": timestamp_ms,
            "role": role,
            "author": author,
            "partial": False,
            "content": content,
        },
    )


def turn_ended(session: str, turn: str, *, status: str = "completed") -> WireRecord:
    """A ``turn_ended`` record: ``completed``, ``failed``, ``aborted`` or ``cancelled``."""
    return WireRecord(kind="turn_ended", record={"session": session, "turn": turn, "status": status})
