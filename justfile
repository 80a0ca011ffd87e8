# Recipes over cargo. `just --list` shows them.

build:
    cargo build --workspace --release

test:
    cargo nextest run --workspace --no-fail-fast

demo:
    cargo run --release -p mnemo-cli -- demo

bench:
    cargo bench -p mnemo-benches

# The benchmark harness, `mnemo bench` (the CLI's feature `bench`): `just bench-harness --quick`.
bench-harness *args:
    cargo run --release -p mnemo-cli --features bench -- bench {{args}}

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy -p mnemo-cli --all-targets --features bench -- -D warnings

# The concurrency stress test for ten minutes instead of CI's thirty seconds.
soak:
    MNEMO_STRESS_SECS=600 cargo test --release -p mnemo-acceptance --test stress -- --nocapture

# An import of 200,000 lines killed with SIGKILL at 20 random moments, each completed by a rerun.
soak-import:
    MNEMO_IMPORT_KILL_LINES=200000 cargo test --release -p mnemo-acceptance --test import_kill -- --nocapture

# The fault campaign with a thousand injected faults (kill, file-size limit, disk full on a small
# tmpfs when run as root, journal damage); prints acknowledged envelopes lost per kind (must be 0).
soak-faults faults="1000":
    MNEMO_FAULTS={{faults}} cargo test --release -p mnemo-acceptance --test fault_campaign -- --nocapture

# Each fuzz target for SECS seconds (needs `cargo install cargo-fuzz`; stable with RUSTC_BOOTSTRAP).
fuzz secs="60":
    cd fuzz && for target in $(cargo fuzz list); do RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time={{secs}} || exit 1; done

# A 3-node NATS JetStream cluster on 127.0.0.1 for the shared-log tests; prints what to export.
nats-up dir="/tmp/mnemo-nats":
    .ci/nats-cluster.sh start {{dir}}

nats-down dir="/tmp/mnemo-nats":
    .ci/nats-cluster.sh stop {{dir}}

# Regenerate the protocol's checked-in JSON Schema from its Rust types (a test fails when it is stale).
schema:
    cargo run -q -p mnemo-cli -- serve --print-schema > crates/mnemo-server/schema/protocol.json
    python3 clients/python/scripts/generate_types.py
    cd clients/typescript && node scripts/generate-types.mjs
