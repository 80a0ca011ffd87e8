# Recipes over cargo. `just --list` shows them.

build:
    cargo build --workspace --release

test:
    cargo nextest run --workspace --no-fail-fast

demo:
    cargo run --release -p mnemo-cli -- demo

bench:
    cargo bench -p mnemo-benches

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings

# A 3-node NATS JetStream cluster on 127.0.0.1 for the shared-log tests; prints what to export.
nats-up dir="/tmp/mnemo-nats":
    .ci/nats-cluster.sh start {{dir}}

nats-down dir="/tmp/mnemo-nats":
    .ci/nats-cluster.sh stop {{dir}}
