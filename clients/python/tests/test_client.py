"""The client against a real ``mnemo serve``: the handshake and autostart, every covered method on
a store imported from a real Claude Code session, appends at an expected revision, remember and
recall, and the server's typed errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REAL_FIXTURES, mnemo_bin
from mnemo_client import (
    PROTOCOL_VERSION,
    Client,
    MnemoError,
    NoServer,
    RecalledItem,
    SearchHistoryResult,
    StartBlockResult,
    ToolContext,
    WireRecord,
)

CLAUDE_SESSION = (
    REAL_FIXTURES / "claude-code" / "small-with-subagents" / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
)

REMEMBER_TRANSCRIPT = """\
{"kind":"session","session":"s1","workspace":"acme/api","title":"t"}
{"session":"s1","turn":"t1","role":"user","parts":[{"type":"text","text":"Our project uses fjall for storage."}]}
{"session":"s1","turn":"t2","role":"user","parts":[{"type":"text","text":"Remember that I never use unwrap in library code, in any project."}]}
"""


def session_opened(session: str) -> WireRecord:
    return WireRecord(
        kind="session_opened",
        record={"session": session, "workspace": "py/ws", "incognito": False, "memory": "enabled",
                "subagent": False},
    )


def test_handshake_states_the_version_and_a_second_client_reaches_the_same_server(
    client: Client, store: Path
) -> None:
    server = client.server
    assert server.protocol_version == PROTOCOL_VERSION
    assert server.server_name == "mnemo"
    assert Path(server.store) == store.resolve()
    for method in ["append", "history/search", "history/read", "history/sessions", "memory/recall",
                   "memory/remember"]:
        assert method in server.methods
    assert server.limits.frame_bytes_max == 8 * 1024 * 1024
    client.ping()
    with Client.connect(store, mnemo_bin=mnemo_bin()) as second:
        assert second.server.pid == server.pid


def test_without_a_binary_a_store_without_server_is_reported(tmp_path: Path) -> None:
    with pytest.raises(NoServer, match="no server answers"):
        Client.connect(tmp_path / "store")


def test_a_real_session_is_listed_searched_and_read(client: Client) -> None:
    report = client.import_transcript(path=CLAUDE_SESSION, format="claude-code")
    assert report["records"] > 0
    assert client.import_transcript(path=CLAUDE_SESSION)["status"] == "already_complete"
    # A relative path is this process's: the client sends it absolute.
    relative = os.path.relpath(CLAUDE_SESSION)
    assert not os.path.isabs(relative)
    assert client.import_transcript(path=relative)["status"] == "already_complete"

    sessions = client.sessions()
    assert len(sessions) == 1
    assert sessions[0].workspace == "/tmp/private"
    assert sessions[0].turn_count > 0
    assert sessions[0].source == "claude-code"
    assert sessions[0].parent is None

    found = client.search("hello.py", limit=3)
    assert isinstance(found, SearchHistoryResult)
    assert found.rows, "no match for hello.py"
    hit = found.rows[0]
    assert hit.session_id == sessions[0].session
    assert len(found.rows) <= 3

    read = client.read(hit.session_id, message_id=hit.message_id, before=1, after=1)
    assert read.anchor_message_id == hit.message_id
    # The hit may be a tool call found by its arguments: its turn is shown around it.
    assert read.anchor_turn_id == hit.turn_id
    assert any(t.turn_id == hit.turn_id for t in read.turns)

    # As of position 1 nothing of the session was searchable yet.
    early = client.search("hello.py", as_of=1)
    assert early.rows == []

    # Incognito refuses in the tool's own terms.
    with pytest.raises(MnemoError) as refused:
        client.search("hello.py", context=ToolContext(incognito=True))
    assert refused.value.reason == "tool_refused"
    assert refused.value.tool_reason == "incognito_active"


def test_append_at_an_expected_revision_and_a_conflict_appends_nothing(client: Client) -> None:
    first = client.append("session/py1", [session_opened("py1")], expected_revision="no_stream")
    assert first.first_position == first.last_position
    assert first.last_revision == 0
    entries = len(client.log(limit=1000))
    assert client.log_head().position == first.last_position, "log/head is the last append's position"
    assert [(s.session, s.workspace) for s in client.sessions()] == [("py1", "py/ws")]

    with pytest.raises(MnemoError) as conflict:
        client.append("session/py1", [session_opened("py1")], expected_revision="no_stream")
    assert conflict.value.reason == "conflict"
    assert conflict.value.code == -32002
    assert conflict.value.expected == "no_stream"
    assert conflict.value.actual == "0"
    with pytest.raises(MnemoError) as stale:
        client.append("session/py1", [session_opened("py1")], expected_revision=5)
    assert stale.value.reason == "conflict"
    assert (stale.value.expected, stale.value.actual) == ("5", "0")
    assert len(client.log(limit=1000)) == entries, "a refused append left envelopes"


def test_remember_then_recall(client: Client) -> None:
    client.import_transcript(text=REMEMBER_TRANSCRIPT, source="remember.jsonl")
    remembered = client.remember("s1")
    assert remembered.status == "remembered"
    assert [i.content for i in remembered.items if i.requested] == ["The user never uses unwrap in library code, in any project."]
    item = remembered.items[0].item

    recalled = client.recall("s1", "unwrap")
    assert recalled and all(isinstance(r, RecalledItem) for r in recalled)
    match = next(r for r in recalled if r.item == item)
    assert match.content == "The user never uses unwrap in library code, in any project."
    assert [s.session for s in match.sources] == ["s1"]
    # Remember is repeatable: the same request again stores nothing new.
    assert client.remember("s1").items[0].item == item


def test_recall_block_as_of_a_position_before_a_fact_was_remembered_lacks_it(client: Client) -> None:
    client.import_transcript(text=REMEMBER_TRANSCRIPT, source="remember.jsonl")
    before = client.stats()["head"]
    remembered = client.remember("s1")
    item = remembered.items[0].item
    after = client.stats()["head"]
    assert after > before

    def items(block: dict) -> list[str]:
        return [i["item"] for i in block["items"]]

    now = client.recall_block("s1", query="unwrap")
    assert item in items(now)
    assert "never uses unwrap in library code" in now["text"] and now["tokens"] > 0
    assert client.recall_block("s1", query="unwrap", as_of=after) == now
    then = client.recall_block("s1", query="unwrap", as_of=before)
    assert item not in items(then)
    assert "unwrap" not in then["text"]
    # Without a query the session's own turns up to the position select the items.
    assert item in items(client.recall_block("s1", as_of=after))
    assert item not in items(client.recall_block("s1", as_of=before))

    with pytest.raises(MnemoError) as beyond:
        client.recall_block("s1", as_of=after + 100)
    assert beyond.value.reason == "invalid_input"
    assert str(after + 100) in beyond.value.message


def test_capture_a_session_file_and_the_start_block_of_a_session_the_store_does_not_hold(client: Client) -> None:
    first = client.capture(CLAUDE_SESSION)
    assert first["report"]["format"] == "claude-code" and first["report"]["records"] > 0
    again = client.capture(CLAUDE_SESSION)
    assert (again["report"]["status"], again["report"]["records"]) == ("already_complete", 0)
    with pytest.raises(MnemoError) as missing:
        client.capture(CLAUDE_SESSION.parent / "none.jsonl")
    assert missing.value.reason == "invalid_input" and "none.jsonl" in missing.value.message

    client.import_transcript(text=REMEMBER_TRANSCRIPT, source="remember.jsonl")
    item = client.remember("s1").items[0].item
    # A new session of the workspace: the standing fact the user asked to remember is pushed.
    fresh = client.start_block(session="s-new", workspace="acme/api")
    assert isinstance(fresh, StartBlockResult)
    assert fresh.items[0].item == item and fresh.standing >= 1
    assert "never uses unwrap in library code" in fresh.text and fresh.tokens > 0
    # Another workspace's session never gets acme/api's items, whatever it asks.
    other = client.start_block(workspace="other/ws", query="fjall storage")
    assert other.items and all(i.scope != "workspace:acme/api" for i in other.items)
    with pytest.raises(MnemoError) as budget:
        client.start_block(workspace="acme/api", budget_tokens=0)
    assert budget.value.reason == "invalid_input" and "budget_tokens" in budget.value.message


def test_bad_calls_get_typed_errors_and_the_connection_keeps_serving(client: Client) -> None:
    with pytest.raises(MnemoError) as unknown:
        client.call("history/nothing")
    assert (unknown.value.reason, unknown.value.code) == ("method_not_found", -32601)

    with pytest.raises(MnemoError) as misspelt:
        client.call("history/search", {"query": "x", "limmit": 2})
    assert misspelt.value.reason == "invalid_params"
    assert "limmit" in misspelt.value.message

    with pytest.raises(MnemoError) as wrong_type:
        client.call("history/search", {"query": 5})
    assert wrong_type.value.reason == "invalid_params"

    with pytest.raises(MnemoError) as too_many:
        client.search("x", limit=99)
    assert too_many.value.reason == "tool_refused"
    assert too_many.value.tool_reason == "invalid_arguments"

    # A frame over the server's limit is refused before it is sent.
    with pytest.raises(ValueError, match="frame"):
        client.import_transcript(text="x" * (client.server.limits.frame_bytes_max + 1))

    client.ping()
    assert client.sessions() == []


def test_clients_racing_to_start_a_server_share_the_one_that_won(store: Path) -> None:
    import threading

    pids: list[int] = []
    failures: list[BaseException] = []

    def connect() -> None:
        try:
            with Client.connect(store, mnemo_bin=mnemo_bin(), serve_args=("--idle-exit", "120")) as c:
                pids.append(c.server.pid)
        except BaseException as error:  # reported below with the others
            failures.append(error)

    threads = [threading.Thread(target=connect) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(pids) == 8
    assert len(set(pids)) == 1, f"more than one server answered: {sorted(set(pids))}"


def test_a_client_after_a_shutdown_starts_a_new_server_on_the_same_store(client: Client, store: Path) -> None:
    client.import_transcript(text=REMEMBER_TRANSCRIPT, source="remember.jsonl")
    first_pid = client.server.pid
    client.shutdown()
    with Client.connect(store, mnemo_bin=mnemo_bin(), serve_args=("--idle-exit", "120")) as again:
        assert again.server.pid != first_pid
        assert [s.session for s in again.sessions()] == ["s1"]
