"""The conformance scenario (``tests/conformance/scenario.json``) through this client: every step
through the client's typed method (``Client.call`` where it has none), then the log's chain head and
the assembled history. Prints one JSON document; the driver
(``crates/mnemo-cli/tests/conformance.rs``) compares it with the other clients'.

    python3 conformance_runner.py SCENARIO STORE MNEMO_BIN
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from mnemo_client import Client, MnemoError, ToolContext, WireRecord  # noqa: E402
from mnemo_client.types import to_wire  # noqa: E402

#: Envelopes read per ``log`` call while looking for the chain head.
LOG_PAGE = 1000


def expected(wire: Any) -> Any:
    return wire["exact"] if isinstance(wire, dict) else wire


def context(wire: Any) -> Any:
    return None if wire is None else ToolContext(**wire)


def run(client: Client, method: str, p: dict[str, Any]) -> Any:
    if method == "append":
        records = [WireRecord(r["kind"], r["record"]) for r in p["records"]]
        return client.append(p["stream"], records, expected(p["expected_revision"]))
    if method == "import":
        return client.import_transcript(
            path=p.get("path"), text=p.get("text"), source=p.get("source"), format=p.get("format")
        )
    if method == "history/sessions":
        return client.sessions()
    if method == "history/search":
        return client.search(
            p["query"], limit=p.get("limit"), cursor=p.get("cursor"), context=context(p.get("context")),
            as_of=p.get("as_of"),
        )
    if method == "history/read":
        return client.read(
            p["session_id"], message_id=p.get("message_id"), turn_id=p.get("turn_id"),
            before=p.get("before"), after=p.get("after"), context=context(p.get("context")),
            as_of=p.get("as_of"),
        )
    if method == "memory/remember":
        return client.remember(p["session"], tool_call=p.get("tool_call"))
    if method == "memory/recall":
        return client.recall(p["session"], p["query"], limit=p.get("limit"))
    if method == "memory/recall_block":
        return client.recall_block(p["session"], query=p.get("query"), as_of=p.get("as_of"))
    if method == "compaction/prepare":
        return client.prepare(
            p["session"], window=p.get("window"), current_turn=p.get("current_turn"),
            min_recent_turns=p.get("min_recent_turns"), search_text=p.get("search_text"),
        )
    if method in ("history/transcript", "compaction/context"):
        return client.call(method, p)
    raise ValueError(f"the scenario's method {method} has no typed method here")


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit("usage: conformance_runner.py SCENARIO STORE MNEMO_BIN")
    scenario = json.loads(Path(sys.argv[1]).read_text())
    serve_args = ("--fixed-clock", str(scenario["fixed_clock_ms"]), "--idle-exit", "60")
    with Client.connect(
        sys.argv[2], mnemo_bin=sys.argv[3], client_name="conformance-python", serve_args=serve_args
    ) as client:
        steps = []
        for step in scenario["steps"]:
            try:
                steps.append({"method": step["method"], "result": to_wire(run(client, step["method"], step["params"]))})
            except MnemoError as error:
                steps.append({
                    "method": step["method"],
                    "error": {"reason": error.reason, "code": error.code, "tool_reason": error.tool_reason,
                              "expected": error.expected, "actual": error.actual},
                })
        head = None
        start = 1
        while True:
            page = client.log(start=start, limit=LOG_PAGE)
            if not page:
                break
            head = page[-1]
            start += LOG_PAGE
        spec = scenario["history"]
        history = client.call("compaction/context", {"session": spec["session"], "window": spec["window"]})
        claims = client.claims(spec["session"], history["boundary"]["checkpoint"])
        print(json.dumps({
            "client": "python",
            "steps": steps,
            "log_head": head["position"] if head else 0,
            "log_digest": head["hash"] if head else None,
            "history": history,
            "claims": to_wire(claims),
        }, ensure_ascii=False))
        client.shutdown()


if __name__ == "__main__":
    main()
