"""Starts the real daemon once per test session: the real model, the default catalog, a free port.

CLASSIFIERD_BIN (default ../../bin/classifierd) names the daemon; gen-index
is beside it. MODEL_DIR and ORT_LIB default to where `make deps` puts them.
A missing binary, model or runtime fails the tests; nothing is skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from classifierd import Client, ClassifierdError

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("CLASSIFIERD_BIN", ROOT / "bin" / "classifierd"))
GEN_INDEX = BIN.parent / "gen-index"
MODEL_DIR = Path(os.environ.get("MODEL_DIR", ROOT / ".cache" / "models" / "all-MiniLM-L6-v2-int8"))
ORT_LIB = Path(os.environ.get("ORT_LIB", ROOT / ".cache" / "onnxruntime-1.24.3" / "libonnxruntime.so.1"))
CATALOG = ROOT / "data" / "catalogs" / "default.json"
MAX_SESSIONS = 40


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Daemon:
    """Daemon is the running classifierd: its address and its log so far."""

    def __init__(self, address: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.address = address
        self.proc = proc
        self.log = log


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    for path in (BIN, GEN_INDEX, ORT_LIB, MODEL_DIR / "model.onnx"):
        assert path.exists(), f"{path} is missing: run `make build deps` at the repository root"
    with tempfile.TemporaryDirectory(prefix="classifierd-py-") as tmp:
        d = Path(tmp)
        index = d / "default.idx"
        subprocess.run([str(GEN_INDEX), "--catalog", str(CATALOG), "--model", str(MODEL_DIR), "--out", str(index),
                        "--ort-lib", str(ORT_LIB)], check=True, capture_output=True)
        address = f"127.0.0.1:{_free_port()}"
        log = d / "daemon.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(BIN), "--index", str(index), "--model", str(MODEL_DIR), "--listen", address,
                                     "--ort-lib", str(ORT_LIB), "--max-sessions", str(MAX_SESSIONS), "--terminal",
                                     "--terminal-logs", str(d / "terminal"), "--terminal-db", str(d / "terminal.db")],
                                    stdout=out, stderr=subprocess.STDOUT)
        try:
            with Client(address, timeout=5) as c:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        c.index_info()
                        break
                    except ClassifierdError:
                        if proc.poll() is not None or time.monotonic() > deadline:
                            raise AssertionError(f"daemon not ready:\n{log.read_text()}") from None
                        time.sleep(0.1)
            yield Daemon(address, proc, log)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with Client(daemon.address, timeout=10) as c:
        yield c
