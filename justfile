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
