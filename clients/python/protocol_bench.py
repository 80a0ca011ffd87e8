"""The protocol-overhead workload of ``mnemo bench --protocol`` through this client: CALLS appends of
one event each to one session, then CALLS searches of 5 rows, one call at a time, on a server it
starts for the fresh store STORE. Prints every latency, in microseconds, as JSON
(``{"append_us": [...], "search_us": [...]}``); the bench computes the percentiles.

    python3 protocol_bench.py STORE MNEMO_BIN CALLS
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from mnemo_client import Client, records  # noqa: E402

#: The words the texts are made of and the searches look for (as crates/mnemo-cli/src/protocol_bench.rs).
WORDS = ["deploy", "release", "ledger", "socket", "replay", "budget", "cursor", "digest"]
SESSION = "bench"
START_MS = 1_767_225_600_000
SEARCH_LIMIT = 5


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit("usage: protocol_bench.py STORE MNEMO_BIN CALLS")
    store, mnemo_bin, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Client.connect(store, mnemo_bin=mnemo_bin, client_name="bench-python", serve_args=("--idle-exit", "60")) as client:
        append_us = []
        for i in range(calls):
            text = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 3) % len(WORDS)]} number {i}"
            event = records.text_message(SESSION, f"t{i}", f"bench-{i}", "user", text, timestamp_ms=START_MS + i, run=f"bench-run-{i}")
            began = time.perf_counter_ns()
            client.append(f"session/{SESSION}", [event], expected_revision="any")
            append_us.append((time.perf_counter_ns() - began) // 1000)
        search_us = []
        for i in range(calls):
            began = time.perf_counter_ns()
            client.search(WORDS[i % len(WORDS)], limit=SEARCH_LIMIT)
            search_us.append((time.perf_counter_ns() - began) // 1000)
        print(json.dumps({"append_us": append_us, "search_us": search_us}))
        client.shutdown()


if __name__ == "__main__":
    main()
