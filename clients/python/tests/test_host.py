"""The host methods through both clients against a real ``mnemo serve``: a Python summarizer called
back over the connection (blocking and asyncio), a seam that raises, the tail subscription, the
stdio transport, copy, memory items, rebuild and export."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import mnemo_bin
from mnemo_client import (
    AsyncClient,
    ClaimsResult,
    Client,
    CompactResult,
    FaithfulnessReport,
    MnemoError,
    StartFailed,
    SummarizeParams,
    Summarizer,
    records,
)

#: A turn of about 420 tokens: an 8k window holds about fourteen.
ASK = "Explain the build cache of module {n}. " + "The cache key covers the lockfile. " * 25
REPLY = "Module {n} caches target/ by lockfile hash. " + "Restore, build, then save. " * 30
TURNS = 20

SUMMARY = """## Goal
Speed up the CI build of every module.

## Progress
### Done
Modules cache target/ keyed by the lockfile hash (summarized by the Python host).

### In Progress
Nothing.

## Next Steps
1. Measure the cached build.

## Critical Context
The cache key covers the lockfile.
"""


class ToySummarizer(Summarizer):
    name = "python-toy"
    prompt_version = "toy.v1"
    # Not a model: it takes any input.
    limits_input = False

    def __init__(self) -> None:
        self.requests: list[SummarizeParams] = []

    def summarize(self, request: SummarizeParams) -> str:
        self.requests.append(request)
        return SUMMARY


class FailingSummarizer(Summarizer):
    name = "python-failing"
    limits_input = False

    def summarize(self, request: SummarizeParams) -> str:
        raise RuntimeError("the model quota is exhausted")


def turn(session: str, n: int) -> list[records.WireRecord]:
    t = f"t{n}"
    return [
        records.text_message(session, t, f"{session}-{t}-u", "user", ASK.format(n=n), timestamp_ms=1_767_225_600_000 + n),
        records.text_message(session, t, f"{session}-{t}-a", "assistant", REPLY.format(n=n), timestamp_ms=1_767_225_600_500 + n),
        records.turn_ended(session, t),
    ]


def test_a_python_summarizer_is_called_back_and_its_summary_is_the_checkpoint(client: Client) -> None:
    summarizer = ToySummarizer()
    registered = client.register_seams(summarizer=summarizer, timeout_ms=30_000)
    assert registered.registered == ["seam/summarize"]
    recorded = None
    for n in range(1, TURNS + 1):
        client.append("session/py", turn("py", n))
        prepared = client.prepare("py", window=8000)
        assert isinstance(prepared, CompactResult)
        assert prepared.seam_failures == []
        if prepared.recorded is not None:
            recorded = prepared
            break
    assert recorded is not None, "no checkpoint within the turns"
    assert len(summarizer.requests) == 1
    asked = summarizer.requests[0]
    assert "## Goal" in asked.instructions and asked.messages and len(asked.input_digest) == 64
    checkpoint = str(recorded.recorded)
    assert "python-toy" in checkpoint and "summarized by the Python host" in checkpoint
    assert recorded.history["diagnostics"]["decision"] == "replaced"


#: Most supporting events a claim links (the server's bound; ``docs/PROTOCOL.md``).
CLAIM_EVENTS_MAX = 20
#: A summary with the sections a checkpoint needs: one claim every model reply states, one that no
#: covered event states.
CLAIMED_SUMMARY = SUMMARY.replace(
    "Modules cache target/ keyed by the lockfile hash (summarized by the Python host).",
    "Modules cache `target/` keyed by the lockfile hash; the old cache lived in `src/legacy_cache.rs`.",
)


class ClaimingSummarizer(Summarizer):
    name = "python-claiming"
    prompt_version = "claims.v1"
    limits_input = False

    def summarize(self, request: SummarizeParams) -> str:
        return CLAIMED_SUMMARY


def short_turn(session: str, n: int) -> list[records.WireRecord]:
    t = f"t{n}"
    return [
        records.text_message(session, t, f"{session}-{t}-u", "user", f"Where does module {n} keep its build?", timestamp_ms=n),
        records.text_message(session, t, f"{session}-{t}-a", "assistant", f"Module {n} caches target/ by lockfile hash.", timestamp_ms=n),
        records.turn_ended(session, t),
    ]


def test_checkpoint_claims_link_supported_claims_to_covered_events_that_state_them(client: Client) -> None:
    turns = CLAIM_EVENTS_MAX + 4
    for n in range(1, turns + 1):
        client.append("session/cl", short_turn("cl", n))
    client.register_seams(summarizer=ClaimingSummarizer())
    compacted = client.compact("cl", window=8000)
    assert compacted.seam_failures == [] and compacted.recorded is not None, compacted.history["diagnostics"]
    checkpoint = compacted.recorded["checkpoint"]

    report = client.claims("cl", checkpoint["checkpoint"])
    assert isinstance(report, ClaimsResult)
    assert report.checkpoint == checkpoint["checkpoint"]
    assert report.position == compacted.recorded["position"]
    assert report.covered_events == checkpoint["coverage"]["event_count"]
    # Checked again, the claims agree with the faithfulness report stored with the checkpoint.
    assert report.recorded == FaithfulnessReport(**checkpoint["faithfulness"])
    assert report.matches_recorded is True
    claims = {c.claim: c for c in report.claims}
    assert len(report.claims) == checkpoint["faithfulness"]["checked"]

    unsupported = claims["src/legacy_cache.rs"]
    assert (unsupported.supported, unsupported.events, unsupported.event_count) == (False, [], 0)
    assert "src/legacy_cache.rs" in report.recorded.unsupported

    cached = claims["target/"]
    assert cached.supported is True
    # Every covered model reply states it; the answer links the first CLAIM_EVENTS_MAX of them.
    assert cached.event_count == checkpoint["coverage"]["turn_count"] > CLAIM_EVENTS_MAX
    assert len(cached.events) == CLAIM_EVENTS_MAX
    positions = [e.position for e in cached.events]
    assert positions == sorted(positions) and positions[-1] < report.position
    for linked in cached.events:
        (envelope,) = client.log(start=linked.position, limit=1)
        assert envelope["position"] == linked.position
        assert envelope["record"]["id"] == linked.event
        assert "target/" in envelope["record"]["content"]["text"], envelope

    # A checkpoint whose stored report lists no unsupported claim (as one recorded by another rule
    # would): checking again finds one, and the answer says they differ.
    (recorded_entry,) = client.log(start=report.position, limit=1)
    other = dict(recorded_entry["record"], checkpoint="hcheckpoint-" + "0" * 32,
                 faithfulness={"checked": report.recorded.checked, "unsupported": []})
    appended = client.append(recorded_entry["stream"], [records.WireRecord(kind=recorded_entry["kind"], record=other)])
    differing = client.claims("cl", other["checkpoint"])
    assert differing.position == appended.last_position
    assert differing.recorded == FaithfulnessReport(checked=report.recorded.checked, unsupported=[])
    assert differing.matches_recorded is False
    assert [c.claim for c in differing.claims if not c.supported] == ["src/legacy_cache.rs"]

    with pytest.raises(MnemoError) as unknown:
        client.claims("cl", "hcheckpoint-unknown")
    assert unknown.value.reason == "invalid_input"
    assert "hcheckpoint-unknown" in unknown.value.message


def test_a_summarizer_that_raises_fails_the_compaction_open_with_a_client_error(client: Client) -> None:
    for n in range(1, TURNS + 1):
        client.append("session/py", turn("py", n))
    head = client.stats()["head"]
    client.register_seams(summarizer=FailingSummarizer(), timeout_ms=30_000)
    result = client.compact("py", window=8000)
    assert [(f.seam, f.reason) for f in result.seam_failures] == [("seam/summarize", "client_error")]
    assert "quota" in result.seam_failures[0].message
    assert result.recorded is None
    assert client.stats()["head"] == head, "a failed compaction appends nothing"
    # Without the client's seams, the embedded summarizer compacts.
    embedded = client.compact("py", window=8000, client_seams=False)
    assert embedded.seam_failures == []


def test_the_asyncio_client_over_stdio_answers_an_async_summarizer_and_follows_the_log(tmp_path: Path) -> None:
    class AsyncToy(Summarizer):
        name = "python-async-toy"
        limits_input = False
        calls = 0

        async def summarize(self, request: SummarizeParams) -> str:
            await asyncio.sleep(0)
            AsyncToy.calls += 1
            return SUMMARY

    async def run() -> None:
        store = tmp_path / "store"
        async with await AsyncClient.spawn(store, mnemo_bin=mnemo_bin()) as client:
            assert client.server.server_name == "mnemo"
            assert "log/subscribe" in client.server.methods
            # A second process cannot take the store a spawned server owns.
            with pytest.raises(StartFailed, match="locked"):
                Client.spawn(store, mnemo_bin=mnemo_bin())
            subscribed = await client.subscribe(start=1)
            await client.register_seams(summarizer=AsyncToy())
            recorded = None
            for n in range(1, TURNS + 1):
                # Calls run concurrently on one connection: the append and a ping.
                appended, _ = await asyncio.gather(client.append("session/a", turn("a", n)), client.ping())
                assert appended.last_position >= 3 * n
                prepared = await client.prepare("a", window=8000)
                if prepared.recorded is not None:
                    recorded = prepared
                    break
            assert recorded is not None and AsyncToy.calls == 1
            positions: list[int] = []
            while len(positions) < appended.last_position:
                notification = await asyncio.wait_for(client.appended(), 30)
                assert notification.subscription == subscribed.subscription
                positions.extend(entry["position"] for entry in notification.entries)
            assert positions[: appended.last_position] == list(range(1, appended.last_position + 1))
            await client.unsubscribe(subscribed.subscription)
            with pytest.raises(MnemoError) as gone:
                await client.unsubscribe(subscribed.subscription)
            assert gone.value.reason == "not_found"
        # Closing the connection ended the spawned server: the store is free again.
        with Client.spawn(store, mnemo_bin=mnemo_bin()) as again:
            assert [s.session for s in again.sessions()] == ["a"]

    asyncio.run(run())


def test_copy_memory_items_rebuild_and_export(client: Client) -> None:
    client.append("session/py", [records.session_opened("py", workspace="py/ws")], expected_revision="no_stream")
    for n, durability in zip(range(1, 4), ["buffered", "sync_data", "sync_all"]):
        client.append("session/py", turn("py", n), durability=durability)
    with pytest.raises(MnemoError) as eventually:
        client.append("session/py", turn("py", 9), durability="eventually")
    assert eventually.value.reason == "invalid_params"
    copied = client.copy("py", up_to={"through_turn": "t2"}, target="py-branch")
    assert copied["session"] == "py-branch" and copied["events"] >= 4
    item = {
        "content": "Deploys go through make release.", "kind": "knowledge", "statement_type": "fact",
        "temporal_type": "undated", "scope": "global", "observed_at": 1_767_225_600_000,
        "origin": "user_requested", "keys": [{"key": "deploy", "key_type": "concept", "key_origin": "user"}],
        "sources": [{"session": "py", "run": "run-t1", "turn": "t1", "event": "py-t1-u"}],
    }
    applied = client.memory_apply("op-1", [{"type": "create", "item": item}])
    assert applied["results"][0]["outcome"] == "created"
    assert client.memory_apply("op-1", [{"type": "create", "item": item}])["replayed"] is True
    assert len(client.memory_list()) == 1
    assert len(client.memory_search(["deploy"])) == 1
    item_id = applied["results"][0]["item"]
    assert client.memory_get(item_id)["fields"]["content"] == "Deploys go through make release."
    assert client.memory_cursor("py").cursor >= 0
    assert "text" in client.recall_block("py", query="deploy")
    assert client.rebuild()
    exported = client.export()
    assert exported.report["sessions"] == 2
    assert "Explain the build cache of module 1" in exported.text
    with pytest.raises(MnemoError) as bad:
        client.memory_search(["deploy"], match_mode="fuzzy")
    assert bad.value.reason == "invalid_params"


def test_the_asyncio_client_on_the_socket_pipelines_calls_and_keeps_serving_after_errors(store: Path) -> None:
    async def run() -> None:
        async with await AsyncClient.connect(store, mnemo_bin=mnemo_bin(), serve_args=("--idle-exit", "120")) as client:
            for n in range(1, 4):
                await client.append("session/a", turn("a", n))
            searches = [client.search("lockfile", limit=2) for _ in range(10)]
            bad = client.call("history/search", {"query": 5})
            results = await asyncio.gather(*searches, bad, return_exceptions=True)
            assert all(not isinstance(r, BaseException) and r.rows for r in results[:10]), results
            assert isinstance(results[10], MnemoError) and results[10].reason == "invalid_params"
            # An overflow in a new turn: recovered once, then the provider's error is surfaced.
            await client.append("session/a", [records.text_message("a", "t9", "a-t9-u", "user", "Faster tests?", timestamp_ms=1)])
            overflow = dict(turn="t9", anchor="a-t9-u", reference_tokens=3000, step=0, context_length_error=True,
                            produced_output=False, steps_remaining=True)
            first = await client.recover_overflow("a", **overflow)
            assert first.action in ("resend", "retry_without_images", "failed_open"), first
            second = await client.recover_overflow("a", **overflow)
            assert second.action == "surface_provider_error"
            assert (await client.stats())["sessions"] == 1

    asyncio.run(run())


def test_a_seam_handler_may_call_the_server_on_the_same_connection(client: Client) -> None:
    class Searching(Summarizer):
        name = "python-searching"
        limits_input = False
        found = -1

        def summarize(self, request: SummarizeParams) -> str:
            # A call from inside the seam, on the connection whose call is waiting for this answer.
            Searching.found = len(client.search("lockfile", limit=3).rows)
            return SUMMARY

    for n in range(1, 5):
        client.append("session/py", turn("py", n))
    client.register_seams(summarizer=Searching())
    compacted = client.compact("py", window=8000)
    assert compacted.seam_failures == [] and compacted.recorded is not None
    assert Searching.found > 0
    assert client.stats()["sessions"] == 1


def test_a_python_memory_proposer_is_asked_with_the_evidence(client: Client) -> None:
    from mnemo_client import MemoryProposer, ProposeParams

    class Recording(MemoryProposer):
        name = "python-proposer"
        prompts: list[ProposeParams] = []

        def propose(self, request: ProposeParams) -> str:
            Recording.prompts.append(request)
            raise RuntimeError("no model in this test")

    client.append("session/m", [
        records.text_message("m", "t1", "m-u", "user", "Remember that I never use unwrap in library code.", timestamp_ms=1),
        records.turn_ended("m", "t1"),
    ])
    registered = client.register_seams(memory_proposer=Recording())
    assert registered.registered == ["seam/propose"]
    result = client.remember("m")
    assert Recording.prompts, "the proposer was not called back"
    assert "never use unwrap" in str(Recording.prompts[0].prompt["evidence"])
    assert result.status != "remembered"
