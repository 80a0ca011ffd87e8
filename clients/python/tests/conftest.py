"""Shared fixtures: a real ``mnemo serve`` (the binary named by ``MNEMO_BIN``) on a fresh store."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from mnemo_client import Client

#: The repository root (``clients/python/tests`` is three levels below it).
REPO = Path(__file__).resolve().parents[3]
#: The real session files the repository carries (read-only; their provenance is beside them).
REAL_FIXTURES = REPO / "tests" / "fixtures" / "real"
#: How long a test waits for a shut-down server's socket to go away.
SHUTDOWN_WAIT_SECS = 30.0


def mnemo_bin() -> Path:
    value = os.environ.get("MNEMO_BIN")
    if not value:
        pytest.fail(
            "MNEMO_BIN is not set: build the CLI (cargo build -p mnemo-cli) and set "
            "MNEMO_BIN=target/debug/mnemo (relative to the repository root, or absolute)"
        )
    path = Path(value)
    if not path.is_absolute():
        path = REPO / path
    if not path.is_file():
        pytest.fail(f"MNEMO_BIN={value}: no file at {path}")
    return path


@pytest.fixture
def store() -> Iterator[Path]:
    # A short path: the socket path must fit a Unix socket address.
    base = Path(tempfile.mkdtemp(prefix="mnemo-py-"))
    try:
        yield base / "store"
    finally:
        stop_server(base / "store")
        shutil.rmtree(base, ignore_errors=True)


def stop_server(store: Path) -> None:
    """Shuts down the server of ``store`` if one runs, and waits until its socket is gone."""
    socket_path = store / "server.sock"
    if not socket_path.exists():
        return
    try:
        with Client.connect(store) as client:
            client.shutdown()
    except Exception:
        return
    deadline = time.monotonic() + SHUTDOWN_WAIT_SECS
    while socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def client(store: Path) -> Iterator[Client]:
    with Client.connect(store, mnemo_bin=mnemo_bin(), serve_args=("--idle-exit", "120")) as client:
        yield client
