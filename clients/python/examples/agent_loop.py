"""An agent loop on Mnemo, in Python: a host that owns its store through ``mnemo serve --stdio``.

It plays a scripted conversation turn by turn, as a runtime would:

1. before each turn, it asks for the history the next provider request carries at an 8k-token
   window (``compaction/prepare``); when the history outgrows the window the server folds the older
   turns into a checkpoint — summarized by this host's own toy summarizer, which the server calls
   back over the same connection (``seam/summarize``);
2. it appends each turn's messages as they happen (``append``, at the stream's expected revision);
3. when the scripted model calls the SearchHistory tool, the host runs it (``history/search``) and
   reads around the best hit (``history/read``), and appends the call and its result;
4. when the user asks it to remember something, the host runs the remember tool
   (``memory/remember``), and a later turn recalls it (``memory/recall``).

Run: ``python examples/agent_loop.py --mnemo target/debug/mnemo [--store DIR]``. It prints what
happened and exits non-zero when any step did not do what it should.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mnemo_client import Client, SummarizeParams, Summarizer, ToolContext, records  # noqa: E402

SESSION = "agent-loop"
WINDOW = 8000
START_MS = 1_767_225_600_000

#: The scripted conversation: (user, assistant) per turn. The user asks about one module of a
#: build at a time; the assistant answers at length, as models do.
TOPICS = [
    "the cargo cache", "the lockfile check", "the test matrix", "the release job", "the docs build",
    "the lint step", "the bench smoke run", "the fuzz job", "the NATS cluster", "the coverage report",
    "the nightly run", "the artifact upload", "the container image", "the dependency audit",
    "the flaky test quarantine", "the merge queue",
]
REMEMBER = "Please remember that the release job must never restore the cargo cache."
SEARCH_QUERY = "lockfile check"
RECALL_QUERY = "release cargo cache"


def exchange(n: int, topic: str) -> tuple[str, str]:
    ask = f"Step {n}: how does {topic} work in our CI, and what should change? " + (
        f"I keep seeing {topic} take longer than it should on every pull request. " * 8
    )
    reply = f"{topic.capitalize()} runs in its own job. " + (
        f"For {topic}, the job restores its inputs, runs, and saves what the next run can reuse. " * 12
    )
    return ask, reply


class ToySummarizer(Summarizer):
    """The host's own summarizer: no model, just the first line of every user request, in the
    summary format the server checks."""

    name = "agent-loop-toy"
    prompt_version = "toy.v1"
    # Not a model with a bounded context: it takes any input.
    limits_input = False

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummarizeParams) -> str:
        self.calls += 1
        asks = []
        for message in request.messages:
            if message.get("role") != "user":
                continue
            for part in message.get("content", []):
                if part.get("type") == "text":
                    asks.append(part["text"].split("?")[0].strip() + "?")
        done = "\n".join(f"- {ask}" for ask in asks) or "- (no requests)"
        previous = f"\nEarlier: {request.previous_summary.splitlines()[1]}" if request.previous_summary else ""
        return (
            "## Goal\nMake every CI job of the project faster and reliable.\n\n"
            f"## Progress\n### Done\nThe user asked, and the assistant explained:\n{done}{previous}\n\n"
            "### In Progress\nThe next CI job in the list.\n\n"
            "## Next Steps\n1. Continue with the next job the user asks about.\n\n"
            f"## Critical Context\nSummarized {len(request.messages)} messages (~{request.span_tokens} tokens) "
            "by the agent loop's toy summarizer.\n"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnemo", required=True, help="the mnemo binary")
    parser.add_argument("--store", help="the store directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-loop-") as scratch:
        store = Path(args.store) if args.store else Path(scratch) / "store"
        return run(Path(args.mnemo), store)


def run(mnemo: Path, store: Path) -> int:
    failures: list[str] = []
    summarizer = ToySummarizer()
    with Client.spawn(store, mnemo_bin=mnemo, client_name="agent-loop") as client:
        print(f"mnemo {client.server.server_version} on stdio, store {client.server.store}")
        client.register_seams(summarizer=summarizer, timeout_ms=30_000)
        stream = f"session/{SESSION}"
        opened = client.append(stream, [records.session_opened(SESSION, workspace="acme/ci")], expected_revision="no_stream")
        revision = opened.last_revision
        clock = START_MS
        checkpoints = 0
        largest = 0

        def say(turn: str, n: int, speaker: str, text: str) -> records.WireRecord:
            nonlocal clock
            clock += 1000
            return records.text_message(SESSION, turn, f"{turn}-{speaker}-{n}", speaker, text, timestamp_ms=clock)  # type: ignore[arg-type]

        script: list[tuple[str, str]] = [exchange(n, topic) for n, topic in enumerate(TOPICS, start=1)]
        script.insert(3, (REMEMBER, "Noted: the release job will never restore the cargo cache."))
        for n, (ask, reply) in enumerate(script, start=1):
            turn = f"t{n}"
            # Before the turn: the history its request carries, at an 8k window.
            prepared = client.prepare(SESSION, window=WINDOW, current_turn=turn)
            if prepared.seam_failures:
                failures.append(f"{turn}: seam failures {prepared.seam_failures}")
            diagnostics = prepared.history["diagnostics"]
            largest = max(largest, diagnostics["tokens_after"])
            if prepared.recorded is not None:
                # The checkpoint was appended to the session's stream: the stream moved on.
                revision = client.log(start=prepared.recorded["position"], limit=1)[0]["revision"]
                checkpoints += 1
                print(
                    f"{turn}: compacted ~{diagnostics['tokens_before']} -> ~{diagnostics['tokens_after']} tokens "
                    f"with {summarizer.name} ({len(prepared.history['items'])} items)"
                )
            # The turn: the user's request, then the model's answer, each appended as it happens.
            appended = client.append(stream, [say(turn, n, "user", ask)], expected_revision=revision)
            revision = appended.last_revision
            if ask == REMEMBER:
                remembered = client.remember(SESSION)
                print(f"{turn}: remember -> {remembered.status} {[i.content for i in remembered.items]}")
                if remembered.status != "remembered":
                    failures.append(f"{turn}: remember answered {remembered.status}: {remembered.reason}")
            if n == len(script) - 1:
                # The scripted model calls SearchHistory; the host runs it and answers the call.
                call_id = f"call-{turn}"
                arguments = {"query": SEARCH_QUERY, "limit": 3}
                found = client.search(SEARCH_QUERY, limit=3, context=ToolContext(current_session=SESSION, current_turn=turn))
                hits = [(row.title[:40], row.snippet[:60]) for row in found.rows]
                print(f"{turn}: SearchHistory({SEARCH_QUERY!r}) -> {len(found.rows)} rows {hits[:1]}")
                if not found.rows:
                    failures.append(f"{turn}: SearchHistory found nothing for {SEARCH_QUERY!r}")
                else:
                    top = found.rows[0]
                    window = client.read(top.session_id, message_id=top.message_id, before=0, after=0)
                    print(f"{turn}: ReadHistory around the hit -> {sum(len(t.messages) for t in window.turns)} messages")
                result = {"rows": [{"session_id": r.session_id, "snippet": r.snippet} for r in found.rows]}
                tool_records = [
                    records.tool_call(SESSION, turn, f"{turn}-call", call_id, "search_history", arguments, timestamp_ms=clock + 1),
                    records.tool_result(SESSION, turn, f"{turn}-result", call_id, "search_history", result, timestamp_ms=clock + 2),
                ]
                clock += 2
                revision = client.append(stream, tool_records, expected_revision=revision).last_revision
            ended = client.append(stream, [say(turn, n, "assistant", reply), records.turn_ended(SESSION, turn)], expected_revision=revision)
            revision = ended.last_revision

        # A later turn recalls what the user asked to remember.
        recalled = client.recall(SESSION, RECALL_QUERY)
        print(f"recall({RECALL_QUERY!r}) -> {[item.content for item in recalled]}")
        if not any("cargo cache" in item.content for item in recalled):
            failures.append("recall did not return the remembered rule")
        print(
            f"{len(script)} turns, head {client.stats()['head']}, {checkpoints} checkpoint(s), "
            f"{summarizer.calls} summarizer call(s) through the seam, largest request ~{largest} tokens"
        )
        if checkpoints == 0 or summarizer.calls == 0:
            failures.append("no checkpoint was summarized through the seam")
        if largest > WINDOW:
            failures.append(f"a prepared request of ~{largest} tokens does not fit the {WINDOW}-token window")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
